"""One trial, in its own process (launched by torchrun, also for one GPU): find the largest power-of-two
micro-batch that fits, then time passes and updates, synchronized, and write the result as JSON.

    torchrun --standalone --nproc-per-node N -m engine.bench.trial SPEC.json RESULT.json

Progress goes to stdout as marked JSON lines (engine.bench.events.MARKER); only rank 0 reports. Every timing
synchronizes the device (torch.cuda.synchronize, then a barrier across ranks) before the clock is read;
warm-up and compilation are timed apart and excluded. An out-of-memory error is a result (that
micro-batch does not fit), not a crash. The parent owns the database: this process never writes it.
"""

from __future__ import annotations

import contextlib
import gc
import json
import logging
import math
import os
import statistics
import sys
import time
import traceback
from typing import Any, Callable

from engine.bench.events import MARKER, TrialSpec
from engine.data.space import Methods

# How much slower than the best step a trial's lower bound must be before its timing stops early.
EARLY_STOP_MARGIN = 0.03


RANK = int(os.environ.get("RANK", "0"))
# A trial that must measure in a new process ends with this code after telling the parent at which
# micro-batch (the "relaunch" event), and the sweep launches it again without the batch search:
# - on several ranks, a rank that runs out of memory while measuring: retrying in the same process hangs,
#   as the other ranks may be waiting inside a collective (an FSDP all-gather, a barrier) it never joins;
# - DeepSpeed with CPU offload: a destroyed engine does not give back all of its pinned host memory
#   (DeepSpeed issue #7204), so the measurement's engine would need host RAM twice (a 2.8B model: the
#   host ran out of 128 GiB); only the end of the process releases it.
EXIT_RELAUNCH = 75


def emit(kind: str, *, any_rank: bool = False, **fields: Any) -> None:
    """Progress for the parent, from rank 0 (or from whichever rank has it to say, with any_rank)."""
    if RANK == 0 or any_rank:
        print(MARKER + json.dumps({"event": kind, **fields}), flush=True)


def is_oom(e: BaseException) -> bool:
    import torch

    if isinstance(e, (torch.cuda.OutOfMemoryError, MemoryError)):
        return True
    text = str(e)
    return any(s in text for s in ("out of memory", "can't allocate memory", "CUBLAS_STATUS_ALLOC_FAILED",
                                    "std::bad_alloc", "Cannot allocate memory"))


class Timer:
    """Synchronized wall-clock timing: the device is idle (and every rank has arrived) when read."""

    def __init__(self, device: str):
        import torch
        import torch.distributed as dist

        self.device, self.torch, self.dist = device, torch, dist

    def sync(self) -> None:
        if self.device == "cuda":
            self.torch.cuda.synchronize()
        if self.dist.is_initialized() and self.dist.get_world_size() > 1:
            # On the GPU, on this rank's own device (the one torch would take, named: without it rank 0 warns
            # "barrier(): using the device under current context", two lines in every trial's log pane).
            self.dist.barrier(device_ids=[self.torch.cuda.current_device()] if self.device == "cuda" else None)

    def time(self, fn: Callable[[], None]) -> float:
        self.sync()
        t0 = time.perf_counter()
        fn()
        self.sync()
        return time.perf_counter() - t0


def agree(ok: bool) -> bool:
    """Every rank takes the same branch: a micro-batch fits only if it fits on all of them (otherwise one
    rank would go on to the next size while another stops, and the next collective would hang)."""
    import torch
    import torch.distributed as dist

    if not (dist.is_initialized() and dist.get_world_size() > 1):
        return ok
    flag = torch.tensor([1 if ok else 0], device="cuda" if "nccl" in dist.get_backend() else "cpu")
    dist.all_reduce(flag, op=dist.ReduceOp.MIN)
    return bool(flag.item())


def _free(device: str) -> None:
    import torch

    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()


def _limit_cpu_memory(extra_mb: int) -> None:
    """CPU tests: cap the address space a little above what is mapped now, so a too-large batch fails
    to allocate for real, the way a GPU runs out of memory."""
    import resource

    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[0])
    now = pages * os.sysconf("SC_PAGE_SIZE")
    limit = now + extra_mb * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def hide_packages(names) -> list[str]:
    """Make optional packages look absent to this process (before anything imports them): `import` fails
    and importlib.util.find_spec answers None, so libraries take their fallback path. Returns those that
    were installed."""
    import importlib.util

    hidden = []
    for name in names:
        if name in sys.modules and sys.modules[name] is not None:
            raise RuntimeError(f"{name} is already imported; it cannot be turned off in this process")
        if importlib.util.find_spec(name) is not None:
            hidden.append(name)
        sys.modules[name] = None  # type: ignore[assignment]
    return hidden


