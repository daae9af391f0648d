"""Check an export against reality: train its exact settings for a few real steps (random data, the same
Hugging Face Trainer / DeepSpeed / FSDP stack) and compare the steady step time with the benchmark's.

    result = run_verify(VerifyRequest("out"), on_event=print)
    result["verdict"]  # pass | fail | no verdict | error; also written to out/verify.json

Training runs in its own process group under torchrun (engine/recipe/verify_worker.py), as a trial does: a crash
or a hang ends that process, never the caller. More than `tolerance` apart, either way, is a failure of
the benchmark. A run on other hardware than the benchmark's (a GPU plan on the CPU, another GPU type, an
FSDP plan where accelerate cannot shard) trains as a smoke test and gives no verdict. No torch here.
"""

from __future__ import annotations

import collections
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from engine.bench import agent
from engine.recipe import export as recipe
from engine.bench.environment import cpu_threads_per_rank, host_info, launched_by, probe, trial_env
from engine.data.errors import PlannerError
from engine.bench.events import parse_marker
from engine.bench.launcher import _kill_group

RESULT = "verify.json"
# What verify changes in training_args.json, and why: only the run's length and where it writes.
OVERRIDES = {"save_strategy": "no", "report_to": "none", "disable_tqdm": True}


@dataclass
class VerifyRequest:
    directory: str | Path
    steps: int = 5  # timed optimizer steps after the warm-up
    warmup: int = 2  # untimed steps first: compilation, allocator and cuDNN autotuning settle here
    device: str | None = None  # cuda | cpu; the plan's device when None
    tolerance: float = 0.05
    timeout_s: float = 3600.0


@dataclass(frozen=True)
class VerifyStep:
    """One optimizer step of the verify run finished: its synchronized time; warm-up steps are not compared."""

    index: int
    step_s: float
    warmup: bool


@dataclass(frozen=True)
class VerifyLog:
    """A line of the training process's own output."""

    line: str


def verdict(measured_s: float, predicted_s: float, tolerance: float) -> tuple[str, float]:
    """pass when the measured step is within `tolerance` of the prediction (relative), else fail."""
    difference = measured_s / predicted_s - 1.0
    return ("pass" if abs(difference) <= tolerance else "fail"), difference


def _comparable(plan: dict, device: str) -> tuple[str | None, dict]:
    """Why this machine cannot confirm or refute the plan's numbers (None when it can), and the machine."""
    if device == "cpu":
        machine = {"gpus": [], "driver": None}
    else:
        m = probe()
        if not m.gpus:
            raise PlannerError(f"{m.message or 'no GPU found here'}; `--device cpu` runs a smoke test")
        if m.gpu_count < plan["world_size"]:
            raise PlannerError(f"the plan trains on {plan['world_size']} GPUs; this machine has {m.gpu_count}")
        machine = {"gpus": m.gpus, "driver": m.driver, "cuda": m.cuda, "torch": m.torch}
    if device != plan["device"]:
        where = "the CPU" if plan["device"] == "cpu" else f"{plan['num_gpus']} x {plan['gpu']}"
        return f"the plan was measured on {where}; this run is on {'the CPU' if device == 'cpu' else 'a GPU'}", machine
    name = "".join(c for c in machine["gpus"][0].lower() if c.isalnum()) if machine["gpus"] else ""
    if device == "cuda" and plan["gpu"] not in name:
        return f"the plan was measured on {plan['gpu']}; this machine has {machine['gpus'][0]}", machine
    return None, machine


