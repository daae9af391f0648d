#!/usr/bin/env python3
"""How fast NCCL's collectives run over the links of this machine, as the trials use them: the rate the
predictor's communication term divides by (engine/predict/terms.py), measured instead of assumed.

    torchrun --standalone --nproc-per-node 4 scripts/nccl_probe.py --label nvlink --out probe.jsonl
    NCCL_P2P_DISABLE=1 torchrun ... --label host-staged          (GPU-to-GPU traffic through host memory)
    two agents of 2 GPUs each, NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_SOCKET_IFNAME=lo ... --label sockets

For all-reduce, all-gather and reduce-scatter over 16-bit buffers of 64 MB to 1 GB (a Pythia layer's
gradients to a whole model's): warm-up iterations untimed, then timed ones between two
torch.cuda.synchronize() + barrier pairs. Bus bandwidth as nccl-tests defines it (its PERFORMANCE.md):
algorithm bandwidth (bytes / time) x 2(n-1)/n for all-reduce, x (n-1)/n for all-gather and reduce-scatter,
which is what each GPU sends per second over its busiest link, so one figure compares across GPU counts.
Rank 0 writes one JSON line per collective and size (the environment's NCCL variables, nodes, GPUs, the
card, torch and NCCL versions beside it).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import time

import torch
import torch.distributed as dist

FACTOR = {"all_reduce": lambda n: 2 * (n - 1) / n, "all_gather": lambda n: (n - 1) / n,
          "reduce_scatter": lambda n: (n - 1) / n}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--label", required=True, help="what carries the traffic: nvlink, host-staged, sockets, ...")
    ap.add_argument("--sizes-mb", default="64,256,1024", help="buffer sizes in MB (default 64,256,1024)")
    ap.add_argument("--iters", type=int, default=10, help="timed iterations a size (default 10)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--out", help="append the JSON lines here (rank 0)")
    ap.add_argument("--cpu", action="store_true", help="gloo on the CPU, fp32 (a dry run of the script)")
    args = ap.parse_args()

    dist.init_process_group("gloo" if args.cpu else "nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    dev, dtype = ("cpu", torch.float32) if args.cpu else ("cuda", torch.bfloat16)
    sync = (lambda: None) if args.cpu else torch.cuda.synchronize
    if not args.cpu:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    nodes = int(os.environ.get("GROUP_WORLD_SIZE", os.environ.get("NNODES", 1)) or 1)
    env = {k: v for k, v in os.environ.items() if k.startswith(("NCCL_", "NVSHMEM_", "TORCH_SYMM"))}
    for mb in (int(x) for x in args.sizes_mb.split(",")):
        numel = mb * 2**20 // (4 if args.cpu else 2)  # 16-bit elements (fp32 on the CPU)
        for op in ("all_reduce", "all_gather", "reduce_scatter"):
            if op == "all_reduce":
                buf = torch.ones(numel, dtype=dtype, device=dev)
                run = lambda: dist.all_reduce(buf)  # noqa: E731
            elif op == "all_gather":
                part = torch.ones(numel // world, dtype=dtype, device=dev)
                full = torch.empty(part.numel() * world, dtype=dtype, device=dev)
                run = lambda: dist.all_gather_into_tensor(full, part)  # noqa: E731
            else:
                full = torch.ones(numel // world * world, dtype=dtype, device=dev)
                part = torch.empty(numel // world, dtype=dtype, device=dev)
                run = lambda: dist.reduce_scatter_tensor(part, full)  # noqa: E731
            for _ in range(args.warmup):
                run()
            sync()
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(args.iters):
                run()
            sync()
            dist.barrier()
            seconds = (time.perf_counter() - t0) / args.iters
            size = numel * (4 if args.cpu else 2)
            algbw = size / seconds
            row = {"script": "scripts/nccl_probe.py", "label": args.label, "op": op, "bytes": size, "world": world,
                   "nodes": nodes, "seconds": seconds, "algbw_gbs": algbw / 1e9,
                   "busbw_gbs": algbw * FACTOR[op](world) / 1e9, "device": "cpu" if args.cpu else torch.cuda.get_device_name(),
                   "torch": torch.__version__, "nccl": None if args.cpu else ".".join(map(str, torch.cuda.nccl.version())), "env": env,
                   "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}
            if rank == 0:
                print(f"{args.label:12s} {op:15s} {size / 2**20:6.0f} MB  {seconds * 1e3:8.2f} ms  "
                      f"busbw {row['busbw_gbs']:7.1f} GB/s", flush=True)
                if args.out:
                    with open(args.out, "a") as f:
                        f.write(json.dumps(row) + "\n")
            if not args.cpu:
                torch.cuda.empty_cache()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
