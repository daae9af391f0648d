#!/usr/bin/env bash
# 2026-11-28 (twenty-first session), call 3: FP8's numerics on Pythia-1B at 32,768 tokens a step (64 x 512, eight
# times the 6.9B run's), 400 steps at 1e-4, four runs side by side on 4 x H200; then Pythia-1B DDP free-lunch and
# fp8 on the 4 GPUs (predicted first: predict --write into .resume/g3.duckdb).
export CALL_LIMIT=585 STOP_TAIL=110 TRIAL_TIMEOUT=200
bash scripts/device_parallel.sh nvidia-h200-x4 \
  0,1,2,3:g3.duckdb "numerics pythia-1b --extras fp8 --micro-batch 64 --seq-len 512 --steps 400 --timeout 330 --lr 1e-4" \
  "pythia-1b --gpus 4 --only free-lunch fp8 --extras fp8 --exhaustive"
