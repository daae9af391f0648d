#!/usr/bin/env bash
# 2026-11-28 (twenty-second session), call 3: predicted first (predict --write into .resume/h3.duckdb), one group
# only, so no other trial shares the host's CPUs: Pythia-1B FSDP-2 + offload on 2 x H200 again (in call 2 it ran
# beside Llama's and took 2.8x the predicted days), then offloading on 4 x H200: Pythia-1B ZeRO-1 and FSDP-2 with
# offload, Llama-3.2-1B ZeRO-1 with offload.
export CALL_LIMIT=585 STOP_TAIL=60 TRIAL_TIMEOUT=200
bash scripts/device_parallel.sh nvidia-h200-x4 \
  0,1,2,3:h3.duckdb "pythia-1b --gpus 2 --only fsdp2+offload --exhaustive" \
  "pythia-1b --gpus 4 --only fsdp2+offload zero1+offload --exhaustive" \
  "llama-3.2-1b --gpus 4 --only zero1+offload fsdp2+offload --exhaustive"
