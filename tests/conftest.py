import hashlib
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

# CPU trials build no DeepSpeed op (engine.bench.steppers.cpu_deepspeed), but torch's JIT would put any
# build of this run's environment in ~/.cache/torch_extensions/py311_cpu, over another clone's: the suite
# keeps them in a folder of its environment's own (torch and DeepSpeed honour TORCH_EXTENSIONS_DIR; a user's
# own setting wins).
os.environ.setdefault("TORCH_EXTENSIONS_DIR", str(
    Path.home() / ".cache" / "torch_extensions" / f"tui-planner-tests-{hashlib.sha1(sys.prefix.encode()).hexdigest()[:10]}"))


_SESSION_TEMP: list[Path] = []
_CONFIG: list = []  # the controller's config (pytest-xdist's, or the one process of a run without it)
_STARTED: list = []  # (thread, stop event) for each shared sweep the controller started


def pytest_configure(config):
    """Once per run, before the workers start (they inherit the environment): importing transformers makes
    torch's default inductor cache folder in the temp directory (torchinductor_<user>), so every process
    of the run, trials included, gets one folder of this run's instead, removed when the run ends."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return
    _CONFIG.append(config)
    import atexit
    import tempfile

    # Every trial, agent and CLI process the suite starts imports the project's own modules; where the
    # environment says not to write bytecode (PYTHONDONTWRITEBYTECODE), each compiled them from source
    # again. Compiled once here, they are read like any installed package's (stale files are rewritten).
    import compileall

    for package in ("engine", "tui_planner"):
        compileall.compile_dir(str(ROOT / package), quiet=1)
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


@pytest.hookimpl(optionalhook=True)  # a run without pytest-xdist (-p no:xdist) has no such hook
def pytest_xdist_auto_num_workers(config):
    """Two workers more than the cores: many tests spend seconds waiting (a trial's timeout, a process's
    start, the app's pilot waiting for it to go idle), and the spare workers fill them. With one spare, a
    run on 2 cores kept them busy 1.4 of 2 (user + system time over wall time)."""
    return (os.cpu_count() or 1) + 2


@pytest.fixture(autouse=True)
def _no_user_presets(tmp_path_factory, monkeypatch):
    """Tests never read the developer's own ~/.config/tui-planner."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("xdg")))


def once_per_run(tmp_path_factory, name: str, make) -> Path:
    """make(folder) runs once for the whole test run, in whichever pytest-xdist worker asks first (or in
    the controller, which starts the suite's shared sweeps when the run begins: see SHARED); the others
    wait for it and share the folder (each worker's temp folder sits under one root)."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent
    return _once(root, name, make)


def _once(root: Path, name: str, make, stop=None) -> Path:
    from filelock import FileLock

    folder = root / name
    with FileLock(str(folder) + ".lock"):
        if not (folder / "done").exists():
            shutil.rmtree(folder, ignore_errors=True)  # a make that failed half-way in another worker
            folder.mkdir()
            if stop is None:
                make(folder)
            else:
                make(folder, stop)
            if stop is None or not stop.is_set():
                (folder / "done").touch()
    return folder


def _sweep_into(folder: Path, stop=None, **kw) -> None:
    """A real sweep into folder/r.duckdb; its events go to folder/events.pickle."""
    from engine.bench.sweep import SweepRequest, run_sweep

    seen: list = []
    run_sweep(SweepRequest(model="tiny-neox", device="cpu", presets=(TINY,), compile=False, repetitions=3, warmup=1,
                           db=str(folder / "r.duckdb"), **kw), on_event=seen.append, stop=stop)
    (folder / "events.pickle").write_bytes(pickle.dumps(seen))


OFFLOAD_SWEEP = ("free-lunch", "zero2+offload", "ckpt+fsdp3+offload")


def _make_offload_sweep(folder: Path, stop=None) -> None:
    _sweep_into(folder, stop, methods="all", exhaustive=True, only=OFFLOAD_SWEEP, timeout_s=900)


def _make_two_ranks(folder: Path, stop=None) -> None:
    _sweep_into(folder, stop, num_gpus=2, methods="all", exhaustive=True, only=("free-lunch", "fsdp3", "zero1"),
                max_micro_batch=2,
                timeout_s=900)


# The suite's shared sweeps, by the name of the session fixture that returns each one's folder. Each is a
# chain of real trials minutes long, and its tests wait for it: under pytest-xdist the controller (which
# runs no tests) starts the ones the collected tests use as the run begins, so none is left to the end of
# the run, when the other workers have nothing left to do beside it.
SHARED = {"offload_sweep": ("offload-sweep", _make_offload_sweep), "two_ranks": ("two-ranks", _make_two_ranks)}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_finish(session):
    """In each worker: say which shared sweeps the collected tests use (the controller reads it)."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    root = session.config._tmp_path_factory.getbasetemp().parent
    for fixture, (name, _) in SHARED.items():
        if any(fixture in getattr(item, "fixturenames", ()) for item in session.items):
            (root / f"{name}.wanted").touch()


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids):
    """In the controller, once a worker has collected: start the shared sweeps its tests use."""
    import threading

    if _STARTED or not _CONFIG:
        return
    root = _CONFIG[0]._tmp_path_factory.getbasetemp()
    for name, make in SHARED.values():
        if (root / f"{name}.wanted").exists():
            stop = threading.Event()

            def run(name=name, make=make, stop=stop):
                try:
                    _once(root, name, make, stop)
                except Exception:  # noqa: BLE001, S110 - the first test that needs it makes it again, and fails there
                    pass

            thread = threading.Thread(target=run, name=f"shared-{name}", daemon=True)
            _STARTED.append((thread, stop))
            thread.start()


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session):
    """In the controller: a shared sweep still running (a run stopped early, or deselected tests) is
    stopped, its trial killed, before pytest removes the temp folders."""
    for thread, stop in _STARTED:
        stop.set()
    for thread, _ in _STARTED:
        thread.join(timeout=60)


@pytest.fixture(scope="session")
def offload_sweep(tmp_path_factory) -> Path:
    """The tiny model's free-lunch, ZeRO-2 + offload and checkpointing + FSDP-3 + offload, measured for real
    once per test run: DeepSpeed's offload trials are the slowest of the suite (two launches each), and the
    engine's and the recipe's tests read the same rows.
    Returns the folder with `r.duckdb` (copy it before writing) and `events.pickle` (the sweep's events)."""
    return once_per_run(tmp_path_factory, "offload-sweep", _make_offload_sweep)


@pytest.fixture(scope="session")
def two_ranks(tmp_path_factory) -> dict:
    """free-lunch (DDP), FSDP-3 and ZeRO-1 on two CPU ranks over gloo, micro-batch at most 2 so that each
    accumulates 4 passes (tiny-neox's batch of 16 over two ranks), measured once per test run: the rows by
    sharding (none, fsdp3, zero1). A module fixture swept again in each worker that got one of its tests."""
    from engine.data.store import Store

    folder = once_per_run(tmp_path_factory, "two-ranks", _make_two_ranks)
    with Store.open(folder / "r.duckdb", read_only=True) as s:
        return {r["sharding"]: r for r in s.trials(model="tiny-neox")}
