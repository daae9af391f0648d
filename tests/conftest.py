import os
import pickle
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
TINY = str(FIXTURES / "tiny")
sys.path.insert(0, str(ROOT))

# CPU trials rarely meet the timing's spread rule, so each would time the full 20 repetitions: three are
# what the tests check (engine.bench.environment.max_repetitions; trial processes inherit the variable).
os.environ.setdefault("TUI_PLANNER_MAX_REPETITIONS", "3")


_SESSION_TEMP: list[Path] = []


def pytest_configure(config):
    """Once per run, before the workers start (they inherit the environment): importing transformers makes
    torch's default inductor cache folder in the temp directory (torchinductor_<user>), so every process
    of the run, trials included, gets one folder of this run's instead, removed when the run ends."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return
    import atexit
    import tempfile

    if "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
        folder = Path(tempfile.mkdtemp(prefix="tui-planner-tests-"))
        _SESSION_TEMP.append(folder)
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(folder / "inductor")
    # Registered before pytest makes its temp folders, so run after pytest's own exit clean-up of them.
    atexit.register(_leave_no_temp_folder, Path(tempfile.gettempdir()))


def _leave_no_temp_folder(temp: Path) -> None:
    """The run leaves nothing in the temp directory: its inductor folder goes, and so does pytest's own
    pytest-of-<user> once pytest has removed this run's folder from it (a passing run; see pyproject)."""
    import getpass

    for folder in _SESSION_TEMP:
        shutil.rmtree(folder, ignore_errors=True)
    try:
        (temp / f"pytest-of-{getpass.getuser()}").rmdir()  # only when empty: a failed run's folders stay
    except (OSError, KeyError):
        pass


def pytest_xdist_auto_num_workers(config):
    """One worker more than the cores: many tests spend seconds waiting (a trial's timeout, a process's
    start), and the spare worker fills them."""
    return (os.cpu_count() or 1) + 1


@pytest.fixture(autouse=True)
def _no_user_presets(tmp_path_factory, monkeypatch):
    """Tests never read the developer's own ~/.config/tui-planner."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("xdg")))


def once_per_run(tmp_path_factory, name: str, make) -> Path:
    """make(folder) runs once for the whole test run, in whichever pytest-xdist worker asks first; the
    others wait for it and share the folder (each worker's temp folder sits under one root)."""
    from filelock import FileLock

    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent
    folder = root / name
    with FileLock(str(folder) + ".lock"):
        if not (folder / "done").exists():
            shutil.rmtree(folder, ignore_errors=True)  # a make that failed half-way in another worker
            folder.mkdir()
            make(folder)
            (folder / "done").touch()
    return folder


OFFLOAD_SWEEP = ("naive", "free-lunch", "zero2+offload", "ckpt+fsdp3+offload")


@pytest.fixture(scope="session")
def offload_sweep(tmp_path_factory) -> Path:
    """The tiny model's naive, free-lunch, ZeRO-2 + offload and checkpointing + FSDP-3 + offload, measured
    for real once per test run: DeepSpeed's offload trials are the slowest of the suite (two launches each,
    and a CPU Adam build on a fresh machine), and the engine's and the recipe's tests read the same rows.
    Returns the folder with `r.duckdb` (copy it before writing) and `events.pickle` (the sweep's events)."""

    def make(folder: Path) -> None:
        from engine.bench.sweep import SweepRequest, run_sweep

        seen = []
        run_sweep(SweepRequest(model="tiny-neox", methods="all", exhaustive=True, only=OFFLOAD_SWEEP, device="cpu",
                               presets=(TINY,), compile=False, repetitions=3, warmup=1, timeout_s=900,
                               db=str(folder / "r.duckdb")), on_event=seen.append)
        (folder / "events.pickle").write_bytes(pickle.dumps(seen))

    return once_per_run(tmp_path_factory, "offload-sweep", make)