def run(spec: TrialSpec) -> dict[str, Any]:
    from engine.data.presets import load_presets

    # Naive runs without the preset's optional fused kernels (e.g. mamba-ssm's selective scan): turned off
    # before torch and transformers import anything, since transformers uses them whenever it finds them.
    t_start = time.perf_counter()
    presets = load_presets(spec.preset_paths)
    if spec.model_source is not None:
        from engine.data.runs import RunFlags, model_for

        presets, model = model_for(presets, spec.model_source, RunFlags(**spec.run))
        if model.id != spec.model:
            raise RuntimeError(f"{spec.model_source} resolves to {model.id}, not {spec.model} as the sweep's did")
    else:
        model = presets.model(spec.model)
    kernels_off = hide_packages(model.fused_kernels) if not spec.methods.free_lunch else []

    import torch

    from engine.data import space
    from engine.bench import modeling
    from engine.bench.steppers import close as close_stepper
    from engine.bench.steppers import make_stepper

    m = spec.methods
    device = spec.device
    if device == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    per_gpu_batch, cap = _share_and_cap(spec, model)

    # Free-lunch settings (TF32 only where the GPU has it: the parent decides from the preset).
    tf32 = bool(m.free_lunch and spec.tf32 and device == "cuda")
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    compile_on = bool(spec.compile and space.uses_compile(m, model.compile))
    attn = modeling.attention_implementation(model, m.free_lunch, device)

    result: dict[str, Any] = {
        "status": "measured", "attention": attn, "compile": compile_on, "tf32": tf32,
        "compile_mode": spec.compile_mode if compile_on else None,
        **({"kernels_off": kernels_off} if kernels_off else {}),
        "versions": _versions(),
    }
    if spec.fault == "crash":
        emit("log", line="fault injection: crashing")
        os.abort()
    if spec.fault == "crash-rank1" and RANK == 1:  # one rank (on another node) dies; the others hang
        emit("log", line="fault injection: rank 1 crashing")
        os.abort()
    if spec.fault == "hang":
        emit("log", line="fault injection: hanging")
        while True:
            time.sleep(60)
    if spec.fault == "hang-building":  # as a JIT build that hangs: its FileBaton lock held open
        from torch.utils.file_baton import FileBaton

        from engine.bench.environment import extensions_root

        lock = extensions_root() / "fault" / "op" / "lock"
        lock.parent.mkdir(parents=True, exist_ok=True)
        baton = FileBaton(str(lock))
        assert baton.try_acquire()
        emit("log", line=f"fault injection: building, holding {lock}")
        while True:
            time.sleep(60)
    if spec.measure_oom_history:
        result["measure_oom"] = list(spec.measure_oom_history)
    if spec.measure_at:
        result["measured_in_new_process"] = True

    gen = torch.Generator().manual_seed(spec.seed + RANK)
    torch.manual_seed(spec.seed)

    def fresh(micro_batch: int, compile_now: bool):
        net = modeling.build_model(model, attn, device)
        if m.extras:  # beyond the paper (issue 42)
            from engine.bench import fast

            # the kernels of the compiled measurement in the uncompiled micro-batch search too: the same model
            result.update(fast.apply(net, m, model.objective, emulate_fp8=device != "cuda", compiled=compile_on))
        if m.activation_checkpointing:
            result["checkpointing"] = modeling.enable_checkpointing(net, model)
        return make_stepper(net, model, m, device, compile_now, micro_batch, spec.compile_mode)

    if spec.cpu_memory_limit_mb and device == "cpu":
        import transformers

        # Import the model's code first: under the cap, only the model's own memory should run out.
        getattr(transformers, model.config_class), getattr(transformers, model.hf_class)
        _limit_cpu_memory(spec.cpu_memory_limit_mb)

    if spec.measure_at:
        # Relaunched (EXIT_RELAUNCH): the earlier process found the largest micro-batch that fits
        # (uncompiled); measure straight at the micro-batch the sweep asks for.
        result["max_micro_batch"] = spec.max_fit or spec.measure_at
        return _measured(spec, model, m, result, fresh, spec.measure_at, compile_on, device, gen, attn, t_start)

    # 1. The largest power-of-two micro-batch that fits: one pass + one update each, no compile (as the
    #    paper). One model and engine serve every size (DeepSpeed and FSDP don't mind the batch size);
    #    after the first OOM it is thrown away, and the measurement builds a fresh one.
    try:
        stepper = fresh(1, compile_now=False)
    except Exception as e:  # noqa: BLE001
        if not is_oom(e):
            raise
        e = None
        result.update(status="oom", failure_message=f"out of memory building the model at micro-batch 1 ({m.label})")
        return _finish(result, t_start)
    best = 0
    mb = 1
    floor = spec.dominated_at_or_below
    if floor and floor * 2 <= cap:
        # Only a micro-batch above the floor can make this combination win: start there.
        mb = floor * 2
    while mb <= cap and per_gpu_batch % mb == 0:
        fits = True
        if hasattr(stepper, "keep_grads"):  # from the second size on, its passes run with the gradients held
            stepper.keep_grads = per_gpu_batch // mb > 1
        try:
            if _fault_above(spec.fault, "eager-oom-above", mb) or _fault_above(spec.fault, "oom-above", mb):  # test hooks
                raise MemoryError(f"fault injection: out of memory at micro-batch {mb} (uncompiled)")
            batch = modeling.make_batch(model, mb, device, gen)
            stepper.pass_(batch)
            stepper.update()
            if device == "cuda":
                torch.cuda.synchronize()
            del batch
        except Exception as e:  # noqa: BLE001 - an OOM is a data point; anything else is re-raised
            if not is_oom(e):
                raise
            fits, batch, e = False, None, None  # drop the traceback's frames, which hold GPU memory
        fits = agree(fits)
        emit("batch", micro_batch=mb, fits=fits)
        if not fits:
            break
        best = mb
        mb *= 2
    close_stepper(stepper)
    stepper = None
    _free(device)
    result["max_micro_batch"] = best
    if best == 0 and floor and mb > 1:
        result.update(status="dominated", micro_batch=None,
                      failure_message=f"dominated: does not fit micro-batch {mb}; at {floor} or less a measured "
                                      "combination with fewer methods is faster")
        return _finish(result, t_start)
    if best == 0:
        result.update(status="oom", failure_message=f"out of memory at micro-batch 1 ({m.label})")
        return _finish(result, t_start)
    if spec.dominated_at_or_below and best <= spec.dominated_at_or_below:
        result.update(status="dominated", micro_batch=best,
                      failure_message=f"dominated: fits micro-batch {best}, no more than a measured combination "
                                      f"with fewer methods ({spec.dominated_at_or_below})")
        return _finish(result, t_start)

    if m.deepspeed and m.offloading:
        relaunch(best, best, why="DeepSpeed's offload engine keeps host memory until its process ends", about=result)
    return _measured(spec, model, m, result, fresh, best, compile_on, device, gen, attn, t_start)


