#!/usr/bin/env bash
# 2026-11-28 (twenty-third session), call 4 on nvidia-h200-x2, a probe (data/probes/, not the shipped rows): call 3's
# FSDP-2 + offload trial of Pythia-1B (16 CPU threads a rank, the host's fused AdamW) with the gradients reduced in
# bf16, as accelerate's FSDP2 policy does by default, against the engine's fp32. Call 3 gave 33.3 s a step (steady
# 32.4 s) against the Trainer's 19.4 s for the same export in call 1.
export CALL_LIMIT=585 STOP_TAIL=40 TRIAL_TIMEOUT=400 OMP_NUM_THREADS=16 TUI_PLANNER_PROBE_FSDP_REDUCE_16BIT=1
bash scripts/device_parallel.sh nvidia-h200-x2 \
  0,1:i4.duckdb "pythia-1b --gpus 2 --only fsdp2+offload --exhaustive --verify-steps 1"
