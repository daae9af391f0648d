"""The DuckDB store: round-trips, versions and migrations, read-only and locked files."""

import subprocess
import sys

import duckdb
import pytest

from conftest import ROOT
from engine.data import store as store_mod
from engine.data.errors import StoreError
from engine.data.paths import shipped_db
from engine.data.presets import load_presets
from engine.data.store import SCHEMA_VERSION, Run, Store, Trial


def _trial(**kw):
    base = dict(model="pythia-1b", gpu="h100", num_gpus=1, feasible=True, source="measured", key="k1",
                free_lunch=True, compile=True, tf32=True, attention="sdpa", activation_checkpointing=False,
                sharding="none", offloading=False, micro_batch=8, grad_accum=128, pass_s=0.25,
                update_s=0.05, step_s=32.05, days=53.0, mfu=0.42, plausibility="ok", kernel="sdpa-flash")
    base.update(kw)
    return Trial(**base)


def test_a_trial_round_trips(tmp_path):
    path = tmp_path / "r.duckdb"
    with Store.open(path) as s:
        run_id = s.add_run(Run(source="measured", host="box", gpu_name="H100", gpu_count=1))
        s.add_trial(_trial(run_id=run_id))
        s.add_trial(_trial(run_id=run_id, key="k2", feasible=False, days=None, failure_kind="oom",
                           failure_message="CUDA out of memory at micro-batch 1"))
        s.finish_run(run_id)
    with Store.open(path) as s:
        rows = s.trials(model="pythia-1b")
        assert [r["key"] for r in rows] == ["k1", "k2"]  # feasible first, by days
        assert rows[0]["micro_batch"] == 8 and rows[0]["kernel"] == "sdpa-flash" and rows[0]["mfu"] == 0.42
        assert rows[1]["failure_kind"] == "oom" and rows[1]["feasible"] is False
        assert s.done_keys(["k1", "k2", "k3"]) == {"k1", "k2"}
        assert s.runs()[0]["status"] == "done" and s.runs()[0]["ended_at"] is not None


def test_unknown_source_is_refused(tmp_path):
    with Store.open(tmp_path / "r.duckdb") as s:
        with pytest.raises(StoreError, match="source"):
            s.add_trial(_trial(source="guess"))


def test_presets_in_use_are_recorded(tmp_path):
    with Store.open(tmp_path / "r.duckdb") as s:
        run_id = s.add_run(Run(source="measured"))
        s.record_presets(run_id, load_presets())
        kinds = {r["kind"]: r["n"] for r in s.query("SELECT kind, count(*) AS n FROM presets GROUP BY kind")}
        assert kinds["model"] == 12 and kinds["gpu"] >= 11 and kinds["machine"] == 4  # the paper's 9, 3 own runs


def test_an_older_file_is_migrated(tmp_path):
    path = tmp_path / "v1.duckdb"
    con = duckdb.connect(str(path))
    con.execute(store_mod._SCHEMA_V1)
    con.execute("INSERT INTO meta VALUES ('schema_version', '1')")
    con.execute("INSERT INTO trials (trial_id, run_id, model, gpu, num_gpus, feasible, source, days) "
                "VALUES ('t', 'r', 'pythia-1b', 'h100', 1, true, 'measured', 50)")
    con.close()
    with pytest.raises(StoreError, match="cannot be migrated"):
        Store.open(path, read_only=True)
    with Store.open(path) as s:
        assert s.schema_version == SCHEMA_VERSION
        row = s.trials()[0]
        assert row["days"] == 50 and "kernel" in row and row["kernel"] is None


def test_a_newer_file_is_refused_clearly(tmp_path):
    path = tmp_path / "future.duckdb"
    Store.open(path).close()
    con = duckdb.connect(str(path))
    con.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    con.close()
    with pytest.raises(StoreError, match="newer tui-planner"):
        Store.open(path)


