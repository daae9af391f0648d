"""How one training step runs under each method setting: plain PyTorch (optionally compiled, DDP on
several GPUs), DeepSpeed ZeRO 1/2/3 (with CPU offload), or FSDP 2/3 (PyTorch's fully_shard, with CPU
offload). Each stepper exposes the same two calls the timer measures: `pass_(batch)` (forward and
backward of one micro-batch) and `update()` (clipping, optimizer step, zeroing gradients).

The model file knows nothing of these; the trial's Methods choose the stepper. Imports torch.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

import torch
import torch.distributed as dist

from engine.data.presets import Model
from engine.data.space import Methods

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": None}
PROBE_REDUCE_16BIT = "TUI_PLANNER_PROBE_FSDP_REDUCE_16BIT"


def make_optimizer(model: Model, params: Any, device: str, fused: bool,
                   offloaded: bool = False) -> torch.optim.Optimizer:
    """The preset's optimizer (Adam or AdamW) with its settings; fused where asked, on a GPU, or on the host for a
    GPU's offloaded states (`offloaded`: as the export's adamw_torch_fused runs them in the Trainer)."""
    t = model.training
    cls = torch.optim.AdamW if t.optimizer == "adamw" else torch.optim.Adam
    kwargs = dict(lr=t.lr, betas=t.betas, eps=t.eps, weight_decay=t.weight_decay)
    if fused and (device == "cuda" or offloaded):
        kwargs["fused"] = True
    return cls(params, **kwargs)


class PlainStepper:
    """Eager or compiled PyTorch with AMP autocast (fp32 master weights, as HF Trainer does)."""


    def __init__(self, net: torch.nn.Module, model: Model, methods: Methods, device: str, compile: bool,
                 compile_mode: str | None = None):
        self.model, self.device = model, device
        self.dtype = DTYPES[model.training.precision]
        self.net = net
        if dist.is_initialized() and dist.get_world_size() > 1:
            ids = [torch.cuda.current_device()] if device == "cuda" else None
            self.net = torch.nn.parallel.DistributedDataParallel(net, device_ids=ids)
        self.forward = torch.compile(self.net, mode=compile_mode) if compile else self.net
        self.opt = make_optimizer(model, net.parameters(), device, fused=methods.free_lunch)
        use_scaler = self.dtype is torch.float16 and device == "cuda"
        self.scaler = torch.amp.GradScaler("cuda") if use_scaler else None
        self._accumulating = False
        # Set by a trial whose configuration accumulates: the update zeroes the gradients but keeps them,
        # so every pass runs with them in memory, as micro-batches 2..N of a training step do.
        self.keep_grads = False

    def no_sync_is_real(self) -> bool:
        return isinstance(self.net, torch.nn.parallel.DistributedDataParallel)

    def no_sync(self) -> Any:
        """Inside accumulation, DDP skips the gradient all-reduce until the last micro-batch."""
        if isinstance(self.net, torch.nn.parallel.DistributedDataParallel):
            return self.net.no_sync()
        return contextlib.nullcontext()

    def pass_(self, batch: dict[str, torch.Tensor]) -> None:
        with torch.autocast(self.device, dtype=self.dtype, enabled=self.dtype is not None):
            loss = self.forward(**batch).loss
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
        else:
            loss.backward()

    def update(self) -> None:
        clip = self.model.training.max_grad_norm
        if self.scaler is not None:
            self.scaler.unscale_(self.opt)
        if clip:
            torch.nn.utils.clip_grad_norm_(self.net.parameters(), clip)
        if self.scaler is not None:
            self.scaler.step(self.opt)
            self.scaler.update()
        else:
            self.opt.step()
        self.opt.zero_grad(set_to_none=not self.keep_grads)

def cpu_deepspeed(device: str) -> dict[str, Any]:
    """On the CPU, DeepSpeed would compile three C++ ops the first time a trial needs them (minutes each on
    a small machine, in every new environment): its CPU Adam (with offload), a CPU "fused" Adam (without),
    and a shared-memory all-reduce. There the trial takes torch's own AdamW (DeepSpeed's `torch_adam`: the
    optimizer params this returns) and goes without the all-reduce op (skip_inference_comm_build). On a GPU
    nothing changes: DeepSpeed's own Adam, as the paper's runs used."""
    if device != "cpu":
        return {}
    skip_inference_comm_build()
    return {"torch_adam": True}


def skip_inference_comm_build() -> None:
    """Mark DeepSpeed's shared-memory all-reduce op unavailable in this process, so its comm uses
    torch.distributed, as where the op cannot build: only DeepSpeed's inference tensor parallelism calls it,
    never training, and on the CPU it is compiled at every process group's start in a new environment."""
    try:
        import deepspeed.ops

        deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False  # one dict, read at comm init
    except (ImportError, AttributeError, TypeError):
        pass  # another DeepSpeed: it builds the op, slower, the same result


