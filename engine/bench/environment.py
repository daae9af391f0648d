"""The machine a sweep runs on: GPUs, driver, topology, and the environment trial processes get.

No torch import at module level: `probe()` asks nvidia-smi, and torch only where it is installed, in a
subprocess, so the app can show the local GPUs without loading CUDA into its own process.
"""

from __future__ import annotations

import json
import os
import re
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from typing import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from engine.bench.events import TrialSpec
from engine.data.links import HOST_STAGED, topology_link
from engine.data.errors import PlannerError


def sanitize_cuda_arch_env(env=None) -> str | None:
    """DeepSpeed's op builder parses TORCH_CUDA_ARCH_LIST with int(): '9.0a' (as Hopper images set it)
    fails with "invalid literal for int()". Keep the architectures, drop the suffix letters ('9.0a' ->
    '9.0'); returns the old value when it changed anything."""
    env = os.environ if env is None else env
    value = env.get("TORCH_CUDA_ARCH_LIST")
    if not value:
        return None
    clean: list[str] = []
    for part in value.replace(";", " ").replace(",", " ").split():
        ptx = part.endswith("+PTX")
        core = (part[:-4] if ptx else part).rstrip("abcdefghijklmnopqrstuvwxyz")
        item = core + ("+PTX" if ptx else "")
        if core and item not in clean:
            clean.append(item)
    new = ";".join(clean)
    if new == value:
        return None
    env["TORCH_CUDA_ARCH_LIST"] = new
    return value


def die_with_parent(expected_parent: int | None = None) -> None:
    """PR_SET_PDEATHSIG: if our parent dies (the app killed outright), this process is killed too, so
    no trial is left holding a GPU. A parent that died before the call goes unnoticed by the kernel, so
    with `expected_parent` (the pid that started us) we check we still have it. Linux only."""
    try:
        import ctypes
        import signal

        ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL)
    except (OSError, AttributeError):
        pass
    if expected_parent is not None and os.getppid() != expected_parent:
        os._exit(1)


def launched_by(parent: int | None = None):
    """A preexec_fn for Popen: the child dies with this process (called here, it records our pid)."""
    import functools

    return functools.partial(die_with_parent, os.getpid() if parent is None else parent)


# The process that owns a trial (the sweep, the app, verify), as pid:start-time, so a trial worker can tell
# it is gone even when it died before the worker ran a line (guard_worker).
WATCH_ENV = "TUI_PLANNER_OWNER"


def _start_time(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def owner_token() -> str:
    return f"{os.getpid()}:{_start_time(os.getpid()) or ''}"


def _owner_alive(token: str) -> bool:
    pid, _, started = token.partition(":")
    try:
        now = _start_time(int(pid))
    except ValueError:
        return True
    return now is not None and (not started or now == started)  # the same process, not a reused pid


# A worker's parent, by its command line: our wrapper of torchrun's agent (engine.bench.agent), or torchrun.
AGENTS = (b"engine.bench.agent", b"torch.distributed.run", b"torchrun")


def guard_worker(poll_s: float = 0.5) -> None:
    """Called first thing in a trial or verify worker (torchrun's child): die with torchrun, and end at once
    if the process that owns the trial is gone or torchrun already is (either can die in the moment
    before this runs, when the kernel's death signal is not yet set); then a watcher ends this process
    group within `poll_s` of either going, whatever the instant."""
    import signal
    import threading

    die_with_parent()
    token, parent = os.environ.get(WATCH_ENV), os.getppid()

    def orphaned() -> bool:
        if token and not _owner_alive(token):
            return True
        try:
            agent = Path(f"/proc/{os.getppid()}/cmdline").read_bytes()
        except OSError:
            return True
        return os.getppid() != parent or not any(name in agent for name in AGENTS)

    def end() -> None:
        try:
            os.killpg(0, signal.SIGKILL)  # this worker and whatever it started (compile workers, a build)
        finally:
            os._exit(1)

    if orphaned():
        end()

    def watch() -> None:
        while True:
            time.sleep(poll_s)
            if orphaned():
                end()

    threading.Thread(target=watch, name="owner-watch", daemon=True).start()


def end_worker(code: int) -> None:
    """End a process we start (a trial or verify worker once its result is written and its process group
    left; torchrun's agent once its workers are gone) without Python's teardown: unloading torch's and
    transformers' thousands of modules costs 1-2 CPU-s a process, more than a tiny CPU trial measures.
    Exit handlers still run first (torch.compile's worker pool stops in one), and the output is flushed."""
    import atexit

    try:
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)


