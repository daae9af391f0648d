#!/usr/bin/env bash
# Twenty-fourth session (issue 42): the compiled step-up (`bench --step-up`) on one H200 each, four cards side by side
# on nvidia-h200-x4. Predictions written first on the CPU into .device/k1-predicted.duckdb (`tui-planner predict
# --model M --gpu h200 --num-gpus 1 --methods L --write`), kept off the device (the carried files' limit).
export CALL_LIMIT=585 STOP_TAIL=200 TRIAL_TIMEOUT=420
bash scripts/device_parallel.sh nvidia-h200-x4 \
  0:k1a.duckdb "llama-3.2-1b:free-lunch --only fused --exhaustive --step-up" \
               "llama-3.2-1b:free-lunch --only free-lunch --exhaustive --step-up" -- \
  1:k1b.duckdb "llama-3.2-1b:free-lunch --only fused+fp8 --exhaustive --step-up" -- \
  2:k1c.duckdb "llama-3.2-1b:free-lunch --only fp8 --exhaustive --step-up" -- \
  3:k1d.duckdb "pythia-1b:free-lunch --only fused+fp8 --exhaustive --step-up"
