#!/usr/bin/env bash
# Twenty-fourth session, on nvidia-h200 (1 x H200): does the Hugging Face Trainer fit and run the exports of the
# two rows the compiled step-up made faster (Llama-3.2-1B fused and fused+fp8, micro-batch 32, which the uncompiled
# search does not fit)? Each: export from the shipped database, then `verify` (3 timed steps after a compiling one).
set -u
VERIFY_STEPS=3 timeout 300 bash scripts/device_verify.sh db/tui-planner.duckdb llama-fused-32 \
  --trial 9d7199aef79b4b9c80edfa8d4d470a5b
echo "=== at ${SECONDS}s"
left=$(( 585 - SECONDS ))
[ $left -gt 150 ] && VERIFY_STEPS=2 timeout $left bash scripts/device_verify.sh db/tui-planner.duckdb llama-fused-fp8-32 \
  --trial 08c8cc236f594b78ae8632a791877a3c
echo "=== done at ${SECONDS}s"