# Kept on in every process we start: NVLink multicast (NVLS) can take a shared host's GPUs down.
SAFE_NCCL_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}

def usable_cores() -> int:
    """The cores this process may run on (its affinity, as `nproc` counts them), else the machine's."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 2


def cpu_threads_per_rank(ranks: int, fsdp_offload: bool = False) -> int:
    """Each rank's CPU threads: half the usable cores shared by this node's ranks, all of them for FSDP offload,
    whose optimizer step and gradient sums run on the host (measured there at 16 a rank on a 32-core, 2-GPU host:
    docs/measurements.md, twenty-third session). launch.sh says the same in shell (engine.recipe.export)."""
    cores = usable_cores() if fsdp_offload else usable_cores() // 2
    return max(1, cores // max(1, ranks))


def trial_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for trial processes: safe NCCL settings, a parseable arch list, unbuffered output,
    and this project first on PYTHONPATH (they import `engine` from any folder)."""
    env = dict(os.environ if base is None else base)
    root = str(Path(__file__).resolve().parents[2])  # the folder that holds the engine package
    env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    for k, v in SAFE_NCCL_ENV.items():
        env.setdefault(k, v)
    sanitize_cuda_arch_env(env)
    env["PYTHONUNBUFFERED"] = "1"
    env[WATCH_ENV] = owner_token()
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    # torch.compile's work is kept between trials and sweeps: inductor's and Triton's caches in one folder
    # per user (keyed by content, so a graph compiled once, the same settings measured again or resumed,
    # loads instead of compiling). A user's own setting wins. Compile time is still recorded apart.
    cache = compile_cache_dir()
    env.setdefault("TORCHINDUCTOR_CACHE_DIR", str(cache / "inductor"))
    env.setdefault("TRITON_CACHE_DIR", str(cache / "triton"))
    env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 2) // 2)))
    # The CUDA allocator is left at PyTorch's default. Growable segments (expandable_segments:True) showed
    # no gain: Pythia-1B's compiled pass took 0.503 s with them and 0.496 s without on two H100s the same
    # day (data/measured/superseded/h100-x1-1b-*-2026-11-23.jsonl), inside the machine-to-machine spread (0.481 s the
    # day before). A user's own setting passes through and is recorded with each result.
    return env


def nccl_settings(env: Mapping[str, str]) -> dict[str, str]:
    """The NCCL (and NVSHMEM, torch symmetric-memory) variables a trial runs with: its provenance."""
    return {k: v for k, v in sorted(env.items())
            if k.startswith(("NCCL_", "NVSHMEM_", "TORCH_SYMM_MEM_", "TORCH_NCCL_"))}


def p2p_disabled(env: Mapping[str, str]) -> bool:
    return env.get("NCCL_P2P_DISABLE", "").strip().lower() in ("1", "true", "yes")


def interconnect_of(env: Mapping[str, str], topology: str | None, num_gpus: int, num_nodes: int = 1,
                    launcher: str | None = "local") -> str | None:
    """What carries a trial's GPU-to-GPU traffic: None on one GPU; between nodes, `sockets` where NCCL is held to
    them (the emulated nodes of one machine: NCCL_SOCKET_IFNAME=lo, or NCCL_P2P_DISABLE with NCCL_SHM_DISABLE),
    else `network` (InfiniBand or Ethernet, as NCCL finds it); on one node, `host-staged` with NCCL_P2P_DISABLE=1,
    else `nvlink` or `pcie` from `nvidia-smi topo -m` (the link between the first two GPUs)."""
    if num_gpus * num_nodes <= 1:
        return None
    if num_nodes > 1:
        held = env.get("NCCL_SOCKET_IFNAME", "").strip() == "lo" or (
            p2p_disabled(env) and env.get("NCCL_SHM_DISABLE", "").strip() in ("1", "true"))
        return "sockets" if held or launcher == "local-nodes" else "network"
    if p2p_disabled(env):
        return HOST_STAGED
    return topology_link(topology)