def test_a_foreign_duckdb_file_is_refused(tmp_path):
    path = tmp_path / "other.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE x (a INT)")
    con.close()
    with pytest.raises(StoreError, match="not a tui-planner database"):
        Store.open(path)


def test_a_file_that_is_not_a_database(tmp_path):
    path = tmp_path / "notes.duckdb"
    path.write_text("hello")
    with pytest.raises(StoreError, match="cannot open"):
        Store.open(path)


def test_the_shipped_database_opens_read_only():
    with Store.open(shipped_db()) as s:
        assert s.read_only
        with pytest.raises(StoreError, match="read-only"):
            s.add_trial(_trial())


def test_a_second_process_gets_a_clear_message_while_one_writes(tmp_path):
    path = tmp_path / "busy.duckdb"
    Store.open(path).close()
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time; sys.path.insert(0, sys.argv[2]); from engine.data.store import Store; "
         "s = Store.open(sys.argv[1]); print('ready', flush=True); time.sleep(30)", str(path), str(ROOT)],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        for opener in (lambda: Store.open(path), lambda: Store.open(path, read_only=True)):
            with pytest.raises(StoreError, match="another process is writing"):
                opener()
    finally:
        holder.kill()
        holder.wait()
    Store.open(path).close()  # free again once the writer is gone


def test_what_an_exhaustive_sweep_counts_as_done(tmp_path):
    """A pruned sweep's rows: measured in full (done either way), stopped early or dominated (done for a
    pruned sweep, measured again by an exhaustive one), a crash (never done)."""
    rows = {
        "full": dict(feasible=True, provenance='{"repetitions": 5}'),
        "early": dict(feasible=True, provenance='{"stopped_early": "timing stopped after 2 repetitions"}'),
        "dominated": dict(feasible=True, failure_kind="dominated"),
        "crash": dict(feasible=False, failure_kind="failed"),
    }
    with Store.open(tmp_path / "s.duckdb", read_only=False) as s:
        for key, kw in rows.items():
            s.add_trial(Trial(model="m", gpu="h100", num_gpus=1, source="measured", key=key, **kw))
        assert s.done_keys(rows, final_only=True) == {"full", "early", "dominated"}
        assert s.done_keys(rows, final_only=True, pruned_final=False) == {"full"}


def test_an_exhaustive_sweep_still_skips_what_cannot_fit(tmp_path):
    from engine.bench.events import TrialSpec
    from engine.data.space import FREE_LUNCH
    from engine.bench.sweep import _unrun_keys

    with Store.open(tmp_path / "s.duckdb", read_only=False) as s:
        for key, why in (("nofit", "skipped by the memory model: needs at least 90 GB at micro-batch 1"),
                         ("dom", "skipped by the memory model: dominated, free-lunch already runs micro-batch 16")):
            s.add_trial(Trial(model="m", gpu="h100", num_gpus=1, source="predicted", key=key, feasible=False,
                              failure_kind="memory", failure_message=why))
        specs = [TrialSpec(key=k, model="m", gpu="h100", num_gpus=1, methods=FREE_LUNCH) for k in ("nofit", "dom")]
        assert _unrun_keys(s, specs, "memory") == {"nofit", "dom"}
        assert _unrun_keys(s, specs, "memory", cannot_fit_only=True) == {"nofit"}


def test_a_provenance_read_for_reading_only_is_shared_and_cannot_be_changed():
    from engine.data.store import provenance_of, provenance_view

    text = '{"max_micro_batch_searched": 16, "versions": {"torch": "2.13"}}'
    view = provenance_view(text)
    assert dict(view) == provenance_of(text) and provenance_view(text) is view  # parsed once, shared
    with pytest.raises(TypeError):
        view["max_micro_batch_searched"] = 1  # type: ignore[index]
    assert dict(provenance_view("{not json")) == {} and dict(provenance_view("[1]")) == {}
    assert provenance_view({"a": 1}) == {"a": 1} and provenance_view(None) == {}
