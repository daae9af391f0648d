"""Why a mixture of experts trains twice as fast per FLOP under FSDP as under DDP or on one GPU (issue 40).

Measured on 2 x H200 (2026-11-28): OLMoE-6l at 36-38% MFU under FSDP-2/3, 16% under DDP, 19% on one GPU; all
three compile. They differ in how: FSDP compiles each block as a frame of its own (fully_shard's hooks sit between
them), DDP and one GPU compile the whole model. This probe times one GPU's training step (forward, backward,
fused AdamW; bf16 autocast, TF32) of the same model under each way of compiling and each of transformers' expert
kernels, synchronised, MFU beside every time, and prints what Dynamo made of it.

    python scripts/moe_compile_probe.py examples/configs/olmoe-1b-7b-6l.json --micro-batch 16 \
        --variants whole:grouped_mm blocks:grouped_mm eager:grouped_mm whole:batched_mm

A diagnostic for the device, not the engine's measurement (no rows are written): its output is quoted in
docs/measurements.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _to_bf16(grouped_mm):
    import torch

    def cast(input, weight, offs):
        if torch.is_autocast_enabled() and weight.dtype == torch.float32:
            weight = weight.to(torch.bfloat16)
        return grouped_mm(input, weight, offs)

    return cast


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", help="a preset id or a config.json")
    ap.add_argument("--micro-batch", type=int, default=16)
    ap.add_argument("--device", default="cuda", help="cuda, or cpu to try the probe itself on a tiny config")
    ap.add_argument("--steps", type=int, default=6, help="timed steps after three warm-up steps")
    ap.add_argument("--variants", nargs="+", default=["whole:grouped_mm", "blocks:grouped_mm", "eager:grouped_mm"],
                    help="COMPILE:EXPERTS pairs; COMPILE is whole, blocks or eager; EXPERTS one of transformers' "
                         "experts implementations (grouped_mm, batched_mm, eager)")
    args = ap.parse_args()

    import torch
    import torch._dynamo
    from torch._dynamo.utils import counters

    from engine.bench import modeling
    from engine.bench.steppers import make_optimizer
    from engine.bench.sweep import gpu_preset_for
    from engine.predict import terms
    from engine.data.presets import load_presets
    from engine.data.runs import model_for

    presets, model = model_for(load_presets(), args.model)
    import transformers.integrations.moe as moe

    moe._grouped_mm_original = moe._grouped_mm
    dev = args.device
    cuda = dev == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    name = torch.cuda.get_device_name() if cuda else "cpu"
    gpu_id = gpu_preset_for(name, presets) if cuda else None
    peak = presets.gpus[gpu_id].peak_16bit_flops if gpu_id else None
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    flops_per_sample = terms.flops_per_sample(model)  # the engine's count (MFU's numerator)
    print(json.dumps({"model": model.id, "gpu": name, "torch": torch.__version__,
                      "micro_batch": args.micro_batch, "peak": peak, "flops_per_sample": flops_per_sample}))
    for variant in args.variants:
        how, experts = variant.split(":")
        cast = experts.endswith("-bf16")  # the experts' weights cast to bf16 for their products, as autocast does
        experts = experts.removesuffix("-bf16")  # for a Linear (transformers' grouped_mm is outside autocast)
        moe = sys.modules.get("transformers.integrations.moe")
        if moe is not None:
            moe._grouped_mm = _to_bf16(moe._grouped_mm_original) if cast else moe._grouped_mm_original
        torch._dynamo.reset()
        counters.clear()
        if cuda:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        net = modeling.build_model(model, "sdpa", dev)
        net.config._experts_implementation = experts
        for sub in net.modules():
            if hasattr(sub, "config") and hasattr(sub.config, "_experts_implementation"):
                sub.config._experts_implementation = experts
        forward = net
        if how == "whole":
            forward = torch.compile(net)
        elif how == "blocks":
            blocks = modeling.blocks_of(net, model)
            torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, len(blocks) + 8)
            for b in blocks:
                b.compile()
        opt = make_optimizer(model, net.parameters(), dev, fused=True)
        gen = torch.Generator().manual_seed(0)
        batch = modeling.make_batch(model, args.micro_batch, dev, gen)

        def step() -> None:
            with torch.autocast(dev, dtype=torch.bfloat16):
                loss = forward(**batch).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)

        t0 = time.perf_counter()
        try:
            for _ in range(3):
                step()
            sync()
            warm = time.perf_counter() - t0
            times = []
            for _ in range(args.steps):
                sync()
                t = time.perf_counter()
                step()
                sync()
                times.append(time.perf_counter() - t)
        except torch.OutOfMemoryError:
            print(json.dumps({"variant": variant, "result": "out of memory"}))
            del net, opt, forward
            continue
        times.sort()
        med = times[len(times) // 2]
        mfu = (flops_per_sample * args.micro_batch / med / peak) if (flops_per_sample and peak) else None
        print(json.dumps({"variant": variant, "step_s": round(med, 4), "spread_s": round(times[-1] - times[0], 4),
                          "mfu": round(mfu, 3) if mfu else None, "warmup_s": round(warm, 1),
                          "peak_gb": round(torch.cuda.max_memory_allocated() / 1e9, 1) if cuda else None,
                          "graphs": int(counters["stats"].get("unique_graphs", 0)),
                          "graph_breaks": int(sum(counters["graph_break"].values())),
                          "break_reasons": [r[:200] for r in list(counters["graph_break"])[:3]]}), flush=True)
        del net, opt, forward
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