def run_verify(req: VerifyRequest, on_event: Callable[[object], None] = lambda e: None) -> dict:
    """Train, compare, write DIR/verify.json and return what it holds. PlannerError for bad input."""
    plan, args, ds = recipe.load(req.directory)
    if req.steps < 1 or req.warmup < 0:
        raise PlannerError("verify needs --steps of at least 1 and --warmup of at least 0")
    if not 0 < req.tolerance < 1:
        raise PlannerError(f"--tolerance is a fraction, e.g. 0.05 for 5%, not {req.tolerance}")
    if plan.get("num_nodes", 1) != 1:
        raise PlannerError(f"the plan spans {plan['num_nodes']} nodes; verify trains on one machine")
    device = req.device or plan["device"]
    why_not, machine = _comparable(plan, device)
    notes: list[str] = []
    args = {**args, **OVERRIDES, "max_steps": req.warmup + req.steps}
    ds = json.loads(json.dumps(ds)) if ds is not None else None
    if device != plan["device"]:
        recipe.for_device(args, ds, device, notes)
    out: dict = {
        "verdict": None, "measured_step_s": None, "predicted_step_s": plan["step_s"], "difference": None,
        "tolerance": req.tolerance, "steps": req.steps, "warmup": req.warmup, "device": device,
        "no_verdict_because": why_not, "plan": {k: plan.get(k) for k in (
            "trial_id", "db", "model", "gpu", "num_gpus", "methods", "micro_batch", "grad_accum", "pass_s",
            "update_s", "step_s", "days", "mfu")},
        "notes": plan.get("notes", []) + notes, "overrides": {**OVERRIDES, "max_steps": req.warmup + req.steps},
        "started_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "host": {**host_info(), **machine},
    }
    with tempfile.TemporaryDirectory(prefix="tui-planner-verify-") as tmp:
        args["output_dir"] = str(Path(tmp) / "checkpoints")
        spec = {"training_args": args, "deepspeed": ds, "model_preset": plan["model_preset"],
                "attn_implementation": plan.get("attn_implementation"), "checkpointing": plan.get("checkpointing"),
                "device": device, "warmup": req.warmup, "seed": 0,
                # fused: the planner's own patch, where liger has none for the model type (the export's note)
                "fused": (plan.get("provenance") or {}).get("fused") if plan.get("fused") and device == "cuda" else None,
                # fp8: accelerate's FP8 recipe, as launch.sh exports it (the worker sets it before TrainingArguments)
                "env": recipe.fp8_env(plan) if device == "cuda" else {}}
        spec_path, result_path = Path(tmp) / "spec.json", Path(tmp) / "result.json"
        spec_path.write_text(json.dumps(spec))
        cmd = [*agent.command(), f"--log-dir={Path(tmp) / 'logs'}", "--standalone", "--nnodes=1",
               f"--nproc-per-node={plan['world_size']}", "--max-restarts=0", "-m", "engine.recipe.verify_worker",
               str(spec_path), str(result_path)]
        threads = cpu_threads_per_rank(int(plan["world_size"]), recipe.fsdp_offload(plan))
        status, tail, duration = _launch(cmd, Path(tmp), req.timeout_s, on_event, threads)
        worker = json.loads(result_path.read_text()) if result_path.exists() else {}
    out.update(duration_s=duration, command="torchrun " + " ".join(cmd[4:]),
               **{k: worker.get(k) for k in ("versions", "device_name", "stack", "peak_memory_gb", "build_s")})
    times = worker.get("step_times_s") or []
    out["warmup_step_times_s"], out["step_times_s"] = times[:req.warmup], times[req.warmup:]
    out["interval_times_s"] = worker.get("interval_times_s")
    if status or worker.get("status") != "done" or len(out["step_times_s"]) < req.steps:
        out["verdict"] = "error"
        out["error"] = status or worker.get("failure_message") or (
            f"training ended after {len(times)} of {req.warmup + req.steps} steps" if worker else
            "the training process wrote no result; last output: " + (tail[-1] if tail else "none"))
        out["traceback"], out["log_tail"] = worker.get("traceback"), tail[-30:]
    else:
        out["measured_step_s"] = statistics.median(out["step_times_s"])
        out["spread_s"] = max(out["step_times_s"]) - min(out["step_times_s"])
        stack = worker.get("stack") or {}
        wants = "deepspeed" if ds is not None else "fsdp" if args.get("fsdp") else None
        if wants and not stack.get(wants) and not why_not:
            why_not = (f"the plan shards with {wants}, but the Trainer did not here "
                       f"({'accelerate runs FSDP on GPUs only' if wants == 'fsdp' and device == 'cpu' else 'see log'})")
            out["no_verdict_because"] = why_not
        if why_not:
            out["verdict"] = "no verdict"
            out["difference"] = out["measured_step_s"] / plan["step_s"] - 1.0
        else:
            out["verdict"], out["difference"] = verdict(out["measured_step_s"], plan["step_s"], req.tolerance)
        out["measured_days"] = out["measured_step_s"] * plan["steps"] / 86400
    path = Path(req.directory) / RESULT
    path.write_text(json.dumps(out, indent=2, default=str) + "\n")
    out["path"] = str(path)
    return out


def _launch(cmd: list[str], workdir: Path, timeout_s: float, on_event: Callable[[object], None],
            threads: int | None = None) -> tuple[str | None, list[str], float]:
    """Run the training process group; stream its step events; kill the whole group on timeout or Ctrl-C.
    threads: each rank's CPU threads where OMP_NUM_THREADS is unset, as launch.sh gives them."""
    env = trial_env()
    if threads and "OMP_NUM_THREADS" not in os.environ:
        env["OMP_NUM_THREADS"] = str(threads)
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            text=True, env=env, cwd=str(workdir), start_new_session=True,
                            preexec_fn=launched_by(), bufsize=1)
    tail: collections.deque[str] = collections.deque(maxlen=200)

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            line = line.rstrip("\n")
            ev = parse_marker(line)
            if ev is not None:
                if ev.get("event") == "step":
                    on_event(VerifyStep(ev["index"], ev["step_s"], ev["warmup"]))
                continue
            tail.append(line)
            on_event(VerifyLog(line))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    status = None
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        status = f"killed after {timeout_s:.0f} s without finishing (hung or too slow; see --timeout)"
    finally:
        _kill_group(proc, grace_s=1.0 if status is None else 5.0)  # torchrun's workers must not outlive it
        reader.join(timeout=5)
        if proc.stdout is not None:
            proc.stdout.close()
    return status, list(tail), time.perf_counter() - t0
