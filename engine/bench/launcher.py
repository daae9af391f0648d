"""Launch one trial in its own process group through torchrun, with a timeout, and collect its result.
(torchrun's agent runs as engine.bench.agent: torch.distributed.run's main, ending without Python's teardown.)

A crash, a CUDA error or a hung collective ends that process group, never the caller: the trial is
killed (SIGTERM, then SIGKILL), recorded with why, and the sweep goes on. The launcher itself is
started with PR_SET_PDEATHSIG, so if the app is killed outright its trials die too. No torch here.

Three ways to launch (LAUNCHERS): `local`, one torchrun on this machine (--standalone), for one node;
`srun`, inside a SLURM allocation, one torchrun agent per node started by `srun`, meeting through
torchrun's c10d rendezvous on this host; `local-nodes`, N agents on this machine meeting the same way,
which is how CI exercises the multi-node path (and each agent gets its own GPUs). With more than one
node the spec and result files must be on a filesystem every node sees (the sweep puts them next to
the database): global rank 0, wherever it runs, writes the result.
"""

from __future__ import annotations

import collections
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from engine.bench import agent
from engine.bench.environment import (build_locks_held_by, clear_build_locks, cpu_threads_per_rank, launched_by,
                                      trial_env)
from engine.bench.events import BatchTried, Log, Measuring, TrialSpec, parse_marker
from engine.data.space import HOST_MALLOC_ENV


@dataclass
class TrialOutcome:
    status: str  # measured | oom | dominated | failed | timeout | stopped | relaunch (the sweep launches it again)
    result: dict
    message: str | None
    duration_s: float
    log_tail: list[str]


LAUNCHERS = ("local", "local-nodes", "srun")


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def torchrun_command(spec: TrialSpec, spec_path: Path, out_path: Path, endpoint: str | None = None) -> list[str]:
    """One torchrun agent's command: standalone for one node, c10d rendezvous at `endpoint` for more.
    Its logs go beside the result file (without --log-dir torchrun leaves a torchelastic_* folder in the
    temp directory on every launch); run_trial removes them with the trial."""
    cmd = [*agent.command(), f"--log-dir={log_dir(out_path)}"]
    if spec.num_nodes == 1:
        cmd += ["--standalone", "--nnodes=1"]
    else:
        rdzv_id = hashlib.sha1(f"{spec.key}|{out_path}".encode()).hexdigest()[:16]
        cmd += [f"--nnodes={spec.num_nodes}", "--rdzv-backend=c10d", f"--rdzv-endpoint={endpoint}",
                f"--rdzv-id={rdzv_id}", f"--rdzv-conf=join_timeout={join_timeout_s()}"]
    cmd += [f"--nproc-per-node={spec.num_gpus}", "--max-restarts=0", "-m", "engine.bench.trial", str(spec_path), str(out_path)]
    return cmd


def join_timeout_s() -> int:
    """How long an agent waits for the other nodes at the rendezvous (torchrun's join_timeout):
    $TUI_PLANNER_RDZV_JOIN_TIMEOUT_S, default 120."""
    try:
        return max(1, int(os.environ.get("TUI_PLANNER_RDZV_JOIN_TIMEOUT_S", "120")))
    except ValueError:
        return 120


def node_grace_s() -> float:
    """How long the other nodes' agents get to fail by themselves once one has: $TUI_PLANNER_NODE_GRACE_S, 15."""
    try:
        return max(0.0, float(os.environ.get("TUI_PLANNER_NODE_GRACE_S", "15")))
    except ValueError:
        return 15.0


def endpoint_of(commands: list[tuple[list[str], dict[str, str]]]) -> str | None:
    """The rendezvous endpoint several nodes' agents meet at (None for one node)."""
    for cmd, _ in commands:
        for arg in cmd:
            if arg.startswith("--rdzv-endpoint="):
                return arg.split("=", 1)[1]
    return None


# What an agent says when the other nodes never joined in time (torch.distributed.elastic). Not its
# RendezvousConnectionError: that is also what the survivors of a node that died after they met say.
RENDEZVOUS_TIMED_OUT = "RendezvousTimeoutError"


def log_dir(out_path: Path) -> Path:
    return out_path.with_name(out_path.name.removesuffix(".result.json") + ".logs")


