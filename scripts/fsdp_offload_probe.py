"""Where does an FSDP + CPU offload pass's time go? A probe (data/probes/), not a trial.

    torchrun --standalone --nproc-per-node 2 scripts/fsdp_offload_probe.py --model pythia-1b --micro-batch 32 \
        --json OUT.json

Builds the preset model and the FSDP stepper with CPU offload exactly as a trial does (engine.bench.modeling,
engine.bench.steppers.FsdpStepper, compiled), warms up (compilation excluded), then times passes, each synchronized
(GPU and ranks) as the engine's timer does, three ways:
  - held: the gradients of earlier passes are held on the host (micro-batches 2..N of a step; the engine's rows);
  - first: no gradient held (each pass as the first micro-batch of a step: FSDP copies to pinned memory without
    waiting and adds nothing on the host);
  - once: held, and the pass does not reduce (set_requires_gradient_sync(False): what accelerate's no_sync does),
    so the unsharded gradients stay on the GPU in fp32 until the step's last pass.
With --profile, one held pass runs under torch.profiler and rank 0 prints the operators that took the most host
time. Each rank uses the CPU threads it is given (OMP_NUM_THREADS); the JSON records them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="pythia-1b")
    p.add_argument("--micro-batch", type=int, default=32)
    p.add_argument("--sharding", default="fsdp2", choices=("fsdp2", "fsdp3"))
    p.add_argument("--passes", type=int, default=4)
    p.add_argument("--profile", action="store_true")
    p.add_argument("--json", default=None)
    p.add_argument("--presets", nargs="*", default=[], help="extra preset files (a tiny model for a CPU smoke run)")
    args = p.parse_args()

    import torch
    import torch.distributed as dist

    from engine.bench import modeling
    from engine.bench.steppers import FsdpStepper
    from engine.bench.trial import Timer, process_group_backend
    from engine.data.presets import load_presets
    from engine.data.space import Methods

    rank = int(os.environ.get("RANK", "0"))
    device = "cuda" if torch.cuda.is_available() else "cpu"  # the CPU: a smoke run of the script only
    if device == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    methods = Methods(sharding=args.sharding, offloading=True)
    dist.init_process_group(process_group_backend(device, methods))
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    model = load_presets(args.presets).model(args.model)
    modeling.sdpa_without_dense_masks()
    net = modeling.build_model(model, modeling.attention_implementation(model, True, device), device)
    stepper = FsdpStepper(net, model, methods, device, compile=device == "cuda")
    stepper.keep_grads = True
    batch = modeling.make_batch(model, args.micro_batch, device, torch.Generator().manual_seed(rank))
    timer = Timer(device)

    def held() -> float:
        return timer.time(lambda: stepper.pass_(batch))

    def first() -> float:
        stepper.opt.zero_grad(set_to_none=True)
        return timer.time(lambda: stepper.pass_(batch))

    def once() -> float:
        stepper.net.set_requires_gradient_sync(False)
        try:
            return timer.time(lambda: stepper.pass_(batch))
        finally:
            stepper.net.set_requires_gradient_sync(True)

    out: dict = {"model": args.model, "micro_batch": args.micro_batch, "sharding": args.sharding,
                 "world": dist.get_world_size(), "cpu_threads": torch.get_num_threads(),
                 "gpu": torch.cuda.get_device_name() if device == "cuda" else "cpu", "torch": torch.__version__}
    warm = [timer.time(lambda: stepper.pass_(batch)) + timer.time(stepper.update) for _ in range(2)]
    out["warmup_s"] = warm
    for name, fn in (("held", held), ("first", first), ("once", once)):
        times = [fn() for _ in range(args.passes)]
        out[f"{name}_pass_s"] = statistics.median(times)
        out[f"{name}_pass_times_s"] = times
        stepper.opt.zero_grad(set_to_none=False)
    # the pass that ends a step after 'once' passes: it reduces the gradients held on the GPU
    once()
    out["last_after_once_s"] = held()
    out["update_s"] = statistics.median([timer.time(stepper.update) for _ in range(3)])
    out["peak_memory_gb"] = torch.cuda.max_memory_allocated() / 1e9 if device == "cuda" else None
    if args.profile:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            held()
        table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=18, max_name_column_width=60)
        if rank == 0:
            print(table)
        out["profile_top"] = [
            {"name": e.key, "self_cpu_ms": e.self_cpu_time_total / 1e3, "count": e.count,
             "device_ms": getattr(e, "self_device_time_total", 0) / 1e3}
            for e in sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)[:25]]
    if rank == 0:
        print(json.dumps({k: v for k, v in out.items() if k != "profile_top"}, indent=1))
        if args.json:
            Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