def compile_cache_dir() -> Path:
    """Where trials keep torch.compile's caches: $TUI_PLANNER_COMPILE_CACHE, else the user's cache folder
    ($XDG_CACHE_HOME or ~/.cache)/tui-planner/compile."""
    if os.environ.get("TUI_PLANNER_COMPILE_CACHE"):
        return Path(os.environ["TUI_PLANNER_COMPILE_CACHE"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tui-planner" / "compile"


MAX_REPETITIONS_ENV = "TUI_PLANNER_MAX_REPETITIONS"


def max_repetitions(default: int = TrialSpec.max_repetitions) -> int:
    """The most timed (pass, update) repetitions a trial makes while its passes' spread stays wide:
    $TUI_PLANNER_MAX_REPETITIONS, else 20. A lower cap gives quicker, rougher measurements (on a CPU the
    spread rarely narrows, so every trial would run the full 20; the test suite sets 3); a request's own
    repetitions still run in full."""
    raw = os.environ.get(MAX_REPETITIONS_ENV, "").strip()
    if not raw:
        return default
    try:
        n = int(raw)
    except ValueError:
        raise PlannerError(f"{MAX_REPETITIONS_ENV} is a whole number of repetitions, not {raw!r}") from None
    if n < 1:
        raise PlannerError(f"{MAX_REPETITIONS_ENV} is at least 1, not {n}")
    return n


_DEEPSPEED_IMPORTS: set[str] = set()  # interpreters whose trial environment imported DeepSpeed


def deepspeed_import_error(timeout_s: float = 120.0) -> str | None:
    """Why DeepSpeed cannot be imported by a trial process (None when it can): not installed, or a
    dependency of its own missing (e.g. "No module named 'pydantic'"), which would otherwise fail every
    ZeRO trial of a sweep one launch at a time. Asked in a child process with the trials' environment,
    so the app never imports torch; a success is remembered for this process, a failure is asked again
    (the user may install what was missing and run the same command). An import slower than `timeout_s`
    is not called missing."""
    if sys.executable in _DEEPSPEED_IMPORTS:
        return None
    env = trial_env()
    try:  # from an empty folder, as trials run: a deepspeed/ source tree here must not shadow the install
        with tempfile.TemporaryDirectory(prefix="tui-planner-ds-") as cwd:
            done = subprocess.run([sys.executable, "-c", "import os, deepspeed; os._exit(0)"], env=env,
                                  capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL, cwd=cwd)
    except subprocess.TimeoutExpired:
        return None  # slow (a cold network filesystem), not missing: the trials' own timeouts judge it
    if done.returncode == 0:
        _DEEPSPEED_IMPORTS.add(sys.executable)
        return None
    errors = [ln.strip() for ln in done.stderr.splitlines() if re.match(r"^\w+(\.\w+)*(Error|Exception)\b", ln.strip())]
    why = errors[-1] if errors else (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
    if why.startswith("ModuleNotFoundError: No module named 'deepspeed'"):
        return "DeepSpeed is not installed (in the project's folder: pip install '.[bench]'; or pip install deepspeed)"
    return why[:300]


CPU_TORCH_INDEX = "https://download.pytorch.org/whl/cpu"


def torch_missing(gpus: bool) -> str:
    """How to install torch for benchmarking, as plain text. pip's torch on Linux is the CUDA build (several
    GB with its nvidia packages): on a machine with no NVIDIA GPU the CPU build comes first, from PyTorch's
    CPU index, so the bench extra finds torch installed and takes nothing more of it."""
    extra = "pip install '.[bench]'"
    if gpus:
        return f"torch is not installed: install the bench extra (in the project's folder: {extra})"
    return (f"torch is not installed; no GPU here: pip install torch --index-url {CPU_TORCH_INDEX} (CPU build, "
            f"not CUDA's GBs), then the bench extra (in the project's folder: {extra})")


def extensions_root() -> Path:
    """Where torch (and DeepSpeed's op builder) cache JIT-built extensions."""
    return Path(os.environ.get("TORCH_EXTENSIONS_DIR") or Path.home() / ".cache" / "torch_extensions")


def _locks() -> list[Path]:
    """Every build's lock: torch builds an op in <root>/py311_cpu/<op> by default, and in <root>/<op> when
    TORCH_EXTENSIONS_DIR names the root."""
    root = extensions_root()
    return [*root.glob("*/lock"), *root.glob("*/*/lock")] if root.is_dir() else []


def build_locks_held_by(pids) -> set[Path]:
    """The JIT-build lock files these processes hold open (torch's FileBaton keeps the lock's descriptor
    open from creating the file until it removes it)."""
    wanted = {str(p.resolve()) for p in _locks()}
    held = set()
    if not wanted:
        return held
    for pid in pids:
        try:
            fds = list(Path(f"/proc/{pid}/fd").iterdir())
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target in wanted:
                held.add(Path(target))
    return held


def _holders(lock: Path) -> bool:
    """Whether any live process holds this lock open (a build in progress, ours or another's)."""
    target = str(lock.resolve())
    for fd_dir in Path("/proc").glob("[0-9]*/fd"):
        try:
            for fd in fd_dir.iterdir():
                try:
                    if os.readlink(fd) == target:
                        return True
                except OSError:
                    continue
        except OSError:
            continue
    return False


def clear_build_locks(ours: Iterable[Path] = (), older_than_s: float | None = None) -> list[Path]:
    """A JIT build that is killed (a trial's timeout) leaves its `lock` file behind, and every later build
    of that op waits on it forever. Remove the locks our own trial processes were seen holding (`ours`),
    and, with `older_than_s`, locks that old that no live process holds (left by an earlier session).
    A lock another process holds is never touched: its build is running."""
    removed, now = [], time.time()
    candidates = {Path(p) for p in ours}
    if older_than_s is not None:
        for lock in _locks():
            try:
                if now - lock.stat().st_mtime > older_than_s:
                    candidates.add(lock)
            except OSError:
                continue
    for lock in sorted(candidates):
        if lock.exists() and not _holders(lock):
            lock.unlink(missing_ok=True)
            removed.append(lock)
    return removed


@dataclass
class Machine:
    host: str
    gpus: list[str] = field(default_factory=list)  # one name per GPU
    memory_gb: list[float] = field(default_factory=list)
    driver: str | None = None
    cuda: str | None = None
    topology: str | None = None
    torch: str | None = None
    message: str = ""

    @property
    def gpu_count(self) -> int:
        return len(self.gpus)


def _run(cmd: list[str], timeout: float = 20) -> str | None:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout if out.returncode == 0 else None


def probe() -> Machine:
    """The local GPUs, or a clear message why there are none."""
    m = Machine(host=socket.gethostname())
    smi = shutil.which("nvidia-smi")
    if smi:
        text = _run([smi, "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader,nounits"])
        if text:
            for line in text.strip().splitlines():
                name, mem, driver = [x.strip() for x in line.split(",")]
                m.gpus.append(name)
                m.memory_gb.append(float(mem) / 1024)
                m.driver = driver
        topo = _run([smi, "topo", "-m"])
        m.topology = re.sub(r"\x1b\[[0-9;]*m", "", topo) if topo else None  # nvidia-smi underlines the header
    code = ("import json, os, sys, torch; print(json.dumps({'torch': torch.__version__, 'cuda': torch.version.cuda, "
            "'n': torch.cuda.device_count() if torch.cuda.is_available() else 0})); sys.stdout.flush(); "
            "os._exit(0)")  # without Python's teardown of torch: a CPU second
    text = _run([sys.executable, "-c", code], timeout=120)
    if text:
        info = json.loads(text.strip().splitlines()[-1])
        m.torch, m.cuda = info["torch"], info["cuda"]
        if not m.gpus and info["n"]:
            m.message = "torch sees GPUs but nvidia-smi is missing"
    else:
        m.message = torch_missing(bool(m.gpus))
    if not m.gpus and not m.message:
        m.message = "no NVIDIA GPU found: benchmarks run on the CPU with tiny models only"
    return m


def host_info() -> dict[str, str]:
    return {"host": socket.gethostname(), "platform": platform.platform(), "python": sys.version.split()[0]}