def launch_commands(spec: TrialSpec, spec_path: Path, out_path: Path, launcher: str,
                    env: dict[str, str]) -> list[tuple[list[str], dict[str, str]]]:
    """The processes to start for one trial, each with its environment."""
    if launcher not in LAUNCHERS:
        raise ValueError(f"launcher is one of {', '.join(LAUNCHERS)}, not {launcher!r}")
    if spec.num_nodes == 1 and launcher != "srun":
        return [(torchrun_command(spec, spec_path, out_path), env)]
    if launcher == "srun":
        # The c10d store runs in the agent on this host (the allocation's first node, where the sweep runs).
        import socket

        endpoint = f"{env.get('MASTER_ADDR') or socket.gethostname()}:{free_port()}"
        srun = ["srun", f"--nodes={spec.num_nodes}", f"--ntasks={spec.num_nodes}", "--ntasks-per-node=1",
                "--kill-on-bad-exit=1", "--export=ALL"]
        if spec.device == "cuda":  # a step gets no GPUs (and one CPU) unless it asks, on recent Slurm
            srun.append(f"--gpus-per-node={spec.num_gpus}")
        if env.get("SLURM_CPUS_ON_NODE"):
            srun.append(f"--cpus-per-task={env['SLURM_CPUS_ON_NODE']}")
        return [(srun + torchrun_command(spec, spec_path, out_path, endpoint), env)]
    endpoint = f"127.0.0.1:{free_port()}"
    out = []
    visible = [d for d in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if d]
    for node in range(spec.num_nodes):
        node_env = dict(env)
        if spec.device == "cuda":  # each emulated node gets its own GPUs
            ids = visible or [str(i) for i in range(spec.num_nodes * spec.num_gpus)]
            node_env["CUDA_VISIBLE_DEVICES"] = ",".join(ids[node * spec.num_gpus:(node + 1) * spec.num_gpus])
        cmd = torchrun_command(spec, spec_path, out_path, endpoint)
        if spec.fault == "no-node1" and node == 1:  # test hook: a node whose agent never comes to the rendezvous
            cmd = [sys.executable, "-c", "import time; time.sleep(3600)"]
        out.append((cmd, node_env))
    return out


