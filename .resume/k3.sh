#!/usr/bin/env bash
# Twenty-fourth session, nvidia-h200 (1 x H200), the session's last 296 s: Llama-3.2-1B fused with --step-up again,
# after the fix that resets Dynamo before the larger micro-batch compiles (k1.sh's step-ups compiled it with a dynamic
# batch dimension). Predicted first into .device/k3-predicted.duckdb.
export CALL_LIMIT=235 TRIAL_TIMEOUT=220
bash scripts/device_bench.sh nvidia-h200 k3.duckdb "llama-3.2-1b:free-lunch --only fused --exhaustive --step-up"
