#!/usr/bin/env bash
# 2026-11-28 (twenty-third session), call 5 on nvidia-h200-x2, a probe (data/probes/): where an FSDP-2 + offload
# pass of Pythia-1B (micro-batch 32, 2 x H200, 16 CPU threads a rank) spends its time: gradients held on the host
# (the engine's rows), none held (a step's first micro-batch), not reduced (accelerate's no_sync), with a profile
# of a held pass; with fp32 and then bf16 gradient reduction.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1 OMP_NUM_THREADS=16
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 > "$OUT/machine.txt"
for reduce in fp32 bf16; do
  [ "$reduce" = bf16 ] && export TUI_PLANNER_PROBE_FSDP_REDUCE_16BIT=1
  timeout 240 torchrun --standalone --nproc-per-node 2 scripts/fsdp_offload_probe.py --model pythia-1b \
    --micro-batch 32 --profile --json "$OUT/fsdp2-offload-$reduce.json" > "$OUT/fsdp2-offload-$reduce.log" 2>&1
  echo "=== $reduce rc=$? at ${SECONDS}s"; grep -v "^\[rank" "$OUT/fsdp2-offload-$reduce.log" | grep -v Warn | tail -45 | cut -c1-170
done
