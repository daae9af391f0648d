#!/usr/bin/env bash
# 2026-11-28 (twenty-third session), call 3 on nvidia-h200-x2: the engine's FSDP-2 + offload trial of Pythia-1B on
# 2 x H200 once more, now as the exported Trainer run had it: 16 CPU threads a rank (call 1's verify; call 2's trial
# had 8, half the 32 cores shared by 2 ranks) and the host's fused AdamW (the export's adamw_torch_fused; the engine
# stepped torch's foreach AdamW on the host until now). One steady step besides the per-pass timing.
export CALL_LIMIT=585 STOP_TAIL=40 TRIAL_TIMEOUT=400 OMP_NUM_THREADS=16
bash scripts/device_parallel.sh nvidia-h200-x2 \
  0,1:i3.duckdb "pythia-1b --gpus 2 --only fsdp2+offload --exhaustive --verify-steps 1"
