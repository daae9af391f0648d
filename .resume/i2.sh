#!/usr/bin/env bash
# 2026-11-28 (twenty-third session), call 2 on nvidia-h200-x2: the engine's own FSDP-2 + offload trial of Pythia-1B
# on 2 x H200 again (58.5 days from per-pass timings on 2026-11-28), now with --verify-steps 2: two real optimizer
# steps (16 passes and the update) timed end to end in the same process. The Hugging Face Trainer ran the export
# at 19.4 s a step in call 1 against the row's 35.35 s: is it the engine's per-pass timing or its setup? Then
# Pythia-1B FSDP-2 without offload, the same way (first measured here; the 14.0 s row is 2 machines x 2 GPUs).
export CALL_LIMIT=585 STOP_TAIL=40 TRIAL_TIMEOUT=330
bash scripts/device_parallel.sh nvidia-h200-x2 \
  0,1:i2.duckdb "pythia-1b --gpus 2 --only fsdp2+offload --exhaustive --verify-steps 2" \
  "pythia-1b --gpus 2 --only fsdp2 --exhaustive --verify-steps 2"
