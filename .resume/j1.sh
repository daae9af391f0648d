#!/usr/bin/env bash
# Run in the twenty-fourth session (written in the twenty-third). On nvidia-h200-x4,
# one group at a time (offload shares the host's CPUs): FSDP-2 + offload of Pythia-1B and Llama-3.2-1B on 2 and then
# 4 x H200 with the engine as it now is (glibc heap settings, the host's fused AdamW, all the cores over the ranks),
# each with a steady step. Predict first on the CPU: `tui-planner predict --model M --gpu h200 --num-gpus N
# --db .device/j1-predicted.duckdb --write: kept off the device` for both models at 2 and 4. Then export each row and `verify` it
# (scripts/device_verify.sh) in a second call. The probe put Pythia-1B's 2-GPU step near 22 s; the rows say 33-35 s.
export CALL_LIMIT=585 STOP_TAIL=60 TRIAL_TIMEOUT=330
bash scripts/device_parallel.sh nvidia-h200-x4 \
  0,1,2,3:j1.duckdb "pythia-1b --gpus 2 --only fsdp2+offload --exhaustive --verify-steps 1" \
  "llama-3.2-1b --gpus 2 --only fsdp2+offload --exhaustive --verify-steps 1" \
  "pythia-1b --gpus 4 --only fsdp2+offload --exhaustive --verify-steps 1"
