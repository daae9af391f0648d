#!/usr/bin/env bash
# 2026-11-28 (twenty-first session), call 4 (the session's last 300 s): Pythia-2.8B FSDP-3 with and without fp8 on
# 4 x H200, predicted first (predict --write into .resume/g4.duckdb): on 4 x H100 fp8 was x1.06 the days, on
# 2 x H200 x0.89.
export CALL_LIMIT=225 STOP_TAIL=100 TRIAL_TIMEOUT=120
bash scripts/device_parallel.sh nvidia-h200-x4 \
  0,1,2,3:g4.duckdb "pythia-2.8b --gpus 4 --only fsdp3 fp8+fsdp3 --extras fp8 --exhaustive"
