"""The engine's one small API: plan a sweep over the search space, run each trial in its own process,
write each result to the store the moment it finishes, and report progress as typed events.

    request = SweepRequest(model="pythia-1b", methods="all", db="results.duckdb")
    run_id = run_sweep(request, on_event=print)

The CLI and the app both drive this; results reach a UI through the store. A sweep that is
interrupted resumes where it stopped: trials whose key is already in the database are skipped.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import shlex
import tempfile
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from engine.data import formulas, locks, safe, space
from engine.bench.environment import (Machine, clear_build_locks, deepspeed_import_error, host_info, interconnect_of,
                                      max_repetitions, nccl_settings, p2p_disabled, probe, trial_env)
from engine.data.links import HOST_STAGED
from engine.data.errors import PlannerError
from engine.bench.events import (BatchTried, Log, SearchGuided, SweepFinished, SweepStarted, TrialFinished, TrialSkipped, TrialSpec,
                           TrialStarted)
from engine.bench.launcher import TrialOutcome, run_trial
from engine.data.presets import Presets, load_presets
from engine.data.runs import run_columns
from engine.data.store import Run, Store, Trial, evidence_rows, plain
from engine.data.generations import judge


@dataclass
class SweepRequest:
    model: str
    methods: str = "all"  # naive | free-lunch | all
    num_gpus: int = 1
    num_nodes: int = 1
    launcher: str = "local"  # local | local-nodes | srun (engine/bench/launcher.py); more than one node needs one of the last two
    gpu: str | None = None  # GPU preset id; detected from the local GPU when None
    device: str = "cuda"
    db: str | Path | None = None
    presets: tuple[str, ...] = ()
    timeout_s: float = 900.0
    # The search (engine/bench/guide.py): guided by default, predicting every combination first (from this
    # database and the shipped one, without this cell's own rows), measuring in order of predicted time and
    # leaving unrun what cannot beat the best measured even at its band's low end, or what is dominated.
    # exhaustive: measure every combination, dominated ones too (the paper's full search).
    exhaustive: bool = False
    guide: object | None = None  # the predictions to guide by (a Guide); None: predicted here on a GPU
    repetitions: int = 5  # timed repetitions at least; more while the spread is wide, up to
    # $TUI_PLANNER_MAX_REPETITIONS (default 20: engine.bench.environment.max_repetitions)
    warmup: int = 2
    verify_steps: int = 0  # a steady run of this many real steps checks the free-lunch result
    verify_accum: int = 0  # 0: the configuration's own accumulation (a true steady run)
    # After the uncompiled micro-batch search (the paper's), measure each compiled setting once more at twice the
    # micro-batch, compiled, where its measured peak leaves room, and keep the faster (one GPU; engine/bench/trial.py).
    step_up: bool = False
    max_micro_batch: int | None = None
    cpu_memory_limit_mb: int | None = None
    compile: bool = True
    compile_mode: str | None = None  # torch.compile mode for free-lunch (None: default); see COMPILE_MODES
    only: tuple[str, ...] = ()  # combination labels to run (e.g. "ckpt", "zero3+offload"); empty: all
    # Methods beyond the paper's (engine/data/space.py EXTRAS: fused, fp8): each point's variants with them are
    # searched too. A label in `only` that names one adds it.
    extras: tuple[str, ...] = ()
    faults: dict[str, str] = field(default_factory=dict)  # test hook: combination label -> crash | hang
    device_kind: str | None = None  # provenance: the lent machine kind, if any
    note: str | None = None
    # Skip combinations the memory model (engine/predict/memory.py, calibrated on measured fits) says cannot fit
    # or cannot beat a dominating one; recorded as source 'predicted', failure_kind 'memory'. CUDA only.
    memory_skip: bool = True
    # A trial that crashed or timed out twice (and never got a result) is not tried again on resume: the
    # same host-memory kill or hang would cost its time once more. True: try those again too.
    retry_failed: bool = False
    # Start no new trial after this many seconds (a SLURM job's or a lent machine's time limit): the sweep
    # ends as stopped after the running trial, and the same request resumes it. None: no limit.
    stop_after_s: float | None = None
    # Your own run (engine/data/runs.py): RunFlags' fields (tokens, batch, seq_len, ...) applied to the model;
    # `model` may also be the path of a config.json. Resolved by run_sweep into `model` (the run's id) and
    # `model_source` (what names the model), which every trial resolves again the same way.
    run: dict = field(default_factory=dict)
    model_source: str | None = None
    # GPU-to-GPU traffic staged through host memory (NCCL_P2P_DISABLE=1 in every trial), as on cards without peer
    # access: the PCIe workstations and servers the planner recommends, measured on a machine with NVLink. Its
    # rows are another cell (their key ends in |host-staged), never NVLink rows. NCCL_P2P_DISABLE=1 in this
    # process's own environment does the same.
    no_p2p: bool = False
    # Several nodes: the network preset between them, for the guided search's predictions. None: with the
    # local-nodes launcher, 'loopback' (the emulated nodes' TCP sockets on this machine); else none named, and
    # the predictions treat the nodes' GPUs as one machine's (the log says so).
    network: str | None = None


COMPILE_MODES = space.COMPILE_MODES  # torch.compile's modes a sweep may ask for (None: torch's default)


def resolve_model(req: SweepRequest) -> tuple[Presets, SweepRequest]:
    """The presets with the model the request names, on its run, and the request with `model` set to that
    model's id (a config.json path, or a run of its own, makes an id of its own: engine/data/runs.py)."""
    from engine.data.runs import RunFlags, model_for

    if req.model_source is not None:  # resolved already (a resumed or re-planned request)
        presets, model = model_for(load_presets(req.presets), req.model_source, RunFlags(**req.run))
        return presets, req
    presets, model = model_for(load_presets(req.presets), req.model, RunFlags(**req.run))
    source = str(Path(req.model).expanduser().resolve()) if Path(req.model).suffix == ".json" else req.model
    return presets, dataclasses.replace(req, model=model.id, model_source=source)


