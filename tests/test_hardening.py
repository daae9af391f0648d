"""Issue 24's findings, each reproduced as the attacker or the unlucky user met it, with the safe outcome
asserted: text from a file or a database never runs, and every fault ends in one clear message that names
the file, with nothing lost. The fault table in docs/faults.md lists them."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from conftest import ROOT, TINY
from engine.bench import events as ev
from engine.bench.agent import MODULE as AGENT
from engine.bench.sweep import SweepRequest, run_sweep
from engine.data.errors import PlannerError, StoreError
from engine.data.jsonl import import_jsonl
from engine.data.store import Run, Store
from tui_planner.cli import main

MEASURED = ROOT / "data" / "measured" / "h100-x1-pythia-1b-causal-2026-11-23.jsonl"


# --- 1: an exported launch.sh never runs what a results file or a preset says ------------------------


def _poisoned_db(path: Path, marker: Path) -> str:
    """A results file as someone might share it: one measured Pythia-1B row whose trial id and recorded
    allocator setting carry shell commands."""
    with Store.open(path, read_only=False) as s:
        import_jsonl(s, MEASURED)
        row = s.query("SELECT trial_id, provenance FROM trials WHERE key LIKE '%|free-lunch|%' LIMIT 1")[0]
        prov = json.loads(row["provenance"])
        prov["alloc_conf"] = f'x}}"; touch {marker}-alloc; echo "'
        evil = f"abc\ntouch {marker}-id\n#"
        s.con.execute("UPDATE trials SET trial_id = ?, provenance = ? WHERE trial_id = ?",
                      [evil, json.dumps(prov), row["trial_id"]])
        s.con.execute("CHECKPOINT")
    return evil


def test_an_exported_launch_script_runs_nothing_from_the_database_or_presets(tmp_path):
    marker = tmp_path / "pwned"
    db = tmp_path / "shared.duckdb"
    evil_id = _poisoned_db(db, marker)
    presets = tmp_path / "evil.toml"
    presets.write_text(f'[models.pythia-1b]\nname = "P\\ntouch {marker}-name\\n# "\nhf_class = "X\\ntouch {marker}-cls"\n')
    out = tmp_path / "export"
    assert main(["export", "--db", str(db), "--presets", str(presets), "--trial", evil_id, "--out", str(out)]) == 0
    launch = (out / "launch.sh").read_text()
    # Stand-ins for the launchers on PATH: they record their arguments and start nothing.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("torchrun", "python", "accelerate"):
        (bin_dir / tool).write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {tmp_path}/{tool}.args\n')
        (bin_dir / tool).chmod(0o755)
    (tmp_path / "train.py").write_text("")
    done = subprocess.run(["bash", str(out / "launch.sh"), str(tmp_path / "train.py")], capture_output=True,
                          text=True, env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}, timeout=60)
    assert done.returncode == 0, done.stderr
    assert not list(tmp_path.glob("pwned*")), f"launch.sh ran a command from the data:\n{launch}"
    args = (tmp_path / "torchrun.args").read_text().split("\n")
    assert args[:6] == ["--standalone", "--nnodes", "1", "--nproc-per-node", "1", str(tmp_path / "train.py")]
    assert "not one PyTorch reads" in launch  # the allocator setting is dropped, and the script says so
    for line in launch.splitlines():  # every line of data stays inside its comment
        assert line.startswith("#") or "touch" not in line, line


# --- 5: a full disk: the real error, the file named, the finished trial kept and stored on resume -----


def test_a_full_disk_says_so_and_loses_no_finished_trial(tmp_path, monkeypatch):
    # The full disk is a write-ahead log linked to /dev/full; DuckDB with external access off (every store's
    # connection, engine/data/schema.py) will not follow that link at all, so this test alone opens with it on.
    from engine.data import schema

    monkeypatch.setitem(schema.SAFE_CONFIG, "enable_external_access", True)
    db = tmp_path / "r.duckdb"
    wal = Path(str(db) + ".wal")
    req = SweepRequest(model="tiny-neox", methods="naive", device="cpu", presets=(TINY,), compile=False,
                       repetitions=3, warmup=1, timeout_s=240, db=str(db))

    def fill_the_disk(e):  # the write-ahead log becomes a device that is always full
        if isinstance(e, ev.TrialStarted):
            wal.symlink_to("/dev/full")

    with pytest.raises(PlannerError) as raised:
        run_sweep(req, on_event=fill_the_disk)
    message = str(raised.value)
    assert "No space left on device" in message and str(db) in message and "no transaction" not in message
    kept = list((tmp_path / "r.duckdb.pending").glob("*.json"))
    assert len(kept) == 1 and "stored when you run the same command again" in message
    wal.unlink()  # space again
    seen = []
    run_sweep(req, on_event=seen.append)
    assert not [e for e in seen if isinstance(e, ev.TrialStarted)]  # stored, not measured again
    with Store.open(db, read_only=True) as s:
        (row,) = s.trials()
        runs = s.runs()
    assert row["feasible"] and row["trial_id"] == kept[0].stem
    assert [r["status"] for r in runs] == ["interrupted", "done"]
    assert not (tmp_path / "r.duckdb.pending").exists()


# --- 8: a database file is either absent or whole ---------------------------------------------------


def test_a_creator_killed_at_any_moment_leaves_no_half_made_database(tmp_path):
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from engine.data.store import Store\n"
            "for i in range(1000):\n    Store.open(f'{sys.argv[2]}/db{i}.duckdb', read_only=False).close()\n")
    for attempt in range(5):
        folder = tmp_path / f"a{attempt}"
        folder.mkdir()
        proc = subprocess.Popen([sys.executable, "-c", code, str(ROOT), str(folder)])
        deadline = time.monotonic() + 60  # start-up takes what a loaded machine gives it
        while not any(folder.glob("db*.duckdb")) and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.01)
        time.sleep(0.03 + 0.07 * attempt)  # into the loop of creations, at a different moment each time
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        made = sorted(folder.glob("db*.duckdb"))
        assert made, "the creator never got going"
        for path in made:  # every file that exists is a database we can open, read and write
            with Store.open(path, read_only=False) as s:
                assert s.trials() == []
        # The next creation of the name being made when the process died succeeds.
        with Store.open(folder / f"db{len(made)}.duckdb", read_only=False) as s:
            assert s.schema_version
        left = [p.name for p in folder.iterdir() if p.name.startswith(".")]
        assert not left, left


# --- 9: damaged files, foreign files, odd names: a message, not a traceback -------------------------


def _cli_error(capsys, argv) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.startswith("tui-planner: error:")
    return err


def test_a_truncated_database_is_named_not_a_traceback(tmp_path, capsys):
    db = tmp_path / "cut.duckdb"
    with Store.open(db, read_only=False) as s:
        import_jsonl(s, MEASURED)
    data = db.read_bytes()
    db.write_bytes(data[: len(data) // 3])
    err = _cli_error(capsys, ["results", "--db", str(db)])
    assert str(db) in err


def test_a_database_with_only_a_meta_table_is_not_ours(tmp_path, capsys):
    db = tmp_path / "meta.duckdb"
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE meta (key VARCHAR, value VARCHAR); INSERT INTO meta VALUES ('schema_version', '3')")
    con.close()
    err = _cli_error(capsys, ["results", "--db", str(db)])
    assert str(db) in err and "not a tui-planner database" in err


def test_a_file_name_too_long_for_the_file_system(tmp_path, capsys):
    err = _cli_error(capsys, ["results", "--db", str(tmp_path / ("x" * 300 + ".duckdb"))])
    assert "x" * 50 in err and "too long" in err.lower()


def test_a_preset_that_is_not_utf8_names_the_file(tmp_path, capsys):
    bad = tmp_path / "latin1.toml"
    bad.write_bytes('[models.tiny-neox]\nname = "caf\xe9"\n'.encode("latin-1"))
    err = _cli_error(capsys, ["presets", "--presets", str(bad)])
    assert str(bad) in err and "UTF-8" in err


# --- 10: a copy of the file made during a sweep holds every written trial ---------------------------


def test_a_copy_of_a_file_being_written_holds_its_trials(tmp_path):
    db, copy = tmp_path / "live.duckdb", tmp_path / "copy.duckdb"
    code = ("import sys, time; sys.path.insert(0, sys.argv[1]); from engine.data.store import Store, Trial, Run\n"
            "s = Store.open(sys.argv[2], read_only=False); s.add_run(Run(source='measured', run_id='r'))\n"
            "for i in range(3):\n"
            "    s.add_trial(Trial(model='m', gpu='g', num_gpus=1, feasible=True, source='measured', run_id='r'))\n"
            "print('written', flush=True); time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", code, str(ROOT), str(db)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "written"
        with pytest.raises(StoreError, match="open a copy of the file"):
            Store.open(db, read_only=True)
        copy.write_bytes(db.read_bytes())  # the file alone, as the advice says: no .wal beside it
        with Store.open(copy, read_only=True) as s:
            assert len(s.trials()) == 3
    finally:
        proc.kill()
        proc.wait()


# --- 11: a run whose process died reads interrupted, not running forever ---------------------------


def test_a_run_left_running_by_a_dead_process_reads_interrupted(tmp_path):
    db = tmp_path / "r.duckdb"
    code = ("import sys, os; sys.path.insert(0, sys.argv[1]); from engine.data.store import Store, Run\n"
            "s = Store.open(sys.argv[2], read_only=False); s.start_run(Run(source='measured', run_id='dead', "
            "status='running')); os.kill(os.getpid(), 9)\n")
    subprocess.run([sys.executable, "-c", code, str(ROOT), str(db)])
    with Store.open(db, read_only=True) as s:
        assert [r["status"] for r in s.runs()] == ["interrupted"]
    with Store.open(db, read_only=False) as s:
        s.start_run(Run(source="measured", run_id="alive", status="running"))
        assert {r["run_id"]: r["status"] for r in s.runs()} == {"dead": "interrupted", "alive": "running"}
        stored = dict(s.con.execute("SELECT run_id, status FROM runs").fetchall())
        assert stored["dead"] == "interrupted"  # written into the file by the next sweep
        s.finish_run("alive")


# --- 3: no trial process outlives the sweep that owns it, whatever the instant it dies ---------------


def _marked(mark: str, text: str = "engine.bench.trial") -> list[int]:
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
                env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            except OSError:
                continue
            if text in cmd and f"TUI_PLANNER_TEST_MARK={mark}".encode() in env:
                if text.startswith("engine.") and text != AGENT and AGENT in cmd:
                    continue  # torchrun's agent names the module too: the workers are what we look for
                found.append(int(pid))
    return found


@pytest.mark.parametrize("attempt", range(5))
def test_killing_bench_as_a_worker_starts_leaves_no_worker(tmp_path, attempt):
    mark = f"orphan-{os.getpid()}-{attempt}"
    # TMPDIR: the killed sweep cannot remove its trials' folder; it goes with this test's
    env = {**os.environ, "TUI_PLANNER_TEST_MARK": mark, "TMPDIR": str(tmp_path)}
    bench = subprocess.Popen([sys.executable, "-m", "tui_planner", "bench", "--model", "tiny-neox", "--device", "cpu",
                              "--methods", "naive", "--presets", TINY, "--db", str(tmp_path / "r.duckdb"),
                              "--no-compile", "--repetitions", "3", "--gpus", "2"], cwd=ROOT, env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        end = time.time() + 120
        while time.time() < end and not _marked(mark):  # the worker's first moments: torchrun just forked it
            time.sleep(0.005)
        assert _marked(mark), "no trial worker started"
        time.sleep(0.01 * attempt)
        bench.send_signal(signal.SIGKILL)
        bench.wait()
        end = time.time() + 5
        while time.time() < end and _marked(mark):
            time.sleep(0.1)
        assert not _marked(mark), "a trial worker outlived the sweep that started it"
        assert not _marked(mark, AGENT)
    finally:
        bench.kill()
        for pid in _marked(mark, ""):
            os.kill(pid, signal.SIGKILL)


# --- 7: a failed trial removes its own build locks, never another process's ------------------------


def test_a_failed_trial_removes_only_its_own_build_lock(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "ext"))
    theirs = tmp_path / "ext" / "py311_cpu" / "their_op" / "lock"
    theirs.parent.mkdir(parents=True)
    holder = subprocess.Popen([sys.executable, "-c", "import os, sys, time; fd = os.open(sys.argv[1], "
                               "os.O_CREAT | os.O_EXCL); print('held', flush=True); time.sleep(120)", str(theirs)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        seen = []
        run_sweep(SweepRequest(model="tiny-neox", methods="naive", device="cpu", presets=(TINY,), compile=False,
                               repetitions=3, warmup=1, timeout_s=60, faults={"naive": "hang-building"},  # room to import torch under load
                               db=str(tmp_path / "r.duckdb")), on_event=seen.append)
        (done,) = [e for e in seen if isinstance(e, ev.TrialFinished)]
        assert done.status == "timeout"
        ours = tmp_path / "ext" / "fault" / "op" / "lock"
        assert any(isinstance(e, ev.Log) and f"holding {ours}" in e.line for e in seen)
        assert not ours.exists(), "the killed trial's own lock would block every later build"
        assert theirs.exists(), "another process's build lock was removed"
    finally:
        holder.kill()
        holder.wait()


def test_killing_verify_as_its_worker_starts_leaves_no_worker(offload_sweep, tmp_path):
    db = tmp_path / "r.duckdb"
    db.write_bytes((offload_sweep / "r.duckdb").read_bytes())
    out = tmp_path / "export"
    assert main(["export", "--db", str(db), "--presets", TINY, "--model", "tiny-neox", "--gpu", "cpu",
                 "--num-gpus", "1", "--out", str(out)]) == 0
    mark = f"orphan-verify-{os.getpid()}"
    verify = subprocess.Popen([sys.executable, "-m", "tui_planner", "verify", str(out), "--steps", "50"], cwd=ROOT,
                              env={**os.environ, "TUI_PLANNER_TEST_MARK": mark, "TMPDIR": str(tmp_path)},
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # TMPDIR: as above
    try:
        end = time.time() + 120
        while time.time() < end and not _marked(mark, "engine.recipe.verify_worker"):
            time.sleep(0.005)
        workers = _marked(mark, "engine.recipe.verify_worker")
        assert workers, "no verify worker started"
        verify.send_signal(signal.SIGKILL)
        verify.wait()
        end = time.time() + 5
        while time.time() < end and any(Path(f"/proc/{p}").exists() for p in workers):
            time.sleep(0.1)
        assert not [p for p in workers if Path(f"/proc/{p}").exists()], "a verify worker outlived verify"
    finally:
        verify.kill()
        for pid in _marked(mark, ""):
            os.kill(pid, signal.SIGKILL)


# --- 4: an absurd model or an unbounded config is refused before anything is launched or read -------


def _tiny_with(tmp_path, extra: str) -> Path:
    folder = tmp_path / "presets"
    folder.mkdir(exist_ok=True)
    (folder / "over.toml").write_text(extra)
    return folder


@pytest.mark.parametrize("config, message", [
    ("num_hidden_layers = 1000000", r"tiny-neox's config: num_hidden_layers = '1000000' is not a whole number from 1 to 10,000"),
    ("num_hidden_layers = 2000\nhidden_size = 100000\nintermediate_size = 400000",
     r"tiny-neox: [\d,]+ parameters need [\d,.]+ GB in fp32 to build, and this machine has"),
])
def test_a_model_no_gpu_could_hold_is_refused_before_launch(tmp_path, config, message):
    over = _tiny_with(tmp_path, f"[models.tiny-neox.config]\n{config}\n")
    seen = []
    with pytest.raises(PlannerError, match=message + ".*nothing was launched"):
        run_sweep(SweepRequest(model="tiny-neox", methods="all", device="cpu", presets=(TINY, str(over)),
                               compile=False, db=str(tmp_path / "r.duckdb")), on_event=seen.append)
    assert seen == [] and not (tmp_path / "r.duckdb").exists()


@pytest.mark.parametrize("what, content, expected", [
    ("endless", None, "a regular file"),
    ("deep", "[" * 100_000 + "]" * 100_000, "nested no deeper"),
    ("huge", '{"a": "' + "x" * (5 * 2**20) + '"}', "at most 4 MiB"),
])
def test_a_config_json_that_never_ends_or_nests_forever_is_named(tmp_path, capsys, what, content, expected):
    config = Path("/dev/zero") if content is None else tmp_path / "config.json"
    if content is not None:
        config.write_text(content)
    over = _tiny_with(tmp_path, f'[models.tiny-neox]\nhf_config = "{config}"\n')
    err = _cli_error(capsys, ["presets", "--presets", TINY, "--presets", str(over)])
    assert "models.tiny-neox.hf_config" in err and expected in err and str(over / "over.toml") in err


# --- 9: a write-ahead log cut short loses at most the write in flight ------------------------------


def test_a_writer_killed_mid_sweep_leaves_every_written_trial_in_the_file(tmp_path):
    db = tmp_path / "r.duckdb"
    code = ("import sys, os; sys.path.insert(0, sys.argv[1]); from engine.data.store import Store, Trial, Run\n"
            "s = Store.open(sys.argv[2], read_only=False); s.start_run(Run(source='measured', run_id='r', status='running'))\n"
            "for i in range(4):\n"
            "    s.add_trial(Trial(model='m', gpu='g', num_gpus=1, feasible=True, source='measured', run_id='r'))\n"
            "os.kill(os.getpid(), 9)\n")
    subprocess.run([sys.executable, "-c", code, str(ROOT), str(db)])
    wal = Path(str(db) + ".wal")
    if wal.exists():  # tear whatever the log holds
        wal.write_bytes(wal.read_bytes()[: max(0, wal.stat().st_size - 7)])
    with Store.open(db, read_only=True) as s:
        assert len(s.trials()) == 4 and [r["status"] for r in s.runs()] == ["interrupted"]


def test_the_engine_refuses_non_finite_planning_inputs():
    from dataclasses import replace

    from engine.data.presets import load_presets
    from engine.plan.ranking import RankRequest

    presets = load_presets(include_user=False)
    base = RankRequest(model="pythia-1b", budget_usd=50_000)
    base.validate(presets)
    for change in (dict(budget_usd=float("inf")), dict(deadline_days=float("nan")), dict(lifespan_years=float("inf")),
                   dict(kwh_price_usd=float("inf")), dict(price_overrides={"h100": float("inf")})):
        with pytest.raises(PlannerError):
            replace(base, **change).validate(presets)


def test_missing_extras_say_how_to_install_them_from_a_clone():
    from engine.bench import environment

    text = Path(environment.__file__).read_text()
    assert "tui-planner[bench]" not in text and "pip install '.[bench]'" in text
