#!/usr/bin/env bash
# 2026-11-28 (twenty-first session), call 1: Pythia-6.9B's FP8 numerics again at 3e-5 (as .resume/e2.sh, the same
# seeds and batches), 360 steps, every step kept: the gap over the second half, paired step by step on the same
# batches, with its 95% interval (engine/bench/numerics.py paired_gap). Four runs side by side on 4 x H200.
export CALL_LIMIT=585 STOP_TAIL=60 TRIAL_TIMEOUT=170
bash scripts/device_parallel.sh nvidia-h200-x4 \
  0,1,2,3:g1.duckdb "numerics pythia-6.9b --extras fp8 --ckpt --micro-batch 8 --steps 360 --timeout 530 --lr 3e-5"
