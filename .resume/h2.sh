#!/usr/bin/env bash
# 2026-11-28 (twenty-second session), call 2: offloading on 2 x H200, predicted first (predict --write into
# .resume/h2a.duckdb and h2b.duckdb): the engine had measured offloading on several GPUs for Pythia-410M only.
# Pythia-1B on cards 0,1 and Llama-3.2-1B on cards 2,3, side by side: ZeRO-1, ZeRO-2 and FSDP-2 with offload.
export CALL_LIMIT=585 STOP_TAIL=60 TRIAL_TIMEOUT=200
bash scripts/device_parallel.sh nvidia-h200-x4 \
  0,1:h2a.duckdb "pythia-1b --gpus 2 --only zero1+offload zero2+offload fsdp2+offload --exhaustive" -- \
  2,3:h2b.duckdb "llama-3.2-1b --gpus 2 --only zero1+offload zero2+offload fsdp2+offload --exhaustive"
