#!/usr/bin/env bash
# 2026-11-28 (twenty-third session), call 6 on nvidia-h200-x2, a probe (data/probes/): call 5's FSDP-2 + offload probe
# (fp32 reduction) with glibc told to keep large blocks on its heap (MALLOC_MMAP_THRESHOLD_ 4 GiB, no trimming): is
# the held pass's extra 1.5 s the host's fresh pages (each blocking copy of a gradient to the CPU allocates pageable
# memory, which glibc maps anew for blocks past 32 MB)?
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1 OMP_NUM_THREADS=16
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD
MALLOC_MMAP_THRESHOLD_=4294967296 MALLOC_TRIM_THRESHOLD_=68719476736 MALLOC_TOP_PAD_=1073741824 \
  timeout 200 torchrun --standalone --nproc-per-node 2 scripts/fsdp_offload_probe.py --model pythia-1b \
  --micro-batch 32 --passes 3 --json "$OUT/fsdp2-offload-fp32-heap.json" > "$OUT/fsdp2-offload-fp32-heap.log" 2>&1
echo "=== rc=$? at ${SECONDS}s"; grep -v "^\[rank" "$OUT/fsdp2-offload-fp32-heap.log" | grep -v Warn | tail -30 | cut -c1-170
