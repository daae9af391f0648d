#!/usr/bin/env bash
# 2026-11-28 (twenty-second session), call 1: predicted first (predict --write into .resume/h1.duckdb).
# Pythia-2.8B fp8+FSDP-3 on 4 x H200 (killed at 120 s while compiling last session; its fsdp3 sibling is measured),
# Pythia-6.9B FSDP-2 with and without fp8 on 4 x H200 (float8 gathers: the 2026-11-27 pair gathered in 16 bits),
# then Olmo-1B on 4 x H200 (measured on one H200 only).
export CALL_LIMIT=585 STOP_TAIL=70 TRIAL_TIMEOUT=240
bash scripts/device_parallel.sh nvidia-h200-x4 \
  0,1,2,3:h1.duckdb "pythia-2.8b --gpus 4 --only fp8+fsdp3 --extras fp8 --exhaustive" \
  "pythia-6.9b --gpus 4 --only fsdp2 fp8+fsdp2 --extras fp8 --exhaustive" \
  "olmo-1b --gpus 4 --only free-lunch fsdp2"
