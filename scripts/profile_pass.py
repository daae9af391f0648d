"""Where does a pass's time go? Profile one training pass of a preset model on the local GPU.

    python scripts/profile_pass.py --model pythia-1b --micro-batch 16 [--compile-mode MODE] [--sdpa BACKEND]
                                   [--cudnn-benchmark] [--channels-last] [--profile] [--json OUT.json]

Builds the model and the free-lunch stepper exactly as a trial does (engine.bench.modeling, engine.bench.steppers), warms
up (compilation excluded), then times passes two ways, both with the engine's synchronized timer (engine.bench.trial.Timer):
  - each pass alone (as the engine's timer does: synchronize before and after);
  - a run of passes back to back (one synchronize at the end), which shows the cost of the per-pass sync.
--cudnn-benchmark and --channels-last try two settings a trial leaves at PyTorch's defaults (cuDNN picks a
convolution algorithm by heuristic; tensors stay NCHW), to see what they are worth for convolutional models.
With --profile, one more pass runs under torch.profiler and the GPU kernel time is broken down by kind
(matrix multiplies, attention, Triton-fused element-wise/reduction, loss, copies, other) with the top kernels.
MFU uses the preset's FLOPs per sample, as every result in the store does.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

KINDS = (  # first match wins; names as CUDA/cuBLAS/Triton/cuDNN print them
    ("attention", ("flash", "fmha", "attention", "cudnn", "sdpa")),
    ("matmul", ("gemm", "sm90_xmma", "cutlass", "nvjet", "matmul", "aten::mm", "addmm", "mm_", "bmm")),
    ("loss", ("nll", "cross_entropy", "log_softmax", "logsumexp")),
    ("copy", ("memcpy", "memset", "copy_", "cat")),
    ("triton fused", ("triton",)),
)


def kind_of(name: str) -> str:
    low = name.lower()
    for kind, keys in KINDS:
        if any(k in low for k in keys):
            return kind
    return "other"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="pythia-1b")
    ap.add_argument("--gpu", default="h100", help="GPU preset whose peak the MFU uses")
    ap.add_argument("--micro-batch", type=int, default=16)
    ap.add_argument("--compile-mode", default=None, help="torch.compile mode (default: torch's default)")
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--sdpa", choices=("auto", "flash", "cudnn", "efficient"), default="auto",
                    help="restrict PyTorch SDPA to one backend (auto: PyTorch's choice)")
    ap.add_argument("--presets", type=Path, nargs="*", help="preset files (default: the shipped ones)")
    ap.add_argument("--passes", type=int, default=10)
    ap.add_argument("--cudnn-benchmark", action="store_true",
                    help="torch.backends.cudnn.benchmark = True (cuDNN times its convolution algorithms once per shape)")
    ap.add_argument("--channels-last", action="store_true",
                    help="model and image batch in channels-last memory format (NHWC)")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)

    import contextlib

    import torch

    from engine.data import formulas
    from engine.bench import modeling
    from engine.data.presets import load_presets
    from engine.data.space import Methods
    from engine.bench.steppers import make_stepper
    from engine.bench.trial import Timer

    device = "cuda" if torch.cuda.is_available() else "cpu"  # cpu: only to try the script out
    presets = load_presets(a.presets) if a.presets else load_presets()
    model = presets.model(a.model)
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    torch.backends.cudnn.benchmark = a.cudnn_benchmark
    methods = Methods(free_lunch=True)
    attn = modeling.attention_implementation(model, True, device)
    net = modeling.build_model(model, attn, device)
    if a.channels_last:
        net = net.to(memory_format=torch.channels_last)
    stepper = make_stepper(net, model, methods, device, not a.no_compile, a.micro_batch, a.compile_mode)
    gen = torch.Generator().manual_seed(0)
    batch = modeling.make_batch(model, a.micro_batch, device, gen)
    if a.channels_last:
        batch = {k: v.contiguous(memory_format=torch.channels_last) if v.dim() == 4 else v for k, v in batch.items()}

    ctx = contextlib.nullcontext()
    if a.sdpa != "auto":
        from torch.nn.attention import SDPBackend, sdpa_kernel

        ctx = sdpa_kernel({"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
                           "efficient": SDPBackend.EFFICIENT_ATTENTION}[a.sdpa])

    timer = Timer(device)  # the engine's: the GPU synchronized before and after

    def timed(n: int) -> float:
        return timer.time(lambda: [stepper.pass_(batch) for _ in range(n)])

    out: dict = {"model": a.model, "micro_batch": a.micro_batch, "compile": not a.no_compile,
                 "compile_mode": a.compile_mode, "sdpa": a.sdpa,
                 "cudnn_benchmark": a.cudnn_benchmark, "channels_last": a.channels_last, "device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
                 "torch": torch.__version__}
    with ctx:
        out["first_pass_s"] = timed(1)  # compile included
        for _ in range(2):
            stepper.pass_(batch)
        stepper.opt.zero_grad(set_to_none=False)
        out["kernel"] = modeling.detect_kernel(stepper.net, model, attn, batch)
        each = [timed(1) for _ in range(a.passes)]
        run = timed(a.passes) / a.passes
        out.update(pass_s=statistics.median(each), pass_min_s=min(each), pass_max_s=max(each),
                   back_to_back_pass_s=run, **({"peak_memory_gb": torch.cuda.max_memory_allocated() / 1e9,
                      "alloc_retries": int(torch.cuda.memory_stats().get("num_alloc_retries", 0))}
                     if device == "cuda" else {}))
        # The preset's FLOPs per optimizer step, spread over the step's samples (as every stored MFU).
        flops = model.flops_per_step * a.micro_batch / model.training.batch_size
        peak = presets.gpu(a.gpu).peak_16bit_flops
        out.update(flops_per_pass=flops, mfu=formulas.mfu(flops, out["pass_s"], 1, peak),
                   mfu_back_to_back=formulas.mfu(flops, run, 1, peak))
        if a.profile:
            from torch.profiler import ProfilerActivity, profile

            timer.sync()
            acts = [ProfilerActivity.CUDA] if device == "cuda" else [ProfilerActivity.CPU]
            with profile(activities=acts) as prof:
                stepper.pass_(batch)
                timer.sync()
            attr = "self_device_time_total" if device == "cuda" else "self_cpu_time_total"
            rows = [(e.key, getattr(e, attr) / 1e6, e.count) for e in prof.key_averages()
                    if getattr(e, attr) > 0]
            total = sum(r[1] for r in rows)
            by_kind: dict[str, float] = {}
            for name, secs, _ in rows:
                by_kind[kind_of(name)] = by_kind.get(kind_of(name), 0.0) + secs
            rows.sort(key=lambda r: -r[1])
            out["profile"] = {
                "kernel_time_s": total,
                "by_kind_s": dict(sorted(by_kind.items(), key=lambda kv: -kv[1])),
                "top": [{"name": n[:160], "s": s, "calls": c, "kind": kind_of(n)} for n, s, c in rows[:30]],
            }
    print(json.dumps(out, indent=1))
    if a.json:
        a.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