class DeepSpeedStepper:
    """DeepSpeed ZeRO stage 1/2/3; offload moves optimizer states (and at stage 3 parameters) to CPU."""


    def __init__(self, net: torch.nn.Module, model: Model, methods: Methods, device: str, micro_batch: int):
        import deepspeed

        self.model = model
        t = model.training
        zero: dict[str, Any] = {"stage": methods.stage, "overlap_comm": True, "contiguous_gradients": True}
        if methods.offloading:
            zero["offload_optimizer"] = {"device": "cpu", "pin_memory": device == "cuda"}
            if methods.stage == 3:
                zero["offload_param"] = {"device": "cpu", "pin_memory": device == "cuda"}
        world = dist.get_world_size() if dist.is_initialized() else 1
        self.stage, self.world, self.offloading = methods.stage, world, methods.offloading
        # DeepSpeed is told the real accumulation (as training would); the timer marks each pass as a
        # boundary or not itself (set_gradient_accumulation_boundary), so only the passes it says reduce.
        accum = max(1, t.batch_size // (micro_batch * world))
        config: dict[str, Any] = {
            "train_micro_batch_size_per_gpu": micro_batch,
            "gradient_accumulation_steps": accum,
            "train_batch_size": micro_batch * accum * world,
            "zero_optimization": zero,
            "optimizer": {
                "type": "AdamW" if t.optimizer == "adamw" else "Adam",
                "params": {"lr": t.lr, "betas": list(t.betas), "eps": t.eps, "weight_decay": t.weight_decay,
                           "adam_w_mode": t.optimizer == "adamw", **cpu_deepspeed(device)},
            },
            "zero_allow_untested_optimizer": True,
            "steps_per_print": 10**9,
            "wall_clock_breakdown": False,
        }
        if t.max_grad_norm:
            config["gradient_clipping"] = t.max_grad_norm
        if t.precision == "bf16":
            config["bf16"] = {"enabled": True}
        elif t.precision == "fp16":
            config["fp16"] = {"enabled": True, "initial_scale_power": 16}
        self.engine, self.opt, _, _ = deepspeed.initialize(model=net, model_parameters=net.parameters(),
                                                           config=config)
        self.engine.set_gradient_accumulation_boundary(True)  # every pass reduces unless inside no_sync()

    def no_sync_is_real(self) -> bool:
        """ZeRO-1 reduces gradients (and with offload copies them to the CPU) only at the accumulation
        boundary; ZeRO-2/3 reduce-scatter (and copy) on every pass."""
        return self.stage == 1 and (self.world > 1 or self.offloading)

    @contextlib.contextmanager
    def no_sync(self) -> Any:
        """Passes inside accumulation: not a boundary, so ZeRO-1 keeps its gradients local."""
        self.engine.set_gradient_accumulation_boundary(False)
        try:
            yield
        finally:
            self.engine.set_gradient_accumulation_boundary(True)

    def pass_(self, batch: dict[str, torch.Tensor]) -> None:
        loss = self.engine(**batch).loss
        self.engine.backward(loss)

    def update(self) -> None:
        self.engine.step()

    def close(self) -> None:
        """Release the engine before the next one is built: with offload its pinned host buffers (fp32
        master weights, Adam states, gradients: 16 bytes a parameter) would otherwise live on while the
        measurement's engine allocates its own, and a 2.8B model then needs twice ~45 GB of host RAM."""
        engine, self.engine, self.opt = self.engine, None, None
        if engine is not None:
            engine.destroy()
            # ZeRO-3 keeps the top module in a global stack that destroy() leaves; its hooks hold the engine.
            try:
                from deepspeed.runtime.zero import parameter_offload

                stack = parameter_offload.FWD_MODULE_STACK
                stack[:] = [m for m in stack if m is not engine.module]
            except (ImportError, AttributeError):
                pass


def allow_a_compile_per_block(blocks: int) -> None:
    """Under FSDP each block runs as a frame of its own between fully_shard's hooks (Dynamo skips them), and
    Dynamo specialises a transformers block on its layer index: one compilation a block. Past Dynamo's
    recompile_limit (8) the remaining blocks ran uncompiled; measured on 2 x H200 (the trial's 'dynamo' record),
    half of Pythia-1B's and Llama-3.2-1B's blocks did, which cost FP8 (its casts unfused) x0.7 against FSDP-3
    without it. The limit is raised to the model's blocks and a margin: identical blocks' graphs come from
    inductor's cache."""
    import torch._dynamo

    torch._dynamo.reset()  # a model built again in this process (an OOM retry) compiles its blocks afresh
    name = "recompile_limit" if hasattr(torch._dynamo.config, "recompile_limit") else "cache_size_limit"  # torch<2.7
    setattr(torch._dynamo.config, name, max(getattr(torch._dynamo.config, name), blocks + 8))


class FsdpStepper:
    """PyTorch FSDP (fully_shard): stage 3 reshards parameters after forward, stage 2 keeps them
    gathered until backward; offload keeps parameters, gradients and the optimizer step on the CPU."""


    def __init__(self, net: torch.nn.Module, model: Model, methods: Methods, device: str, compile: bool,
                 compile_mode: str | None = None):
        from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard

        self.model = model
        dtype = DTYPES[model.training.precision]
        # Gradients are reduced in fp32. A probe only (scripts, data/probes/): PROBE_REDUCE_16BIT=1 reduces them in
        # the 16-bit dtype, as accelerate's FSDP2 policy does by default; the trial records which.
        reduce = dtype if dtype and os.environ.get(PROBE_REDUCE_16BIT) == "1" else torch.float32
        self.reduce_dtype = str(reduce).removeprefix("torch.")
        mp = MixedPrecisionPolicy(param_dtype=dtype, reduce_dtype=reduce) if dtype else MixedPrecisionPolicy()
        kwargs: dict[str, Any] = {"reshard_after_forward": methods.stage == 3, "mp_policy": mp}
        if methods.offloading:
            kwargs["offload_policy"] = CPUOffloadPolicy(pin_memory=device == "cuda")
        from engine.bench.modeling import block_classes, blocks_of

        blocks = blocks_of(net, model)
        if not blocks:
            raise RuntimeError(f"FSDP: no {' or '.join(block_classes(net, model)) or 'block'} modules in "
                               f"{model.hf_class} (the preset's fsdp_wrap, or the model's _no_split_modules)")
        block_kwargs = kwargs
        if dtype and methods.activation_checkpointing:
            # FSDP casts a block's floating inputs to the 16-bit dtype before its forward, but not in the
            # checkpointed recompute (its pre-forward hook stands aside during backward); a block fed 32-bit
            # inputs (OLMo's rotary cos/sin are float32 by design) then recomputes other tensors than it saved
            # and torch.utils.checkpoint stops the step. Its inputs are left as the model makes them, in both.
            block_kwargs = {**kwargs, "mp_policy": MixedPrecisionPolicy(param_dtype=dtype, reduce_dtype=reduce,
                                                                        cast_forward_inputs=False)}
        for block in blocks:
            fully_shard(block, **block_kwargs)
        fully_shard(net, **kwargs)
        self.net = net
        if compile:
            allow_a_compile_per_block(len(blocks))
        self.forward = torch.compile(net, mode=compile_mode) if compile else net
        # With offload the parameters live on the CPU, so the optimizer steps there: fused on the host (torch's CPU
        # kernel), as the export's adamw_torch_fused runs it in the Trainer.
        self.opt = make_optimizer(model, net.parameters(), "cpu" if methods.offloading else device,
                                  fused=methods.free_lunch, offloaded=methods.offloading and device == "cuda")
        self.keep_grads = False  # as PlainStepper's
        self.fp8_scales = methods.fp8_gathered_in_float8  # weights gathered in float8: their scales after each step

    def no_sync(self) -> Any:
        return contextlib.nullcontext()

    def pass_(self, batch: dict[str, torch.Tensor]) -> None:
        # fp16 under FSDP runs without loss scaling (a few elementwise ops per step; no effect on time).
        loss = self.forward(**batch).loss
        loss.backward()

    def update(self) -> None:
        clip = self.model.training.max_grad_norm
        if clip:
            torch.nn.utils.clip_grad_norm_(self.net.parameters(), clip)
        self.opt.step()
        self.opt.zero_grad(set_to_none=not self.keep_grads)
        if self.fp8_scales:
            from engine.bench.fast import precompute_fp8_scales

            precompute_fp8_scales(self.net)


def close(stepper: Any) -> None:
    """Let go of a stepper's model, optimizer and engine (host and GPU memory) before building another."""
    if stepper is None:
        return
    if hasattr(stepper, "close"):
        stepper.close()
    for name in ("opt", "net", "forward"):
        if hasattr(stepper, name):
            setattr(stepper, name, None)


def make_stepper(net: torch.nn.Module, model: Model, methods: Methods, device: str, compile: bool,
                 micro_batch: int, compile_mode: str | None = None) -> Any:
    if methods.deepspeed:
        return DeepSpeedStepper(net, model, methods, device, micro_batch)
    if methods.fsdp:
        return FsdpStepper(net, model, methods, device, compile, compile_mode)
    return PlainStepper(net, model, methods, device, compile, compile_mode)
