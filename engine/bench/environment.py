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
from dataclasses import dataclass, field
from pathlib import Path


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


def die_with_parent() -> None:
    """PR_SET_PDEATHSIG: if our parent dies (the app killed outright), this process is killed too, so
    no trial is left holding a GPU. Linux only; elsewhere a no-op."""
    try:
        import ctypes
        import signal

        ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


# Kept on in every process we start: NVLink multicast (NVLS) can take a shared host's GPUs down.
SAFE_NCCL_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


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
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 2) // 2)))
    # The CUDA allocator is left at PyTorch's default. Growable segments (expandable_segments:True) showed
    # no gain: Pythia-1B's compiled pass took 0.503 s with them and 0.496 s without on two H100s the same
    # day (data/measured/superseded/h100-x1-1b-*-2026-11-23.jsonl), inside the machine-to-machine spread (0.481 s the
    # day before). A user's own setting passes through and is recorded with each result.
    return env


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
            done = subprocess.run([sys.executable, "-c", "import deepspeed"], env=env, capture_output=True,
                                  text=True, timeout=timeout_s, stdin=subprocess.DEVNULL, cwd=cwd)
    except subprocess.TimeoutExpired:
        return None  # slow (a cold network filesystem), not missing: the trials' own timeouts judge it
    if done.returncode == 0:
        _DEEPSPEED_IMPORTS.add(sys.executable)
        return None
    errors = [ln.strip() for ln in done.stderr.splitlines() if re.match(r"^\w+(\.\w+)*(Error|Exception)\b", ln.strip())]
    why = errors[-1] if errors else (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
    if why.startswith("ModuleNotFoundError: No module named 'deepspeed'"):
        return "DeepSpeed is not installed (pip install 'tui-planner[bench]' or deepspeed)"
    return why[:300]


def extensions_root() -> Path:
    """Where torch (and DeepSpeed's op builder) cache JIT-built extensions."""
    return Path(os.environ.get("TORCH_EXTENSIONS_DIR") or Path.home() / ".cache" / "torch_extensions")


def clear_build_locks(since: float | None = None, older_than_s: float | None = None) -> list[Path]:
    """A JIT build that is killed (a trial's timeout) leaves its `lock` file behind, and every later build
    of that op waits on it forever. Remove locks made since a killed trial began, or older than a bound."""
    root, removed, now = extensions_root(), [], time.time()
    if not root.is_dir():
        return removed
    for lock in root.glob("*/*/lock"):
        try:
            mtime = lock.stat().st_mtime
        except OSError:
            continue
        if (since is not None and mtime >= since) or (older_than_s is not None and now - mtime > older_than_s):
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
    code = ("import json, torch; print(json.dumps({'torch': torch.__version__, 'cuda': torch.version.cuda, "
            "'n': torch.cuda.device_count() if torch.cuda.is_available() else 0}))")
    text = _run([sys.executable, "-c", code], timeout=120)
    if text:
        info = json.loads(text.strip().splitlines()[-1])
        m.torch, m.cuda = info["torch"], info["cuda"]
        if not m.gpus and info["n"]:
            m.message = "torch sees GPUs but nvidia-smi is missing"
    else:
        m.message = "torch is not installed: install the bench extra (pip install 'tui-planner[bench]')"
    if not m.gpus and not m.message:
        m.message = "no NVIDIA GPU found: benchmarks run on the CPU with tiny models only"
    return m


def host_info() -> dict[str, str]:
    return {"host": socket.gethostname(), "platform": platform.platform(), "python": sys.version.split()[0]}