def relaunch(measure_at: int, max_fit: int | None, why: str, oom_at: int | None = None,
             about: dict[str, Any] | None = None) -> None:
    """End this trial's process group and have the sweep launch it again, measuring at `measure_at`
    (EXIT_RELAUNCH). Any rank may call it; the others are ended with it by torchrun. `about`: what the
    trial knows of itself (settings, versions), for the row if no launch measures it."""
    keep = ("attention", "compile", "tf32", "compile_mode", "kernels_off", "versions", "checkpointing", "fused", "fp8")
    fields = dict(measure_at=measure_at, max_fit=max_fit, oom_at=oom_at, why=why, rank=RANK,
                  about={k: v for k, v in (about or {}).items() if k in keep})
    emit("relaunch", any_rank=True, **fields)
    sys.stdout.flush()
    if RELAUNCH_FILE:  # the same, in a file: on a busy pipe another rank's long output can split the line
        try:
            fd = os.open(RELAUNCH_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL)  # the first rank to ask says why
            with os.fdopen(fd, "w") as f:
                json.dump(fields, f, default=str)
        except OSError:
            pass
    os._exit(EXIT_RELAUNCH)


RELAUNCH_FILE: str | None = None  # beside the result file (main)


def _share_and_cap(spec: TrialSpec, model) -> tuple[int, int]:
    """A GPU's share of the batch, and the largest micro-batch the trial may take (the share, or the cap asked for)."""
    per_gpu = model.training.batch_size // (spec.num_gpus * spec.num_nodes)
    return per_gpu, min(spec.max_micro_batch or per_gpu, per_gpu)


