#!/usr/bin/env bash
# 2026-11-28 (twenty-third session), call 1 on nvidia-h200-x2: does a Hugging Face Trainer run of an exported FSDP
# setting take the benchmark's step time? The export now sets accelerate's sync_each_batch (reduce after every
# micro-batch, as the benchmark measures); the same export with it off (accelerate's default for FSDP2: reduce once
# a step, unsharded fp32 gradients held meanwhile) is trained next to show what the engine does not yet measure.
#   Pythia-1B, 2 x H200, fsdp2+offload (trial c08aab58: 35.35 s a step, 58.5 days): each micro-batch, then once
#   Pythia-1B, 2 x H200, fsdp3 (trial ddc03ce2: 10.78 s a step): once a step (each: the benchmark's own row)
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/machine.txt" 2>&1
once() {  # a copy of an export with sync_each_batch off, verified
  src=$1; dst=$2
  rm -rf "$OUT/$dst"; cp -r "$OUT/$src" "$OUT/$dst"; rm -f "$OUT/$dst/verify.json"
  python3 - "$OUT/$dst/training_args.json" <<'PY'
import json, sys
p = sys.argv[1]; a = json.load(open(p))
a.setdefault("accelerator_config", {}).setdefault("gradient_accumulation_kwargs", {})["sync_each_batch"] = False
json.dump(a, open(p, "w"), indent=1)
PY
  PYTHONPATH=/tmp/site:$PWD timeout "$3" python3 -m tui_planner verify "$OUT/$dst" --steps 2 --warmup 1 --timeout $(( $3 - 10 )) -v \
    2>&1 | tee "$OUT/$dst.log" | grep -v "^\[rank" | tail -15
}
VERIFY_STEPS=2 timeout 250 bash scripts/device_verify.sh db/tui-planner.duckdb p1b-x2-fsdp2-offload-each \
  --trial c08aab5831384e3c8524de68209be7fa
echo "=== at ${SECONDS}s"
once p1b-x2-fsdp2-offload-each p1b-x2-fsdp2-offload-once 200
echo "=== at ${SECONDS}s"
left=$(( 560 - SECONDS ))
if [ $left -gt 90 ]; then
  VERIFY_STEPS=2 timeout $(( left / 2 + 20 )) bash scripts/device_verify.sh db/tui-planner.duckdb p1b-x2-fsdp3-each \
    --trial ddc03ce229254bcc8562b19c4f549988
  echo "=== at ${SECONDS}s"
  left=$(( 575 - SECONDS ))
  [ $left -gt 60 ] && once p1b-x2-fsdp3-each p1b-x2-fsdp3-once $left
fi
echo "=== done at ${SECONDS}s"
