#!/usr/bin/env bash
# 2026-11-28 (twenty-first session), call 2: issue 42's methods on 2 x H200 cells nobody measured, predicted
# first (predict --write into .resume/g2a.duckdb and g2b.duckdb): Pythia-2.8B FSDP-3 with and without fp8 (float8
# gathers) on cards 0,1; Llama-3.2-1B DDP free-lunch, fused and fp8 on cards 2,3. Side by side on 4 x H200.
export CALL_LIMIT=585 STOP_TAIL=140 TRIAL_TIMEOUT=240
bash scripts/device_parallel.sh nvidia-h200-x4 \
  0,1:g2a.duckdb "pythia-2.8b --gpus 2 --only fsdp3 fp8+fsdp3 --extras fp8 --exhaustive" -- \
  2,3:g2b.duckdb "llama-3.2-1b --gpus 2 --only free-lunch fused fp8 --extras fused fp8 --exhaustive"