def _step_s(spec: TrialSpec, model, micro: int, measured: dict[str, Any]) -> float:
    """A step at `micro` from its measured pass and update: pass x accumulation + update."""
    from engine.data import formulas

    accum = formulas.grad_accum_steps(model.training.batch_size, spec.num_gpus * spec.num_nodes, micro)
    return formulas.step_time_s(measured["pass_s"], accum, measured["update_s"])


def _fault_above(fault: str | None, name: str, micro: int) -> bool:
    """Test hooks "eager-oom-above-N" (the uncompiled search runs out of memory above N) and "oom-above-N" (so does
    every measurement): whether `fault` is `name`-N with N below `micro`."""
    if not fault or not fault.startswith(name + "-"):
        return False
    limit = fault[len(name) + 1:]
    return limit.isdigit() and micro > int(limit)


def step_up_estimate_gb(peak_gb: float, held_gb: float) -> float:
    """The compiled peak at twice the micro-batch, from the one measured: what is held between steps stays, the
    rest (activations, the logits, their workspace) doubles. Gradients freed between steps (no accumulation) count
    with the part that doubles. On four H200 cells it came within 0.3-3.4% of the peak measured, once 0.3% under."""
    return held_gb + 2 * max(0.0, peak_gb - held_gb)


def step_up_blocked(spec: TrialSpec, model, measured: dict[str, Any], micro: int, searched: int,
                    compile_on: bool, several: bool) -> str | None:
    """Why a trial does not try twice its micro-batch compiled (`bench --step-up`), or None to try it."""
    per_gpu, cap = _share_and_cap(spec, model)
    up = micro * 2
    if not compile_on:
        return "the setting runs uncompiled: its uncompiled search already tried it"
    if micro < searched:
        return f"the compiled measurement already ran out of memory at micro-batch {searched}"
    if up > cap or per_gpu % up:
        return (f"above the cap of {cap}" if up > cap else
                f"{up} does not divide the {per_gpu} samples of a GPU's share of the batch")
    if several:
        return "on several GPUs a rank that runs out of memory ends the process group: one GPU only"
    peak, held, total = (measured.get(k) for k in ("peak_memory_gb", "held_memory_gb", "device_memory_gb"))
    if peak and held is not None and total:
        need = step_up_estimate_gb(peak, held)
        if need > total:
            return (f"estimated {need:.1f} GB at micro-batch {up} ({held:.1f} held + 2 x {peak - held:.1f}) of "
                    f"{total:.1f} GB")
    return None


def fresh_compile() -> None:
    """Forget what torch.compile did in this process (and its cache counters): the next compile is a fresh
    process's, static shapes and all, and its counts are its own."""
    import torch._dynamo
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    for group in ("inductor", "aot_autograd"):
        counters[group].clear()