def host_staged(req: SweepRequest) -> bool:
    """Whether this sweep's GPUs talk through host memory (no peer access): one node, several GPUs, and
    --no-p2p or NCCL_P2P_DISABLE=1 here."""
    import os

    return req.num_nodes == 1 and req.num_gpus > 1 and (req.no_p2p or p2p_disabled(os.environ))


def trial_key(req: SweepRequest, gpu: str, m: space.Methods) -> str:
    """What makes two trials the same measurement; a resumed sweep skips keys already final."""
    key = f"{req.model}|{gpu}|{req.num_gpus}|{req.num_nodes}|{m.label}|{req.device}"
    if host_staged(req):
        key += f"|{HOST_STAGED}"
    if not req.compile:
        key += "|no-compile"
    elif req.compile_mode:
        key += f"|compile-{req.compile_mode}"
    if req.max_micro_batch:
        key += f"{space.CAPPED}{req.max_micro_batch}"
    return key


def _resolve_gpu(req: SweepRequest, presets: Presets, machine: Machine | None) -> str:
    if req.device == "cpu":
        return "cpu"
    if machine is None or not machine.gpus:
        why = machine.message if machine is not None and machine.message else "no GPU found here"
        raise PlannerError(f"{why}; use --device cpu with a tiny model to try the engine")
    import os

    here = req.num_gpus * (req.num_nodes if req.launcher == "local-nodes" else 1)
    visible = [d for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    have = min(machine.gpu_count, len(visible)) if visible else machine.gpu_count
    if have < here:
        raise PlannerError(f"asked for {here} GPUs on this machine but it has {have}"
                           + (" visible (CUDA_VISIBLE_DEVICES)" if visible else ""))
    if req.gpu:
        presets.gpu(req.gpu)
        return req.gpu
    found = gpu_preset_for(machine.gpus[0], presets)
    if found is None:
        raise PlannerError(f"the local GPU {machine.gpus[0]!r} matches no GPU preset: add one (see README) "
                           "and pass --gpu ID")
    return found


def gpu_preset_for(device_name: str, presets: Presets) -> str | None:
    """The GPU preset a device name (as the driver says it) is: among the presets whose id is in the name or
    whose every name word is, the one with the most of its name's words there ("NVIDIA H100 PCIe" is
    h100pcie, not h100; "RTX PRO 6000 Blackwell Server Edition" is the server card, not the workstation's); a
    name that says another memory size than the preset's is not that preset."""
    import re

    flat = "".join(c for c in device_name.lower() if c.isalnum())
    words = set(re.findall(r"[a-z0-9]+", device_name.lower()))
    sizes = {w for w in words if re.fullmatch(r"\d+gb", w)}
    scored = []
    for g in presets.gpus.values():
        mine = set(re.findall(r"[a-z0-9]+", g.name.lower()))
        other_size = {w for w in mine if re.fullmatch(r"\d+gb", w)} - sizes
        if sizes and other_size:
            continue  # an A100 40GB is not the 80GB preset: its memory decides what fits
        if g.id in flat or (mine and mine <= words):
            hit = len(mine & words)
            scored.append((hit / max(1, len(mine)), hit, len(g.id), g.id))
    return max(scored)[3] if scored else None


def check_launcher(req: SweepRequest) -> None:
    """More than one node needs a way to start an agent on each: SLURM's srun, or emulated nodes here."""
    import os
    import shutil

    from engine.bench.launcher import LAUNCHERS

    if req.launcher not in LAUNCHERS:
        raise PlannerError(f"--launcher is one of {', '.join(LAUNCHERS)}, not {req.launcher!r}")
    if req.num_nodes < 1 or req.num_gpus < 1:
        raise PlannerError("--nodes and --gpus must be at least 1")
    if req.network is not None and req.num_nodes == 1:
        raise PlannerError(f"--network ({req.network}) joins several nodes: give --nodes N, or leave it out")
    if req.network is not None:
        names = load_presets(req.presets).networks
        if req.network not in names:
            raise PlannerError(f"--network {req.network!r} is not a network preset: one of {', '.join(names)} "
                               "(tui-planner presets --kind networks)")
    if req.num_nodes > 1 and req.launcher == "local":
        raise PlannerError(f"{req.num_nodes} nodes need --launcher srun (inside a SLURM allocation of "
                           f"{req.num_nodes} nodes) or --launcher local-nodes (emulated on this machine)")
    if req.launcher == "srun":
        if not shutil.which("srun") or not os.environ.get("SLURM_JOB_ID"):
            raise PlannerError("--launcher srun runs inside a SLURM allocation (salloc/sbatch): no SLURM_JOB_ID or "
                               "srun here")
        have = int(os.environ.get("SLURM_JOB_NUM_NODES") or os.environ.get("SLURM_NNODES") or 0)
        if have and have < req.num_nodes:
            raise PlannerError(f"asked for {req.num_nodes} nodes but this allocation has {have}")
        if req.db is None:
            raise PlannerError("with srun the trials' files go next to --db, which every node must see")


def plan(req: SweepRequest, presets: Presets, gpu: str) -> list[TrialSpec]:
    model = presets.model(req.model)
    if req.device == "cuda":
        g = presets.gpu(gpu)
        tf32 = g.tf32
        if model.training.precision == "bf16" and not g.bf16:
            raise PlannerError(f"{model.id} trains in bf16, which the {g.name} does not support")
    else:
        tf32 = False
    check_launcher(req)
    if req.compile_mode is not None and req.compile_mode not in COMPILE_MODES:
        raise PlannerError(f"--compile-mode is one of {', '.join(COMPILE_MODES)}, not {req.compile_mode!r}")
    total = req.num_gpus * req.num_nodes
    if model.training.batch_size % total:
        raise PlannerError(f"{total} GPUs do not divide {model.id}'s batch of {model.training.batch_size}")
    specs = []
    named = {e for label in req.only if (m := space.by_label(label)) for e in m.extras}
    chosen = space.search_space(req.methods, req.num_gpus * req.num_nodes, tuple(set(req.extras) | named))
    if req.only:
        unknown = set(req.only) - {m.label for m in chosen}
        if unknown:
            raise PlannerError(f"no combination called {', '.join(sorted(unknown))} in --methods {req.methods} on "
                               f"{total} GPUs; they are: {', '.join(m.label for m in chosen)}")
        chosen = [m for m in chosen if m.label in req.only]
    cap = max_repetitions()  # $TUI_PLANNER_MAX_REPETITIONS, else 20
    for m in chosen:
        specs.append(TrialSpec(
            key=trial_key(req, gpu, m), model=req.model, gpu=gpu, num_gpus=req.num_gpus, num_nodes=req.num_nodes,
            methods=m, device=req.device, preset_paths=tuple(str(Path(p).resolve()) for p in req.presets),
            compile=req.compile, compile_mode=req.compile_mode, tf32=tf32, max_micro_batch=req.max_micro_batch, repetitions=req.repetitions,
            max_repetitions=max(req.repetitions, cap),
            warmup=req.warmup, verify_steps=req.verify_steps if m == space.FREE_LUNCH or req.only else 0,
            verify_accum=req.verify_accum, step_up=req.step_up, cpu_memory_limit_mb=req.cpu_memory_limit_mb,
            fault=req.faults.get(m.label), model_source=req.model_source, run=dict(req.run),
            env={"NCCL_P2P_DISABLE": "1"} if req.no_p2p and host_staged(req) else {},
        ))
    return specs


def step_up_words(up: dict | None) -> str | None:
    """What `bench --step-up` came to for a trial (engine/bench/trial.py _step_up), in a sentence."""
    if not isinstance(up, dict) or "outcome" not in up:
        return None
    mb, at, outcome = up.get("micro_batch"), up.get("from_micro_batch"), up["outcome"]
    before, after = up.get("step_s_at_from"), up.get("step_s")
    change = f" ({after / before - 1:+.1%} a step)" if before and after else ""
    if outcome == "faster":
        return f"stepped up to micro-batch {mb}, compiled{change}; the search fitted {at} uncompiled"
    if outcome == "slower":
        return f"micro-batch {mb}, compiled, was slower{change}: kept {at}"
    if outcome == "out of memory":
        return f"micro-batch {mb}, compiled, ran out of memory: kept {at}"
    return f"micro-batch {mb} not tried: {up.get('why', '')}"


def host_memory_bytes() -> float | None:
    try:
        import os

        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


# Refuse only what is far out of reach: the memory model's least need (weights and optimizer states, no
# activations) above the device by this much. Anything closer is for the trial's own search to find out.
REFUSE_MARGIN = 0.5


def refuse_what_cannot_fit(req: SweepRequest, presets: Presets, gpu: str, specs: list[TrialSpec]) -> None:
    """Before anything is launched: a model that no combination of the sweep could hold (a config with a
    million layers, say) is refused with the memory model's figure, rather than growing a trial until its
    timeout. Checks the least static need of any planned combination at micro-batch 1 against one GPU (on
    the CPU, against this machine's memory), and the model's fp32 weights, which a trial builds on the host
    first, against the host. A model the memory model cannot describe is left to the trials."""
    from engine.predict import memory

    model = presets.model(req.model)
    try:
        psi = memory.shape(model).params
        needs = [(memory.need(model, s.methods, s.num_gpus * s.num_nodes, 1, kappa=0.0).static_bytes, s.methods.label)
                 for s in specs]
    except memory.ConfigValueError as e:
        raise PlannerError(f"{e}; nothing was launched") from None
    except PlannerError:
        return  # an architecture the memory model does not know: the trials find out
    host = host_memory_bytes()
    gb = lambda b: f"{b / 1e9:,.1f} GB"  # noqa: E731
    if host and 4 * psi > host * (1 + REFUSE_MARGIN):
        raise PlannerError(f"{model.id}: {psi:,.0f} parameters need {gb(4 * psi)} in fp32 to build, and this machine "
                           f"has {gb(host)} of memory; nothing was launched (check the model's config)")
    if not needs:
        return
    least, label = min(needs)
    if req.device == "cuda":
        capacity, where = memory.capacity_bytes(presets.gpu(gpu)), f"one {presets.gpu(gpu).name}"
    else:
        capacity, where = host, "this machine's memory"
    if capacity and least > capacity * (1 + REFUSE_MARGIN):
        raise PlannerError(f"{model.id} cannot fit {where} ({gb(capacity)}): the memory model's least need is "
                           f"{gb(least)} at micro-batch 1 without activations ({label}, the leanest setting of "
                           "this sweep); nothing was launched (check the model's config, or use more GPUs)")


def _trial_row(req: SweepRequest, spec: TrialSpec, out: TrialOutcome, presets: Presets, run_id: str,
               machine: Machine | None) -> Trial:
    model = presets.model(spec.model)
    r = out.result
    m = spec.methods
    t = Trial(
        model=spec.model, gpu=spec.gpu, num_gpus=spec.num_gpus, num_nodes=spec.num_nodes, feasible=False,
        source="measured", run_id=run_id, key=spec.key, free_lunch=m.free_lunch,
        compile=r.get("compile"), tf32=r.get("tf32"), attention=r.get("attention"),
        activation_checkpointing=m.activation_checkpointing, sharding=m.sharding, offloading=m.offloading,
        fused=m.fused, fp8=m.fp8,
        micro_batch=r.get("micro_batch") or r.get("max_micro_batch") or None, grad_accum=r.get("grad_accum"),
        pass_s=r.get("pass_s"), update_s=r.get("update_s"), step_s=r.get("step_s"), days=r.get("days"),
        samples_per_s=r.get("samples_per_s"), tokens_per_s=r.get("tokens_per_s"),
        pass_spread_s=r.get("pass_spread_s"), update_spread_s=r.get("update_spread_s"),
        repetitions=r.get("repetitions"), warmup_s=r.get("warmup_s"), compile_s=r.get("compile_s"),
        peak_memory_gb=r.get("peak_memory_gb"), kernel=r.get("kernel"), duration_s=out.duration_s,
        **run_columns(model),
    )
    peak = None
    if spec.device == "cuda":
        gpu = presets.gpu(spec.gpu)
        peak = gpu.peak_16bit_flops
        t.analytic_days = formulas.analytic_days(model.training_flops, spec.num_gpus * spec.num_nodes, peak)
    provenance = {
        "host": machine.host if machine else None, "device": (machine.gpus[0] if machine and machine.gpus else "cpu"),
        "driver": machine.driver if machine else None, "versions": r.get("versions"),
        "device_kind": req.device_kind, "measured_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "timing": "torch.cuda.synchronize() + barrier around each pass and update; median of repetitions",
        "pass_times_s": r.get("pass_times_s"), "update_times_s": r.get("update_times_s"),
        "max_micro_batch_searched": r.get("max_micro_batch"), "checkpointing": r.get("checkpointing"),
    }
    for extra in m.extras:  # what the method did to the model: liger's parts covered, torchao's recipe
        if r.get(extra) is not None:
            provenance[extra] = r[extra]
    provenance.update(link_provenance(req, spec, machine))
    t.interconnect = provenance.get("interconnect")
    for k in ("verify_step_s", "verify_predicted_s", "verify_steps", "verify_accum", "traceback", "allreduce_s",
              "optimizer_update_s", "synced_pass_times_s", "alloc_retries", "alloc_conf", "stopped_early",
              "compile_mode", "kernels_off", "causal_mask", "attention_mask", "measure_oom",
              "measured_in_new_process", "compile_cache", "dynamo", "gradients_held",
              "cpu_threads", "fsdp_reduce_dtype", "host_malloc", "step_up", "held_memory_gb"):
        if r.get(k) is not None:
            provenance[k] = r[k]
    if out.status == "measured":
        t.feasible = True
        if peak:
            t.mfu = formulas.mfu(model.flops_per_step, t.step_s, spec.num_gpus * spec.num_nodes, peak)
            # MFU is against the 16-bit peak for every row (as torchtitan reports FP8 runs); an fp8 row's matrix
            # products may run up to the FP8 peak, which is then its physical limit and scales its line.
            known = spec.gpu in presets.gpus
            t.plausibility = judge(presets.gpu(spec.gpu), t.mfu, m.fp8) if known else formulas.plausibility(t.mfu)
            if t.plausibility == "impossible":
                # Faster than the hardware can compute: a measurement bug, never shown as fact.
                t.feasible, t.failure_kind = False, "refused"
                t.failure_message = (f"refused: {t.mfu:.0%} of dense peak is physically impossible "
                                     f"(step {t.step_s:.3f} s); the measurement is wrong")
                t.days = None
    elif out.status == "dominated":
        t.feasible, t.failure_kind, t.failure_message = True, "dominated", out.message
    else:
        t.failure_kind = out.status if out.status in ("oom", "timeout", "stopped") else "failed"
        t.failure_message = out.message or (out.log_tail[-1] if out.log_tail else None)
        if out.status == "failed" and out.log_tail:
            provenance["log_tail"] = out.log_tail[-20:]
    t.provenance = json.dumps(provenance, default=str)
    return t


def _extras_unavailable(req: SweepRequest, spec: TrialSpec, presets: Presets) -> str | None:
    from engine.bench import fast

    g = presets.gpus.get(spec.gpu) if spec.device == "cuda" else None
    return fast.unavailable(spec.methods, spec.device, g.name if g else None, g.compute_capability if g else None)


def link_provenance(req: SweepRequest, spec: TrialSpec, machine: Machine | None) -> dict:
    """How a trial's GPUs reached each other: the interconnect (engine.bench.environment.interconnect_of),
    the launcher for several nodes, and the NCCL variables it ran with."""
    if spec.device != "cuda" or spec.num_gpus * spec.num_nodes <= 1:
        return {}
    env = {**trial_env(), **spec.env}
    out = {"interconnect": interconnect_of(env, machine.topology if machine else None, spec.num_gpus,
                                           spec.num_nodes, req.launcher),
           "nccl_env": nccl_settings(env)}
    if spec.num_nodes > 1:
        out["launcher"] = req.launcher
    return out


def check_database(req: SweepRequest) -> None:
    """A sweep writes to a file of the user's own: never the shipped database, by any path or link to it."""
    from engine.data.paths import db_dir, is_shipped, user_db

    if req.db is None:
        return
    if is_shipped(Path(req.db).expanduser()):
        raise PlannerError(f"{req.db} is the shipped database (or in its folder, {db_dir()}), which opens "
                           "read-only: measure into a file of your own, e.g. "
                           f"--db {shlex.quote(str(user_db()))} or --db mine.duckdb")
    # A process that only reads the file (the app browsing it, `results`) also keeps a writer out: say so,
    # rather than the lock error's "another process is writing" (a writer is told so by Store.open).
    held = locks.holders(Path(req.db).expanduser())
    if held and not any(h.writing for h in held):
        who = "; ".join(f"pid {h.pid}" + (f": {safe.line(locks.name_of(h.pid), 80)}" if locks.name_of(h.pid) else "")
                        for h in held[:3])
        raise PlannerError(f"{req.db} is open in another process that only reads it ({who}), e.g. the app "
                           "browsing it; a sweep needs the file to itself: close that (or open another file there), "
                           "or measure into another file with --db")


def run_sweep(req: SweepRequest, on_event: Callable[[object], None] = lambda e: None,
              stop: threading.Event | None = None, store: Store | None = None,
              pause: threading.Event | None = None) -> str:
    """Run (or resume) a sweep; returns the run id. Raises PlannerError for a request that cannot run.
    `stop` kills the running trial (not recorded) and ends the sweep; `pause` ends it after the running
    trial. Either way, running the same request again resumes."""
    t_sweep = time.monotonic()
    check_database(req)  # before anything is probed, planned or written
    presets, req = resolve_model(req)
    machine = probe() if req.device == "cuda" else None
    gpu = _resolve_gpu(req, presets, machine)
    specs = plan(req, presets, gpu)
    refuse_what_cannot_fit(req, presets, gpu, specs)
    clear_build_locks(older_than_s=3600)  # left by a build killed in an earlier session
    own = store is None
    run_started = False
    if own:
        if req.db is None:
            raise PlannerError("a sweep needs a database to write: pass --db FILE")
        store = Store.open(req.db, read_only=False)
    try:
        _store_kept(store, on_event)  # what a sweep that could not write finished: stored, not measured again
        # An exhaustive sweep also measures what an earlier, pruned one left as dominated or skipped.
        done = store.done_keys([s.key for s in specs], final_only=True, pruned_final=not req.exhaustive)
        skip_cal = _memory_calibration(req, presets, store)
        if skip_cal is not None:  # skipped by the memory model: still skipped (exhaustive: only no-fits)
            done |= _unrun_keys(store, specs, "memory", cannot_fit_only=req.exhaustive)
        if not req.exhaustive:  # left unrun by a guided search: the best measured can only have improved since
            done |= _unrun_keys(store, specs, "cannot-win")
        given_up = {} if req.retry_failed else store.repeated_failures([s.key for s in specs if s.key not in done])
        guide = _guide_for(req, presets, gpu, store, specs, done, given_up, on_event)
        if guide is not None:
            by_label = {s.methods.label: s for s in specs}
            specs = [by_label[label] for label in guide.order(by_label)]
        # Without an importable DeepSpeed every ZeRO trial would fail, one launch each: ask once instead.
        zero = [s.key for s in specs if s.methods.deepspeed and s.key not in done and s.key not in given_up]
        no_deepspeed = deepspeed_import_error() if zero else None
        info = host_info()
        run = Run(
            source="measured", host=info["host"], device_kind=req.device_kind,
            gpu_name=(machine.gpus[0] if machine and machine.gpus else "cpu"),
            gpu_count=req.num_gpus, num_nodes=req.num_nodes, driver=machine.driver if machine else None,
            cuda=machine.cuda if machine else None, topology=machine.topology if machine else None,
            versions=json.dumps({**info, "torch": machine.torch if machine else None,
                                 **({"nccl_env": nccl_settings({**trial_env(), **specs[0].env})}
                                    if machine and specs and req.num_gpus * req.num_nodes > 1 else {})}),
            command=f"bench --model {shlex.quote(req.model_source or req.model)} --methods {req.methods} --gpus {req.num_gpus}"
                    + (f" --nodes {req.num_nodes} --launcher {req.launcher}" if req.num_nodes > 1 else "")
                    + (" --exhaustive" if req.exhaustive else "")
                    + (" --no-p2p" if host_staged(req) else "")
                    + (" --extras " + " ".join(e for e in space.EXTRAS if e in req.extras) if req.extras else "")
                    + (" --only " + " ".join(shlex.quote(label) for label in req.only) if req.only else ""),
            started_at=dt.datetime.now(dt.timezone.utc).replace(tzinfo=None), status="running", note=req.note,
            search="exhaustive" if req.exhaustive else ("guided" if guide is not None else "pruned"),
        )
        store.start_run(run)
        run_started = True
        store.record_presets(run.run_id, presets)
        on_event(SweepStarted(total=len(specs), skipped=len(done) + len(given_up), run_id=run.run_id,
                              labels=tuple(s.methods.label for s in specs), keys=tuple(s.key for s in specs),
                              unavailable_why=f"DeepSpeed cannot be imported: {no_deepspeed}" if no_deepspeed else ""))
        if guide is not None:
            on_event(SearchGuided(tuple((s.methods.label, guide.guesses[s.methods.label].text())
                                        for s in specs if s.methods.label in guide.guesses), guide.basis))
        counts: dict[str, int] = {}
        launched = unrun = 0  # trials that started a process; combinations this run decided without one
        out_of_time = ""
        t0 = time.monotonic()
        fits = _measured_micro_batches(store, specs)
        # The best measured so far bounds the rest of the search (what cannot win is left unrun, a trial that
        # cannot beat it stops timing early), each within its own numerics: an fp8 row is not the same training, so
        # it never leaves a 16-bit setting unmeasured, nor a 16-bit row an fp8 one.
        bests: dict[bool, list] = {}
        for numerics in (False, True):
            b = _best_measured(store, [s for s in specs if s.methods.changes_numerics == numerics])
            bests[numerics] = [b["step_s"], b["days"], b["key"].split("|")[4]] if b else [None, None, ""]
        # Other nodes read the spec and rank 0 (on any node) writes the result: with srun, next to the database.
        shared = Path(req.db).resolve().parent if req.launcher == "srun" and req.db else None
        with tempfile.TemporaryDirectory(prefix=".tui-planner-trials-" if shared else "tui-planner-", dir=shared,
                                         ignore_cleanup_errors=True) as tmp:  # NFS leaves .nfs* files a while
            for i, spec in enumerate(specs):
                label = spec.methods.label
                if spec.key in done:
                    on_event(TrialSkipped(spec.key, label, "already in the database (resumed)"))
                    counts["resumed"] = counts.get("resumed", 0) + 1
                    continue
                if spec.key in given_up:
                    on_event(TrialSkipped(spec.key, label, f"failed twice before ({given_up[spec.key][:120]}); "
                                                           "--retry-failed tries it again"))
                    counts["given up"] = counts.get("given up", 0) + 1; unrun += 1
                    continue
                if (stop is not None and stop.is_set()) or (pause is not None and pause.is_set()):
                    break
                if req.stop_after_s is not None and time.monotonic() - t0 > req.stop_after_s:
                    left = sum(1 for s in specs[i:] if s.key not in done and s.key not in given_up)
                    out_of_time = (f"time limit: no trial starts after {req.stop_after_s:.0f} s; "
                                   f"{left} left, run the same command again to resume")
                    break
                best_step, best_days, best_by = bests[spec.methods.changes_numerics]
                why = guide.why_not(label, best_days, best_by) if guide is not None else None
                if why is not None:
                    store.add_trial(_cannot_win_row(req, spec, presets, guide, why, run.run_id))
                    counts["cannot win"] = counts.get("cannot win", 0) + 1; unrun += 1
                    on_event(TrialFinished(spec.key, label, "cannot-win", message=why, duration_s=0.0))
                    continue
                on_event(TrialStarted(spec.key, label, i + 1, len(specs)))
                floor, by = _dominance_floor(spec.methods, fits)
                if not req.exhaustive and floor:
                    spec = replace(spec, dominated_at_or_below=floor)
                if not req.exhaustive and best_step is not None:
                    spec = replace(spec, beat_step_s=best_step)
                at_cap = bool(spec.dominated_at_or_below and spec.dominated_at_or_below >= _cap(spec, presets))
                skip = None if at_cap else _memory_skip(req, spec, presets, skip_cal, floor, by, run.run_id)
                if skip is not None:
                    store.add_trial(skip)
                    counts["memory"] = counts.get("memory", 0) + 1; unrun += 1
                    on_event(TrialFinished(spec.key, label, "memory", micro_batch=skip.micro_batch,
                                           message=skip.failure_message, duration_s=0.0))
                    continue
                if at_cap:
                    unrun += 1
                    out = TrialOutcome("dominated", {"max_micro_batch": None}, (
                        f"dominated: {by} already runs the largest micro-batch ({floor}); "
                        "more memory-saving methods only add overhead"), 0.0, [])
                elif spec.methods.extras and (why_not_here := _extras_unavailable(req, spec, presets)):
                    # No FP8 tensor cores, no GPU for liger's Triton kernels, a package missing: said, no row
                    # (a row would read as this cell's result; the predictor says what the method would do).
                    counts["unavailable"] = counts.get("unavailable", 0) + 1; unrun += 1
                    on_event(TrialFinished(spec.key, label, "unavailable", message=f"not run, no row: {why_not_here}"))
                    continue
                elif no_deepspeed and spec.methods.deepspeed:  # what needs no launch was recorded above
                    counts["unavailable"] = counts.get("unavailable", 0) + 1; unrun += 1
                    on_event(TrialFinished(spec.key, label, "unavailable", message=(
                        f"not run, no row: DeepSpeed cannot be imported ({no_deepspeed}); install it and run "
                        "the same command")))
                    continue
                else:
                    launched += 1
                    out = _run_with_relaunch(req, spec, Path(tmp), on_event, stop)
                row = _trial_row(req, spec, out, presets, run.run_id, machine)
                if out.status == "stopped":
                    on_event(TrialFinished(spec.key, label, "stopped", message=out.message, duration_s=out.duration_s))
                    break
                _store_trial(store, row)
                status = row.failure_kind or "measured"
                counts[status] = counts.get(status, 0) + 1
                if row.feasible and row.days is not None and row.micro_batch:
                    fits[spec.methods] = row.micro_batch
                    mine = bests[spec.methods.changes_numerics]
                    mine[0] = row.step_s if mine[0] is None else min(mine[0], row.step_s)
                    if mine[1] is None or row.days < mine[1]:
                        mine[1], mine[2] = row.days, label
                on_event(TrialFinished(spec.key, label, status, days=row.days, mfu=row.mfu,
                                       micro_batch=row.micro_batch,
                                       message=row.failure_message or out.result.get("stopped_early"),
                                       duration_s=out.duration_s, verify_step_s=out.result.get("verify_step_s"),
                                       verify_predicted_s=out.result.get("verify_predicted_s"),
                                       step_up=step_up_words(out.result.get("step_up"))))
        stopped = bool((stop is not None and stop.is_set()) or (pause is not None and pause.is_set()) or out_of_time)
        store.finish_run(run.run_id, "stopped" if stopped else "done", wall_s=time.monotonic() - t_sweep,
                         trials_run=launched, trials_skipped=unrun)
        on_event(SweepFinished(counts=counts, stopped=stopped, reason=out_of_time, elapsed_s=time.monotonic() - t0,
                               best=_best_label(_best_measured(store, specs))))
        return run.run_id
    except BaseException:
        if run_started:
            try:
                store.finish_run(run.run_id, "interrupted")
            except PlannerError:
                pass  # the file cannot be written (the error being raised says why); the run reads interrupted
        raise
    finally:
        if own:
            store.close()


def _evidence_rows(store: Store) -> list[dict]:
    """Measured and paper rows of this database and of the shipped one (never predicted rows): what the
    memory skip and the guided search predict from."""
    from engine.data.paths import shipped_db

    try:
        if store.path is None or Path(store.path).resolve() != shipped_db().resolve():
            with Store.open(shipped_db(), read_only=True, create=False) as shipped:
                return evidence_rows([store, shipped])
    except PlannerError:
        pass  # no shipped database (or an older one): this one alone
    return evidence_rows([store])


def _guide_for(req: SweepRequest, presets: Presets, gpu: str, store: Store, specs: list[TrialSpec],
               done: set[str], given_up: dict, on_event):
    """The guided search's predictions for this cell, stored as predictions before anything is measured
    (engine/bench/guide.py); None for an exhaustive sweep, on the CPU (no GPU to predict), or when the
    predictor has no basis for the model (the sweep then runs in the search space's order)."""
    if req.exhaustive:
        return None
    if req.guide is not None:
        return req.guide
    if req.device != "cuda":
        return None
    from engine.bench.guide import guide_for
    from engine.predict import write_predictions
    from engine.predict.stored import predicted_key

    staged = host_staged(req)
    if staged:  # predicted as a card without peer access: through host memory, PCIe twice (terms.link_bytes_per_s)
        presets = dataclasses.replace(presets, gpus={**presets.gpus, gpu: dataclasses.replace(presets.gpu(gpu), p2p=False)})
    network = None
    if req.num_nodes > 1:
        name = req.network or ("loopback" if req.launcher == "local-nodes" else None)
        network = presets.networks.get(name) if name else None
        if network is None:  # no network term: nothing honest to guide by
            on_event(Log("", "guided search: no network named between the nodes (--network ID, `tui-planner presets "
                             "--kind networks`): nothing to predict them from; measuring every combination"))
            return None
    # A cell this database or the shipped one already measured is guided by that measurement (issue 39); the
    # measurements the predictor holds are over the machine's own links, so a host-staged search is predicted.
    extras = tuple(e for e in space.EXTRAS if any(e in s.methods.extras for s in specs))
    guide = guide_for(_evidence_rows(store), presets, req.model, gpu, req.num_gpus, req.methods, req.num_nodes,
                      network, use_measured=not staged, extras=extras, max_micro_batch=req.max_micro_batch)
    if guide is None:
        on_event(Log("", "guided search: nothing to predict this model from; measuring every combination"))
        return None
    to_run = [s for s in specs if s.key not in done and s.key not in given_up]
    if to_run and guide.predictions:
        # Stored once, before the first measurement: a resumed sweep keeps the prediction it started from.
        link = HOST_STAGED if staged else network.id if network else None
        keys = {s.methods.label: predicted_key(req.model, gpu, req.num_gpus * req.num_nodes, s.methods.label, link,
                                               req.num_nodes, req.max_micro_batch)
                for s in specs}
        have = {r["key"] for r in store.query("SELECT key FROM trials WHERE source = 'predicted' AND key IN "
                                              "(SELECT unnest(?))", [list(keys.values())])}
        wanted = {label for label, key in keys.items() if key not in have}
        write_predictions(store, [p for p in guide.predictions if p.label in wanted], presets,
                          command=f"predicted before measuring (guided search of bench --model "
                                  f"{shlex.quote(req.model_source or req.model)} --gpus {req.num_gpus}"
                                  f"{f' --nodes {req.num_nodes}' if req.num_nodes > 1 else ''}"
                                  f"{' --no-p2p' if staged else ''}"
                                  f"{f' --max-micro-batch {req.max_micro_batch}' if req.max_micro_batch else ''})",
                          interconnect=link)
    return guide


def _cannot_win_row(req: SweepRequest, spec: TrialSpec, presets: Presets, guide, why: str, run_id: str) -> Trial:
    """A 'predicted' row for a combination the guided search left unrun: why, and what it was predicted
    to take (its band)."""
    g = guide.guesses[spec.methods.label]
    m = spec.methods
    return Trial(
        model=spec.model, gpu=spec.gpu, num_gpus=spec.num_gpus, num_nodes=spec.num_nodes, feasible=False,
        source="predicted", run_id=run_id, key=spec.key, free_lunch=m.free_lunch,
        activation_checkpointing=m.activation_checkpointing, sharding=m.sharding, offloading=m.offloading,
        fused=m.fused, fp8=m.fp8,
        micro_batch=g.micro_batch, days_low=g.days_low, days_high=g.days_high, failure_kind="cannot-win",
        failure_message=f"{why} (bench --exhaustive measures it)", basis=guide.basis or None,
        provenance=json.dumps({"guided": {"predicted_days": g.days, "days_low": g.days_low,
                                          "days_high": g.days_high, "micro_batch": g.micro_batch}}),
        duration_s=0.0, **run_columns(presets.model(spec.model)),
    )


def _kept_dir(store: Store) -> Path | None:
    """Where a finished trial's row waits until the database has it: beside the file, FILE.pending/."""
    return None if store.path is None else Path(store.path).with_name(Path(store.path).name + ".pending")


def _store_trial(store: Store, row: Trial) -> None:
    """Write a finished trial. Its row is kept beside the database first and removed once written, so a
    write that fails (a full disk, a file gone read-only) loses nothing: the next run stores it."""
    kept = _kept_dir(store)
    keep = None
    if kept is not None:
        try:
            kept.mkdir(exist_ok=True)
            keep = kept / f"{row.trial_id}.json"
            keep.write_text(json.dumps({k: plain(v) for k, v in dataclasses.asdict(row).items()}))
        except OSError:
            keep = None  # no room even for that: the database write below says what is wrong
    try:
        store.add_trial(row)
    except PlannerError as e:
        where = (f"the trial's result is kept in {keep} and is stored when you run the same command again"
                 if keep else "the trial's result could not be kept either: it will be measured again")
        raise PlannerError(f"{e}; {where}") from None
    if keep is not None:
        keep.unlink(missing_ok=True)
        try:
            kept.rmdir()
        except OSError:
            pass


def _store_kept(store: Store, on_event) -> int:
    """Store the rows an earlier sweep finished but could not write (see _store_trial)."""
    kept = _kept_dir(store)
    if kept is None or not kept.is_dir():
        return 0
    rows, files = [], sorted(kept.glob("*.json"))
    have = {r["trial_id"] for r in store.query("SELECT trial_id FROM trials WHERE trial_id IN (SELECT unnest(?))",
                                               [[f.stem for f in files]])}
    for f in files:
        try:
            data = json.loads(f.read_text())
            if data.get("created_at"):
                data["created_at"] = dt.datetime.fromisoformat(data["created_at"])
            row = Trial(**data)
        except (OSError, ValueError, TypeError) as e:
            on_event(Log("", f"{f}: not a kept trial row ({e}); left as it is"))
            continue
        if row.trial_id not in have:
            rows.append(row)
        else:
            f.unlink(missing_ok=True)
    if rows:
        store.add_trials(rows)
        for r in rows:
            (kept / f"{r.trial_id}.json").unlink(missing_ok=True)
        on_event(Log("", f"stored {len(rows)} finished trial(s) kept from a sweep that could not write them"))
    try:
        kept.rmdir()
    except OSError:
        pass
    return len(rows)


def _run_with_relaunch(req: SweepRequest, spec: TrialSpec, tmp: Path, on_event, stop) -> TrialOutcome:
    """One trial, launched again as long as it asks to measure in a new process (engine.bench.trial.EXIT_RELAUNCH:
    a rank of several ran out of memory while measuring, or DeepSpeed's offload engine keeps host memory),
    skipping the batch search the first process already did. Each launch has the trial's timeout; the
    outcome's duration covers every launch."""
    out = run_trial(spec, tmp, req.timeout_s, on_event, stop, launcher=req.launcher)
    spent = out.duration_s
    while out.status == "relaunch":
        r = out.result
        history = spec.measure_oom_history
        if r.get("oom_at"):
            on_event(BatchTried(spec.key, int(r["oom_at"]), False))
            history += (int(r["oom_at"]),)
        at, fit = int(r.get("measure_at") or 0), r.get("max_micro_batch") or spec.max_fit
        about = {**(r.get("about") or {}), "max_micro_batch": fit, "measure_oom": list(history)}
        if stop is not None and stop.is_set():
            return TrialOutcome("stopped", about, "stopped by the user", spent, out.log_tail)
        if at < 1:
            return TrialOutcome("oom", about, "out of memory while measuring at micro-batch 1", spent, out.log_tail)
        if spec.dominated_at_or_below and at <= spec.dominated_at_or_below:
            return TrialOutcome("dominated", {**about, "micro_batch": at}, (
                f"dominated: measures only at micro-batch {at} (out of memory above), no more than a measured "
                f"combination with fewer methods ({spec.dominated_at_or_below})"), spent, out.log_tail)
        on_event(Log(spec.key, f"{out.message}: measuring at micro-batch {at} in a new process"))
        spec = replace(spec, measure_at=at, max_fit=fit, measure_oom_history=history)
        out = run_trial(spec, tmp, req.timeout_s, on_event, stop, launcher=req.launcher)
        spent += out.duration_s
    return replace(out, duration_s=spent)


def _memory_calibration(req: SweepRequest, presets: Presets, store: Store):
    """The memory model's calibration for this model, from the measured fits in this database and the
    shipped one; None on the CPU or when turned off. Only a trusted one skips (calibration.skip_reason)."""
    if not req.memory_skip or req.device != "cuda":
        return None
    from engine.predict import calibration

    rows = [r for r in _evidence_rows(store) if r["source"] == "measured"]
    try:
        return calibration.kappa_for(presets.model(req.model), calibration.calibrate(rows, presets))
    except PlannerError:
        return None


def _unrun_keys(store: Store, specs: list[TrialSpec], kind: str, cannot_fit_only: bool = False) -> set[str]:
    """Keys a sweep recorded without a launch: skipped by the memory model ('memory'; cannot_fit_only: not
    those it called dominated) or left unrun by the guided search ('cannot-win')."""
    extra = " AND failure_message NOT LIKE '%dominated%'" if cannot_fit_only else ""
    rows = store.query("SELECT DISTINCT key FROM trials WHERE failure_kind = ? AND key IN (SELECT unnest(?))"
                       + extra, [kind, [s.key for s in specs]])
    return {r["key"] for r in rows}


def _memory_skip(req: SweepRequest, spec: TrialSpec, presets: Presets, cal, floor: int | None, by: str,
                 run_id: str) -> Trial | None:
    """A 'predicted' row saying why this trial need not run, or None to run it (engine/predict/memory.py)."""
    if cal is None:
        return None
    from engine.predict import calibration

    model, gpu = presets.model(spec.model), presets.gpu(spec.gpu)
    n = spec.num_gpus * spec.num_nodes
    found = calibration.skip_reason(model, gpu, spec.methods, n, cal, None if req.exhaustive else floor, by,
                               _cap(spec, presets))
    if found is None:
        return None
    reason, need = found
    m = spec.methods
    return Trial(
        model=spec.model, gpu=spec.gpu, num_gpus=spec.num_gpus, num_nodes=spec.num_nodes, feasible=False,
        source="predicted", run_id=run_id, key=spec.key, free_lunch=m.free_lunch,
        activation_checkpointing=m.activation_checkpointing, sharding=m.sharding, offloading=m.offloading,
        fused=m.fused, fp8=m.fp8,
        micro_batch=need.micro_batch, memory_need_gb=need.total_bytes / 1e9, failure_kind="memory",
        failure_message=f"{reason} (bench --no-memory-skip measures it)", basis=cal.describe(),
        provenance=json.dumps({"memory": {"static": dict(need.static), "kappa": need.kappa,
                                          "activations_per_sample": dict(need.activations_per_sample)}}),
        **run_columns(presets.model(spec.model)),
    )


def _cap(spec: TrialSpec, presets: Presets) -> int:
    per_gpu = presets.model(spec.model).training.batch_size // (spec.num_gpus * spec.num_nodes)
    return min(spec.max_micro_batch or per_gpu, per_gpu)


def _measured_micro_batches(store: Store, specs: list[TrialSpec]) -> dict[space.Methods, int]:
    """Micro-batches of combinations already measured (a resumed sweep prunes with them too)."""
    out = {}
    for s in specs:
        rows = store.query("SELECT micro_batch FROM trials WHERE key = ? AND feasible AND days IS NOT NULL "
                           "ORDER BY created_at DESC LIMIT 1", [s.key])
        if rows and rows[0]["micro_batch"]:
            out[s.methods] = rows[0]["micro_batch"]
    return out


def _best_measured(store: Store, specs: list[TrialSpec]) -> dict | None:
    """The fastest step measured so far in this sweep's cell (a resumed sweep bounds with it too)."""
    if not specs:
        return None
    rows = store.query("SELECT key, step_s, days, micro_batch, grad_accum FROM trials WHERE key IN (SELECT unnest(?)) "
                       "AND feasible AND days IS NOT NULL AND source = 'measured' ORDER BY step_s LIMIT 1",
                       [[s.key for s in specs]])
    return rows[0] if rows else None


def _best_label(r: dict | None) -> str:
    return f"{r['key'].split('|')[4]}, {r['micro_batch']} x {r['grad_accum']}, {r['days']:.3g} days" if r else ""


def _dominance_floor(m: space.Methods, fits: dict[space.Methods, int]) -> tuple[int | None, str]:
    """A combination that adds overhead to a measured one (a subset of its methods) can only win with
    a larger micro-batch: the largest such micro-batch is its floor."""
    best, by = None, ""
    for other, mb in fits.items():
        if other != m and space.is_subset(other, m) and (best is None or mb > best):
            best, by = mb, other.label
    return best, by
