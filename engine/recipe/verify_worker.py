"""The training process `tui-planner verify` launches under torchrun: a Hugging Face Trainer with the
exported TrainingArguments (and DeepSpeed or FSDP settings), the preset's model with random weights and
random data built as the engine builds them, timed step by step.

    torchrun --standalone --nproc-per-node N -m engine.recipe.verify_worker SPEC.json RESULT.json

Each optimizer step is timed from the Trainer's on_step_begin to on_step_end with the device synchronized
and all ranks at a barrier at both ends (engine.bench.trial.Timer): the accumulation passes, clipping and the
optimizer step, as the benchmark's step = pass x accumulation + update. Fetching the step's micro-batches
happens before on_step_begin, so data loading stays out, as in the benchmark; the time between
consecutive step ends (data, logging included) is recorded apart. Imports torch; never writes a database.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from typing import Any

from engine.bench.trial import Timer, _versions, emit, finish_rank, is_oom


def _init_process_group(device: str, spec: dict[str, Any]) -> None:
    """Start the process group as the benchmark's trial did (engine.bench.trial.process_group_backend): FSDP with
    CPU offload needs gloo beside NCCL, and accelerate, left to itself, starts NCCL alone."""
    import torch.distributed as dist

    from engine.data.space import Methods
    from engine.bench.trial import process_group_backend

    if device != "cuda" or "RANK" not in os.environ or int(os.environ.get("WORLD_SIZE", "1")) < 2 \
            or dist.is_initialized():
        return  # one process, the CPU, or started already: accelerate's own choice
    args = spec["training_args"]
    if args.get("fsdp") and (args.get("fsdp_config") or {}).get("cpu_offload"):
        dist.init_process_group(process_group_backend(device, Methods(sharding="fsdp2", offloading=True)))


def run(spec: dict[str, Any]) -> dict[str, Any]:
    import torch
    from transformers import Trainer, TrainerCallback, TrainingArguments

    from engine.bench import modeling
    from engine.bench.steppers import skip_inference_comm_build
    from engine.recipe import export as recipe

    t0 = time.perf_counter()
    device, warmup = spec["device"], spec["warmup"]
    if device == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError("--device cuda, but torch sees no CUDA GPU here")
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    _init_process_group(device, spec)
    model = recipe.model_from_plan(spec)
    kwargs = dict(spec["training_args"])
    if spec["deepspeed"] is not None:
        kwargs["deepspeed"] = spec["deepspeed"]  # the exported file's content, "auto" values and all
        if device == "cpu":  # the export itself names torch's AdamW there
            skip_inference_comm_build()
    os.environ.update(spec.get("env") or {})  # fp8: accelerate's FP8 recipe (export.fp8_env), as launch.sh sets it
    args = TrainingArguments(**kwargs)  # first: with ZeRO-3, transformers partitions the model as it is built
    torch.manual_seed(spec["seed"])
    net = modeling.build_model(model, spec["attn_implementation"] or "none", device)
    fused = spec.get("fused")
    if isinstance(fused, dict):
        from engine.bench import fast

        fast.keep_fused_loss_eager()  # as the benchmark: under torch.compile, liger's loss runs untraced
        if fast.own_patch(fused):  # the Trainer's use_liger_kernel does nothing
            # the kernels the benchmark ran: a row measured before fused left the norms to compile swapped them
            fast.apply_fused(net, model.objective, compiled=bool(args.torch_compile) and not fast.swapped_norms(fused))
    if args.torch_compile and args.fsdp:  # as the benchmark and the export's note: every block compiled
        from engine.bench.steppers import allow_a_compile_per_block

        allow_a_compile_per_block(len(modeling.blocks_of(net, model)))
    if spec["checkpointing"] == "stages":  # no HF checkpointing for this model: per stage, as the benchmark
        modeling.enable_checkpointing(net, model)

    pool = modeling.make_batch(model, args.per_device_train_batch_size, "cpu",
                               torch.Generator().manual_seed(spec["seed"]))

    class RandomData(torch.utils.data.Dataset):
        """Exactly enough random samples for max_steps (the engine's make_batch, drawn once)."""

        def __len__(self) -> int:
            return (args.per_device_train_batch_size * args.gradient_accumulation_steps * args.world_size
                    * args.max_steps)

        def __getitem__(self, i: int) -> dict[str, Any]:
            return {k: v[i % args.per_device_train_batch_size] for k, v in pool.items()}

    timer = Timer(device)
    times: list[float] = []
    ends: list[float] = []

    class StepClock(TrainerCallback):
        def on_step_begin(self, *_: Any, **__: Any) -> None:
            timer.sync()
            self.begin = time.perf_counter()

        def on_step_end(self, *_: Any, **__: Any) -> None:
            timer.sync()
            end = time.perf_counter()
            times.append(end - self.begin)
            ends.append(end)
            emit("step", index=len(times), step_s=times[-1], warmup=len(times) <= warmup)

    trainer = Trainer(model=net, args=args, train_dataset=RandomData(), callbacks=[StepClock()])
    build_s = time.perf_counter() - t0
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    trainer.train()
    wrapped = trainer.model_wrapped
    out: dict[str, Any] = {
        "status": "done", "step_times_s": times, "interval_times_s": [b - a for a, b in zip(ends, ends[1:])],
        "build_s": build_s, "versions": _versions(),
        "device_name": torch.cuda.get_device_name() if device == "cuda" else "cpu",
        "stack": {"deepspeed": bool(trainer.is_deepspeed_enabled), "fsdp": bool(trainer.is_fsdp_enabled),
                  "wrapper": type(wrapped).__name__, "world_size": args.world_size,
                  "mixed_precision": "bf16" if args.bf16 else "fp16" if args.fp16 else "fp32",
                  "matmul_fp32": _fp32_matmul(torch), "torch_compile": bool(args.torch_compile),
                  "optim": str(getattr(args.optim, "value", args.optim)),
                  "attn_implementation": getattr(net.config, "_attn_implementation", None)},
    }
    if device == "cuda":
        out["peak_memory_gb"] = torch.cuda.max_memory_allocated() / 1e9
    return out


def _fp32_matmul(torch: Any) -> str:
    """'tf32' or 'ieee': how fp32 matmuls ran. transformers sets TF32 with torch 2.9's fp32_precision, and
    reading the legacy allow_tf32 flag after that raises, so read the new one where it exists."""
    m = torch.backends.cuda.matmul
    for mode in (getattr(m, "fp32_precision", None), getattr(torch.backends, "fp32_precision", None)):
        if mode not in (None, "none"):
            return mode
    return "tf32" if m.allow_tf32 else "ieee"


def main(argv: list[str] | None = None) -> int:
    from engine.bench.environment import guard_worker, sanitize_cuda_arch_env

    guard_worker()  # first: verify, which owns this run, may already be gone
    sanitize_cuda_arch_env()
    spec_path, out_path = (sys.argv[1:] if argv is None else argv)[:2]
    with open(spec_path) as f:
        spec = json.load(f)
    code = 0
    try:
        result = run(spec)
    except Exception as e:  # noqa: BLE001 - the parent reports it; an OOM says the plan does not fit
        oom = is_oom(e)
        result = {"status": "oom" if oom else "failed", "traceback": traceback.format_exc()[-4000:],
                  "failure_message": ("out of memory: " if oom else "") + f"{type(e).__name__}: {e}"[:2000]}
        code = 1
    finish_rank(result, out_path)
    return code


if __name__ == "__main__":
    from engine.bench.environment import end_worker

    end_worker(main())  # an exception raised before main returns ends the process as Python would