def _step_up(spec: TrialSpec, model, result: dict[str, Any], measured: dict[str, Any], micro: int,
             compile_on: bool, several: bool, measure: Callable[[int, TrialSpec], dict[str, Any]]
             ) -> tuple[int, dict[str, Any]]:
    """`bench --step-up`: the micro-batch search runs uncompiled (the paper's method), and torch.compile's graphs
    often need less memory than eager ones, most of all where fused kernels never hold the logits. Measure once
    more at twice the micro-batch, compiled, and keep the faster: (micro-batch, its measurement). An out-of-memory
    is a result, recorded with the rest in `result["step_up"]`; timing stops early once the larger micro-batch
    cannot beat the smaller (the sweep's best other row plays no part: this compares the setting with itself).
    Dynamo is reset first: compiling the model's code again at another batch size would otherwise give it a
    dynamic batch dimension (automatic dynamic shapes), not the static graph a fresh process compiles."""
    import dataclasses

    up = micro * 2
    searched = int(result.get("max_micro_batch") or micro)
    why = step_up_blocked(spec, model, measured, micro, searched, compile_on, several)
    record: dict[str, Any] = {"micro_batch": up, "from_micro_batch": micro}
    if measured.get("peak_memory_gb") and measured.get("held_memory_gb") is not None:
        record["estimated_peak_gb"] = round(step_up_estimate_gb(measured["peak_memory_gb"],
                                                                measured["held_memory_gb"]), 2)
    if why:
        result["step_up"] = {**record, "outcome": "not tried", "why": why}
        return micro, measured

    before = _step_s(spec, model, micro, measured)
    record["step_s_at_from"] = before
    emit("log", line=f"stepping up: micro-batch {up}, compiled (its uncompiled search stopped at {searched})")
    _free(spec.device)
    fresh_compile()
    oom = False
    try:
        larger = measure(up, dataclasses.replace(spec, beat_step_s=before))
    except Exception as e:  # noqa: BLE001
        if not is_oom(e):
            raise
        e, oom = None, True
    if oom:
        _free(spec.device)  # out of the except block: its traceback's frames no longer hold the tensors
        emit("batch", micro_batch=up, fits=False)
        result["step_up"] = {**record, "outcome": "out of memory"}
        return micro, measured
    emit("batch", micro_batch=up, fits=True)
    after = _step_s(spec, model, up, larger)
    record.update(step_s=after, peak_memory_gb=larger.get("peak_memory_gb"))
    if larger.get("stopped_early") or after >= before:
        result["step_up"] = {**record, "outcome": "slower"}
        return micro, measured
    result["step_up"] = {**record, "outcome": "faster", "peak_memory_gb_at_from": measured.get("peak_memory_gb")}
    return up, larger


def _measured(spec, model, m, result, fresh, micro, compile_on, device, gen, attn, t_start) -> dict[str, Any]:
    """2. Time passes and updates at `micro`, compiled where the settings say; if the measured configuration
    runs out of memory (compiled graphs differ), halve it and try again: in this process on one rank, in a
    new one (EXIT_RELAUNCH) on several, or where the engine holds host memory until its process ends."""
    import torch.distributed as dist

    from engine.data import formulas
    from engine.bench import modeling

    several = dist.is_initialized() and dist.get_world_size() > 1
    keeps_host_memory = m.deepspeed and m.offloading
    while micro >= 1:
        try:
            measured = _measure(spec, model, fresh, micro, compile_on, device, gen, attn)
            break
        except Exception as e:  # noqa: BLE001
            if not is_oom(e):
                raise
            e = None
            if several or keeps_host_memory:  # at micro-batch 1 the sweep records the trial as out of memory
                relaunch(micro // 2, result.get("max_micro_batch"), oom_at=micro, about=result,
                         why=f"rank {RANK} ran out of memory while measuring at micro-batch {micro}")
            emit("batch", micro_batch=micro, fits=False)
            result.setdefault("measure_oom", []).append(micro)
            _free(device)
            micro //= 2
    else:
        result.update(status="oom", failure_message="out of memory while measuring at micro-batch 1")
        return _finish(result, t_start)
    if spec.step_up:
        micro, measured = _step_up(spec, model, result, measured, micro, compile_on, several,
                                   lambda mb, s: _measure(s, model, fresh, mb, compile_on, device, gen, attn))
    result.update(measured)

    # SDPA got is_causal (causal LMs) or no mask (encoders) rather than a dense mask tensor, as seen while the
    # measured passes were traced: modeling.sdpa_without_dense_masks says when and why.
    seen = modeling.masks_seen() if attn == "sdpa" else None
    if seen:
        key, flag = ("causal_mask", "is_causal flag") if model.objective == "causal-lm" else ("attention_mask", "none")
        result[key] = {"none": flag, "dense": "dense mask"}.get(seen, seen)
    accum = formulas.grad_accum_steps(model.training.batch_size, spec.num_gpus * spec.num_nodes, micro)
    step_s = formulas.step_time_s(result["pass_s"], accum, result["update_s"])
    result.update(micro_batch=micro, grad_accum=accum, step_s=step_s,
                  days=formulas.training_days(step_s, model.training.steps),
                  samples_per_s=model.training.batch_size / step_s)
    if model.seq_len:
        result["tokens_per_s"] = result["samples_per_s"] * model.seq_len
    if result.get("verify_step_s"):
        result["verify_predicted_s"] = formulas.step_time_s(result["pass_s"], result["verify_accum"],
                                                            result["update_s"])
    return _finish(result, t_start)


