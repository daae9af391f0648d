#!/usr/bin/env bash
# On a lent machine of 2+ GPUs (the `device` tool): NCCL's bus bandwidth over each way the trials move
# GPU-to-GPU traffic (scripts/nccl_probe.py): the machine's own links (NVLink), host-staged
# (NCCL_P2P_DISABLE=1), and two emulated nodes of half the GPUs each over TCP sockets on the loopback
# interface (as `bench --nodes 2 --launcher local-nodes` runs them). -> $OUT/nccl_probe.jsonl, $OUT/nccl_probe.log
#   bash scripts/device_probe.sh [GPUS]     (default: every GPU the machine has)
set -u
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
n=${1:-$(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)}
out="$OUT/nccl_probe.jsonl"
probe() { timeout -s TERM -k 10 120 "$@" 2>&1 | grep -v "^\[rank\|UserWarning\|warnings.warn\|^W[0-9]" | tee -a "$OUT/nccl_probe.log"; }
probe torchrun --standalone --nproc-per-node "$n" scripts/nccl_probe.py --label own --out "$out"
probe env NCCL_P2P_DISABLE=1 torchrun --standalone --nproc-per-node "$n" scripts/nccl_probe.py --label host-staged --out "$out"
half=$(( n / 2 ))
if [ "$half" -ge 1 ]; then
  pids=()
  for i in 0 1; do
    devs=$(seq -s, $(( i * half )) $(( i * half + half - 1 )))
    CUDA_VISIBLE_DEVICES=$devs NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_SOCKET_IFNAME=lo \
      timeout -s TERM -k 10 180 torchrun --nnodes 2 --nproc-per-node "$half" --node-rank "$i" --rdzv-backend c10d \
      --rdzv-endpoint 127.0.0.1:29571 --rdzv-id nccl-probe scripts/nccl_probe.py --label sockets --out "$out" \
      > "$OUT/nccl_probe_node$i.log" 2>&1 &
    pids+=($!)
  done
  wait "${pids[@]}"
  grep -h "busbw" "$OUT"/nccl_probe_node*.log | tee -a "$OUT/nccl_probe.log"
fi