def descendants(pid: int) -> list[int]:
    """Every process below pid, read from /proc (torchrun starts its workers in sessions of their own,
    so killing torchrun's group does not reach them)."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
    out, frontier = [], {pid}
    while frontier:
        frontier = {p for p, pp in parents.items() if pp in frontier}
        out += frontier
    return out


def _kill_group(proc: subprocess.Popen, grace_s: float = 5.0) -> None:
    """Kill the trial: torchrun's process group (the group id is the leader's pid, valid after torchrun
    itself has exited), then whatever it started in sessions of its own (its workers and their builds)."""
    below = descendants(proc.pid)
    _kill_pgid(proc, grace_s)
    for pid in below:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _kill_pgid(proc: subprocess.Popen, grace_s: float) -> None:
    pgid = proc.pid
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            # The group may outlive its leader (torchrun's workers): check it is empty.
            os.killpg(pgid, 0)
        except subprocess.TimeoutExpired:
            continue
        except ProcessLookupError:
            return
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run_trial(
    spec: TrialSpec,
    workdir: Path,
    timeout_s: float,
    on_event: Callable[[object], None] = lambda e: None,
    stop: threading.Event | None = None,
    launcher: str = "local",
) -> TrialOutcome:
    workdir.mkdir(parents=True, exist_ok=True)
    name = hashlib.sha1(spec.key.encode()).hexdigest()[:12]
    spec_path, out_path = workdir / f"{name}.spec.json", workdir / f"{name}.result.json"
    out_path.unlink(missing_ok=True)
    relaunch_path = Path(str(out_path) + ".relaunch")  # engine.bench.trial.relaunch writes it too
    relaunch_path.unlink(missing_ok=True)
    spec_path.write_text(spec.to_json())
    env = trial_env()
    env.update({str(k): str(v) for k, v in spec.env.items()})
    fsdp_offload = spec.methods.fsdp and spec.methods.offloading
    for k, v in (HOST_MALLOC_ENV if fsdp_offload else {}).items():
        env.setdefault(k, v)  # glibc's heap settings (engine.data.space); a user's own setting wins
    if "OMP_NUM_THREADS" not in os.environ:  # half the cores shared by this node's ranks (FSDP offload: all)
        env["OMP_NUM_THREADS"] = str(cpu_threads_per_rank(spec.num_gpus, fsdp_offload))
    t0 = time.perf_counter()
    commands = launch_commands(spec, spec_path, out_path, launcher, env)
    endpoint = endpoint_of(commands)
    procs = [subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True, env=cmd_env,
        cwd=str(workdir), start_new_session=True, preexec_fn=launched_by(), bufsize=1,
    ) for cmd, cmd_env in commands]
    tail: collections.deque[str] = collections.deque(maxlen=60)
    printed: dict = {}
    again: dict = {}  # from any rank: measure in a new process (engine.bench.trial.EXIT_RELAUNCH)

    def read(proc: subprocess.Popen) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            line = line.rstrip("\n")
            ev = parse_marker(line)
            if ev is not None:
                kind = ev.pop("event", None)
                if kind == "batch":
                    on_event(BatchTried(spec.key, ev["micro_batch"], ev["fits"]))
                elif kind == "measuring":
                    on_event(Measuring(spec.key, ev["micro_batch"]))
                elif kind == "log":
                    on_event(Log(spec.key, ev["line"]))
                elif kind == "result":  # also printed, for a result file another node wrote over NFS
                    printed.update(ev.get("result") or {})
                elif kind == "relaunch" and not again:  # the first rank to ask says why
                    again.update(ev)
                continue
            tail.append(line)
            on_event(Log(spec.key, line))

    readers = [threading.Thread(target=read, args=(p,), daemon=True) for p in procs]
    for r in readers:
        r.start()
    status = None
    ours: set[Path] = set()  # JIT-build locks our processes hold: only these may be removed if we kill them
    polls = 0
    while True:
        time.sleep(0.2)
        polls += 1
        if polls % 5 == 0:
            ours |= build_locks_held_by(pid for p in procs for pid in [p.pid, *descendants(p.pid)])
        codes = [p.poll() for p in procs]
        if all(c is not None for c in codes):
            break
        if any(c for c in codes if c is not None) and len(procs) > 1:
            # One node's agent failed: the others wait on a rendezvous or a collective that will never
            # complete. Give them 15 s in all ($TUI_PLANNER_NODE_GRACE_S) to fail by themselves, then end the trial.
            end = time.perf_counter() + node_grace_s()
            while time.perf_counter() < end and any(p.poll() is None for p in procs):
                time.sleep(0.2)
            break
        if stop is not None and stop.is_set():
            status = "stopped"
            break
        if time.perf_counter() - t0 > timeout_s:
            status = "timeout"
            break
    ours |= build_locks_held_by(pid for p in procs for pid in [p.pid, *descendants(p.pid)])
    for p in procs:  # torchrun's workers must not outlive it
        _kill_group(p, grace_s=5.0 if status else 1.0)
    code = next((p.returncode for p in procs if p.returncode), procs[0].returncode)
    if status is not None or code:
        for lock in clear_build_locks(ours):  # a killed JIT build of ours must not block the next trial
            tail.append(f"removed the stale build lock {lock}")
    for r in readers:  # the processes are gone: the readers reach the end of their pipes (and every marker)
        r.join(timeout=5)
    shutil.rmtree(log_dir(out_path), ignore_errors=True)
    for p in procs:
        if p.stdout is not None:
            p.stdout.close()
    duration = time.perf_counter() - t0
    result: dict = {}
    if out_path.exists():
        try:
            result = json.loads(out_path.read_text())
        except json.JSONDecodeError:
            result = {}
    if not result and printed:
        result = printed
    if not again and relaunch_path.exists():  # its marker line was lost in the pipe
        try:
            again.update(json.loads(relaunch_path.read_text()))
        except (OSError, json.JSONDecodeError):
            pass
    relaunch_path.unlink(missing_ok=True)
    if status is None and endpoint and not result and any(RENDEZVOUS_TIMED_OUT in ln for ln in tail):
        return TrialOutcome("failed", result, f"the {spec.num_nodes} nodes never met: the rendezvous at {endpoint} "
                            f"did not complete within {join_timeout_s()} s (torchrun's join_timeout): a node whose "
                            "agent did not start or cannot reach that address (a firewall, a wrong MASTER_ADDR, "
                            "another network interface)", duration, list(tail))
    if status == "timeout":
        return TrialOutcome("timeout", result, f"killed after {timeout_s:.0f} s without a result (hung or too slow)"
                            + (f"; {spec.num_nodes} nodes meeting at {endpoint}" if endpoint else ""),
                            duration, list(tail))
    if status == "stopped":
        return TrialOutcome("stopped", result, "stopped by the user", duration, list(tail))
    if again and result.get("status") != "measured":
        # The other ranks' own failure (a collective whose peer left) is a consequence, not the cause.
        return TrialOutcome("relaunch", {"measure_at": again.get("measure_at"), "oom_at": again.get("oom_at"),
                                         "max_micro_batch": again.get("max_fit"), "about": again.get("about")},
                            again.get("why"), duration, list(tail))
    if result.get("status"):
        return TrialOutcome(result["status"], result, result.get("failure_message"), duration, list(tail))
    return TrialOutcome("failed", result, _why_no_result(code, list(tail), spec.methods.offloading), duration,
                        list(tail))


def _why_no_result(code: int | None, tail: list[str], offloading: bool = False) -> str:
    """Say why a trial died without a result, from its exit code or torchrun's failure report; CPU offloading
    is named as a likely cause only for a trial that offloads."""
    worker_code = code
    for line in tail:  # torchrun reports the worker's own exit code: "exitcode  : -9 (pid: 4306)"
        text = line.strip()
        if text.startswith("exitcode") and ":" in text:
            try:
                worker_code = int(text.split(":", 1)[1].split()[0])
            except ValueError:
                pass
    if worker_code is not None and worker_code < 0:
        try:
            name = signal.Signals(-worker_code).name
        except ValueError:
            name = f"signal {-worker_code}"
        if name == "SIGKILL" and offloading:
            return ("trial process killed by SIGKILL: most likely the host ran out of memory "
                    "(CPU offloading keeps optimizer states, and at ZeRO-3 parameters, in host RAM)")
        if name == "SIGKILL":
            return ("trial process killed by SIGKILL: most likely the host ran out of memory (the kernel's "
                    "out-of-memory killer; `dmesg` says), or another process killed it")
        return f"trial process killed by {name} (a crash in native code, e.g. a CUDA or NCCL error)"
    last = next((ln for ln in reversed(tail) if ln.strip() and not set(ln.strip()) <= set("=-")), "")
    return f"trial process exited with code {worker_code} and wrote no result; last output: {last[-300:]}"