def _compile_cache_counts() -> dict[str, int]:
    """How much of this process's torch.compile work its caches served (engine/bench/environment.py keeps
    them between trials): inductor's FX-graph and AOTAutograd cache hits and misses."""
    try:
        from torch._dynamo.utils import counters
    except ImportError:
        return {}
    out = {}
    for group, names in (("inductor", ("fxgraph_cache_hit", "fxgraph_cache_miss")),
                         ("aot_autograd", ("autograd_cache_hit", "autograd_cache_miss"))):
        for name in names:
            out[name] = int(counters[group].get(name, 0))
    return out


class DynamoWatch(logging.Handler):
    """What torch.compile made of the measured model: graphs compiled, graph breaks, and every function for which
    Dynamo hit its recompile limit and so runs uncompiled from then on (its warning, caught as it is logged). A
    compiled row that ran partly eager says so."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.limits: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if "hit config." in text:
            self.limits.append(" ".join(text.split("\n")[:2])[:300])

    def __enter__(self) -> "DynamoWatch":
        from torch._dynamo.utils import counters

        counters["graph_break"].clear()  # this attempt's (an OOM retry in the same process counts afresh)
        counters["stats"].pop("unique_graphs", None)
        logging.getLogger("torch._dynamo").addHandler(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        logging.getLogger("torch._dynamo").removeHandler(self)

    def report(self) -> dict[str, Any]:
        from torch._dynamo.utils import counters

        breaks = counters["graph_break"]
        return {"graphs": int(counters["stats"].get("unique_graphs", 0)),
                "graph_breaks": int(sum(breaks.values())),
                "break_reasons": [f"{n} x {reason[:160]}" for reason, n in breaks.most_common(3)],
                "recompile_limit_hit": self.limits[:4]}


def _measure(spec, model, fresh, micro, compile_on, device, gen, attn) -> dict[str, Any]:
    import torch

    from engine.data import formulas
    from engine.bench import modeling
    from engine.bench.steppers import close as close_stepper

    emit("measuring", micro_batch=micro)
    timer = Timer(device)
    stepper = fresh(micro, compile_now=compile_on)
    # A configuration that accumulates keeps its gradients through the passes of a step: its update zeroes
    # them without freeing them, so the timed passes (and the peak memory) are those of micro-batches 2..N.
    # DeepSpeed's gradient buffers persist on their own.
    accum = formulas.grad_accum_steps(model.training.batch_size, spec.num_gpus * spec.num_nodes, micro)
    holds = accum > 1
    if hasattr(stepper, "keep_grads"):
        stepper.keep_grads = holds
    watch = DynamoWatch()
    try:
        if RANK == 1 and (spec.fault == "oom-measuring-rank1" and micro > 1 or spec.fault == "oom-measuring-rank1-all"):
            # Test hook: only rank 1 runs out of memory (above micro-batch 1, or at every size), while rank 0
            # goes on into the first timed pass.
            raise MemoryError("fault injection: rank 1 out of memory while measuring")
        if _fault_above(spec.fault, "oom-above", micro):  # test hook: compiled too, this size does not fit
            raise MemoryError(f"fault injection: out of memory while measuring at micro-batch {micro}")
        batch = modeling.make_batch(model, micro, device, gen)
        kernel = modeling.detect_kernel(getattr(stepper, "net", None) or stepper.engine.module, model, attn, batch)
        modeling.clear_masks_seen()  # from here: what SDPA's mask is in the measured (compiled) passes
        if device == "cuda":
            torch.cuda.reset_peak_memory_stats()

        # Warm-up (compilation happens in the first pass): timed apart, excluded from the result.
        warm = []
        watch.__enter__()  # through the timed passes too: a recompilation there is one
        for _ in range(max(1, spec.warmup)):
            warm.append(timer.time(lambda: stepper.pass_(batch)) + timer.time(stepper.update))
        # Timed (pass, update) pairs; more repetitions while the passes' spread is wide. Under DDP and
        # ZeRO-1 a pass inside gradient accumulation skips the reduction (no_sync; for DeepSpeed, not an
        # accumulation boundary) and only the last one of a step runs it: passes are timed inside no_sync,
        # and the reduction is timed apart (one synced pass minus one local pass) and counted once per
        # step. Under ZeRO-2/3 and FSDP each timed pass includes its gradient reduction, as in training.
        passes, updates, synced = [], [], []
        ddp = stepper.no_sync_is_real() if hasattr(stepper, "no_sync_is_real") else False
        slower = ""
        if device == "cuda":
            torch.cuda.reset_accumulated_memory_stats()  # retries while timing, not the batch search's OOMs
        while True:
            if ddp:
                with stepper.no_sync():
                    passes.append(timer.time(lambda: stepper.pass_(batch)))
                synced.append(timer.time(lambda: stepper.pass_(batch)))
            else:
                passes.append(timer.time(lambda: stepper.pass_(batch)))
            updates.append(timer.time(stepper.update))
            n = len(passes)
            done = n >= spec.max_repetitions or (n >= 3 and sum(passes) + sum(updates) > spec.time_budget_s)
            if not done and n >= max(2, spec.repetitions):
                done = statistics.stdev(passes) / statistics.mean(passes) / math.sqrt(n) < 0.005
            if spec.beat_step_s and n >= 2:
                # Its fastest pass and update so far (reduction left out) already make a step slower than the
                # best measured one, with a margin for timing noise: more repetitions cannot change the winner.
                # Every rank asks (one collective each time), so rank 0, which reports, knows if any rank stopped.
                bound = formulas.step_time_s(min(passes), accum, min(updates))
                mine = not done and bound > spec.beat_step_s * (1 + EARLY_STOP_MARGIN)
                if not agree(not mine):
                    done, slower = True, (f"timing stopped after {n} repetitions: at least {bound:.4g} s a step, "
                                          f"over {EARLY_STOP_MARGIN:.0%} slower than the best measured "
                                          f"({spec.beat_step_s:.4g} s)")
            # Each rank sees its own timings: all stop when any would, or one waits forever in the next pass.
            if not agree(not done):
                break
        out: dict[str, Any] = {
            "pass_s": statistics.median(passes), "update_s": statistics.median(updates),
            "pass_spread_s": max(passes) - min(passes), "update_spread_s": max(updates) - min(updates),
            "pass_times_s": passes, "update_times_s": updates, "repetitions": len(passes),
            "warmup_s": sum(warm), "compile_s": warm[0] if compile_on else 0.0, "kernel": kernel,
            "gradients_held": holds,
        }
        if slower:
            out["stopped_early"] = slower
        if compile_on:
            out["compile_cache"] = _compile_cache_counts()
            out["dynamo"] = watch.report()
        if synced:
            # The step's one gradient all-reduce, added to the update (both run once per optimizer step).
            allreduce = max(0.0, statistics.median(synced) - out["pass_s"])
            out.update(allreduce_s=allreduce, synced_pass_times_s=synced, optimizer_update_s=out["update_s"],
                       update_s=out["update_s"] + allreduce)
        if spec.verify_steps:
            # A steady run of real optimizer steps (accumulation inside no_sync), timed end to end.
            accum = spec.verify_accum or accum  # the configuration's own unless a shorter one was asked for

            def step():
                for i in range(accum):
                    ctx = stepper.no_sync() if i < accum - 1 else contextlib.nullcontext()
                    with ctx:
                        stepper.pass_(batch)
                stepper.update()

            step()
            total = timer.time(lambda: [step() for _ in range(spec.verify_steps)])
            out.update(verify_step_s=total / spec.verify_steps, verify_steps=spec.verify_steps, verify_accum=accum)
        if device == "cuda":
            out["peak_memory_gb"] = torch.cuda.max_memory_allocated() / 1e9
            # Held between steps (weights, optimizer state, gradients where accumulation keeps them): the part of
            # the peak that does not grow with the micro-batch (step_up_estimate_gb).
            out["held_memory_gb"] = torch.cuda.memory_allocated() / 1e9
            out["device_memory_gb"] = torch.cuda.mem_get_info()[1] / 1e9
            # Allocator retries (free everything cached, then malloc again) stall the GPU near full memory.
            out["alloc_retries"] = int(torch.cuda.memory_stats().get("num_alloc_retries", 0))
            out["alloc_conf"] = os.environ.get("PYTORCH_CUDA_ALLOC_CONF") or os.environ.get("PYTORCH_ALLOC_CONF") or ""
        out["cpu_threads"] = torch.get_num_threads()  # each rank's: the host's share of offloaded work runs on them
        from engine.data.space import HOST_MALLOC_ENV

        malloc = {k: os.environ[k] for k in HOST_MALLOC_ENV if k in os.environ}
        if malloc:
            out["host_malloc"] = malloc  # glibc's settings this process started with (space.HOST_MALLOC_ENV)
        if getattr(stepper, "reduce_dtype", "float32") != "float32":
            out["fsdp_reduce_dtype"] = stepper.reduce_dtype  # a probe's (steppers.PROBE_REDUCE_16BIT)
        return out
    finally:
        watch.__exit__()  # an OOM retry in this process watches its own attempt
        try:
            close_stepper(stepper)  # an OOM retry builds the next one: let this one's memory go first
        except Exception as e:  # noqa: BLE001 - never let cleanup hide the error that got us here
            emit("log", line=f"releasing the stepper failed: {type(e).__name__}: {e}")


def _finish(result: dict[str, Any], t_start: float) -> dict[str, Any]:
    result["duration_s"] = time.perf_counter() - t_start
    return result


def _versions() -> dict[str, str]:
    import importlib.metadata as md

    out = {"python": sys.version.split()[0]}
    for pkg in ("torch", "transformers", "accelerate", "deepspeed", "flash-attn", "mamba-ssm", "causal-conv1d",
                "liger-kernel", "torchao", "triton"):
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            pass
    try:
        import torch

        out["cuda"] = torch.version.cuda or "none"
        if torch.cuda.is_available():
            out["gpu_name"] = torch.cuda.get_device_name()
            out["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
    except Exception:  # noqa: BLE001 - versions are provenance, never a reason to fail
        pass
    return out


def process_group_backend(device: str, m: Methods) -> str:
    """NCCL between GPUs, gloo on the CPU. FSDP's CPU offload keeps each gradient shard on the CPU, and
    clipping all-reduces their norm there: NCCL has no CPU backend ('No backend type associated with
    device type cpu', pytorch#148532), so those trials get gloo for CPU tensors beside NCCL."""
    if device != "cuda":
        return "gloo"
    return "cpu:gloo,cuda:nccl" if m.fsdp and m.offloading else "nccl"


def main(argv: list[str] | None = None) -> int:
    from engine.bench.environment import guard_worker

    guard_worker()  # first: the sweep that owns this trial may already be gone
    argv = sys.argv[1:] if argv is None else argv
    spec_path, out_path = argv[0], argv[1]
    global RELAUNCH_FILE
    RELAUNCH_FILE = out_path + ".relaunch"
    with open(spec_path) as f:
        spec = TrialSpec.from_json(f.read())
    from engine.bench.environment import sanitize_cuda_arch_env

    sanitize_cuda_arch_env()
    import torch.distributed as dist

    if "RANK" in os.environ and not dist.is_initialized():
        backend = process_group_backend(spec.device, spec.methods)
        if spec.device == "cuda":
            import torch

            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        dist.init_process_group(backend)
    code = 0
    try:
        result = run(spec)
    except Exception as e:  # noqa: BLE001 - a crash is a recorded result; the parent decides
        result = {"status": "failed", "failure_message": f"{type(e).__name__}: {e}"[:2000],
                  "traceback": traceback.format_exc()[-4000:]}
        code = 1
    emit("done", status=result.get("status"))
    finish_rank(result, out_path)
    return code


def finish_rank(result: dict[str, Any], out_path: str) -> None:
    """Rank 0 writes the result (atomically: the parent never reads half a file); every rank leaves the
    process group. Shared by the benchmark's trials and verify's training runs."""
    import torch.distributed as dist

    if RANK == 0:
        tmp = out_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(result, f)
        os.replace(tmp, out_path)
        emit("result", result=result)  # the parent may be on another node, behind an NFS cache
    if dist.is_initialized():
        try:
            dist.destroy_process_group()
        except Exception:  # noqa: BLE001 - leaving is best effort; the result is already written
            pass


if __name__ == "__main__":
    from engine.bench.environment import end_worker

    end_worker(main())  # an exception raised before main returns ends the process as Python would
