"""A results file from another lab is data, never code: SQL stored in it never runs, its numbers are recomputed
from its own timings and shape, and a file of the wrong shape is refused with the object or column named."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import duckdb
import pytest

from conftest import ROOT
from engine.data.errors import StoreError
from engine.data.jsonl import import_jsonl
from engine.data.store import Store, _bounded
from tui_planner.cli import main

MEASURED = ROOT / "data" / "measured" / "h200-pythia-roberta-guided-2026-11-24.jsonl"
SECRET = "s3cret-token-of-the-user-9f2c"


@pytest.fixture(scope="module")
def good_db(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("shared") / "good.duckdb"
    with Store.open(path, read_only=False) as s:
        import_jsonl(s, MEASURED)
    return path


def _altered(good: Path, folder: Path, sql: str, name: str = "altered.duckdb") -> Path:
    path = folder / name
    shutil.copy(good, path)
    con = duckdb.connect(str(path))  # the attacker's own DuckDB, defaults and all
    con.execute(sql.replace("SECRET_FILE", str(folder / "secret.txt")))
    con.close()
    return path


READS = (["results", "--db", "{db}"], ["results", "--db", "{db}", "--format", "json"],
         ["results", "--db", "{db}", "--summary"], ["rank", "--db", "{db}", "--model", "pythia-1b", "--budget", "90000"],
         ["export", "--db", "{db}", "--model", "pythia-1b", "--gpu", "h200", "--num-gpus", "1", "--out", "{out}"])

STORED_SQL = {
    "view": ("ALTER TABLE trials RENAME TO t0; CREATE VIEW trials AS SELECT t0.* REPLACE "
             "((SELECT content FROM read_text('SECRET_FILE')) AS model) FROM t0", "view 'trials'"),
    "macro": ("CREATE MACRO split_part(a, b, c) AS (SELECT content FROM read_text('SECRET_FILE'))", "macro 'split_part'"),
    "endless view": ("CREATE VIEW slow AS SELECT count(*) FROM range(10000000000000)", "view 'slow'"),
    "generated column": ("CREATE TABLE extra (a VARCHAR, b VARCHAR GENERATED ALWAYS AS (a || 'x') VIRTUAL)",
                         "generated column extra.b"),
    "table macro": ("CREATE MACRO everything() AS TABLE SELECT * FROM read_text('SECRET_FILE')",
                    "table macro 'everything'"),
    "type": ("CREATE TYPE mood AS ENUM ('a', 'b')", "type 'mood'"),
}


@pytest.mark.parametrize("kind", list(STORED_SQL))
def test_a_file_that_stores_sql_is_refused_and_reads_nothing(good_db, tmp_path, capsys, kind):
    (tmp_path / "secret.txt").write_text(SECRET)
    sql, named = STORED_SQL[kind]
    db = _altered(good_db, tmp_path, sql)
    for argv in READS:
        code = main([w.format(db=db, out=tmp_path / "export") for w in argv])
        out = capsys.readouterr()
        assert code == 2, (kind, argv, out.out[-300:])
        assert "refused: the file stores SQL" in out.err and named in out.err, out.err
        assert SECRET not in out.out + out.err
    assert not (tmp_path / "export").exists()


def test_every_connection_has_external_access_and_extensions_off(good_db, tmp_path):
    for store in (Store.open(None), Store.open(good_db, read_only=False), Store.open(ROOT / "db" / "tui-planner.duckdb")):
        with store:
            (tmp_path / "secret.txt").write_text(SECRET)
            with pytest.raises(duckdb.Error, match="disabled"):
                store.con.execute(f"SELECT * FROM read_text('{tmp_path / 'secret.txt'}')").fetchall()
            with pytest.raises(duckdb.Error):
                store.con.execute("SET enable_external_access = true")
            got = dict(store.con.execute("SELECT name, value FROM duckdb_settings() WHERE name IN "
                                         "('autoload_known_extensions', 'autoinstall_known_extensions')").fetchall())
            assert set(got.values()) == {"false"}


def test_a_poisoned_row_is_recomputed_and_refused(good_db, tmp_path, capsys):
    # 8 x H100 in half a day "at 45% MFU": Pythia-1B's run at that speed is ~500% of the peak.
    db = _altered(good_db, tmp_path, """
        INSERT INTO trials (trial_id, run_id, key, model, gpu, num_gpus, num_nodes, feasible, source, free_lunch,
                            sharding, micro_batch, grad_accum, pass_s, update_s, step_s, days, mfu, plausibility,
                            training_run, steps, created_at)
        SELECT 'poison', run_id, 'pythia-1b|h100|8|1|free-lunch|cuda', 'pythia-1b', 'h100', 8, 1, true, 'measured',
               true, 'none', 16, 8, 0.03, 0.062, 0.302, 0.5, 0.45, 'ok', '1024x2049 bf16 adamw', 143000, now()
        FROM runs LIMIT 1""")
    with Store.open(db, read_only=True) as s:
        [row] = s.query("SELECT * FROM trials WHERE trial_id = 'poison'")
    assert row["feasible"] is False and row["failure_kind"] == "refused" and row["days"] is None
    assert "physically impossible" in row["failure_message"]
    assert main(["rank", "--db", str(db), "--model", "pythia-1b", "--budget", "400000", "--format", "json"]) == 0
    out = capsys.readouterr().out
    assert "poison" not in out
    # a row whose days disagree with its own step is given the step's days, and says so
    db2 = _altered(good_db, tmp_path, "UPDATE trials SET days = days / 10, mfu = mfu WHERE source = 'measured' "
                                      "AND feasible AND days IS NOT NULL", "days.duckdb")
    with Store.open(good_db, read_only=True) as a, Store.open(db2, read_only=True) as b:
        want = {r["trial_id"]: r["days"] for r in a.query("SELECT trial_id, days FROM trials WHERE days IS NOT NULL")}
        got = {r["trial_id"]: (r["days"], r["provenance"]) for r in b.query(
            "SELECT trial_id, days, provenance FROM trials WHERE days IS NOT NULL")}
    assert want and all(got[k][0] == pytest.approx(v, rel=1e-9) for k, v in want.items())
    assert all("recomputed_on_reading" in got[k][1] for k in want)
    # plausibility is judged against today's line on reading, never taken from the file: a file that calls its
    # rows implausible (or would call a row above the line ok) does not decide it
    db3 = _altered(good_db, tmp_path, "UPDATE trials SET plausibility = 'implausible' WHERE source = 'measured' "
                                      "AND feasible AND days IS NOT NULL", "plaus.duckdb")
    with Store.open(db3, read_only=True) as b:
        judged = {r["plausibility"] for r in b.query("SELECT plausibility FROM trials WHERE source = 'measured' "
                                                     "AND feasible AND days IS NOT NULL")}
    assert judged == {"ok"}


def test_the_shipped_rows_recompute_to_themselves():
    """The recomputation is the engine's own: every row of the shipped database comes out as it was stored."""
    from engine.data import trust
    from engine.data.presets import load_presets

    with Store.open(ROOT / "db" / "tui-planner.duckdb") as s:
        rows = s.query("SELECT * FROM trials")
        models = trust.stored_models([(r["run_id"], r["id"], r["content"]) for r in s.query(
            "SELECT run_id, id, content FROM presets WHERE kind = 'model'")])
    presets = load_presets()
    for r in rows:
        q = trust.recheck(r, presets, models)
        for k in ("days", "mfu", "feasible", "failure_kind", "plausibility", "days_low", "days_high"):
            if isinstance(r[k], float):
                assert q[k] == pytest.approx(r[k], rel=0.011), (r["trial_id"], k)
            else:
                assert q[k] == r[k], (r["trial_id"], k)


@pytest.mark.parametrize("sql, named", [
    ("ALTER TABLE trials ALTER days TYPE VARCHAR", "column trials.days is VARCHAR, not DOUBLE"),
    ("ALTER TABLE trials DROP COLUMN mfu", "column trials.mfu is missing"),
    ("ALTER TABLE runs ALTER note TYPE INTEGER USING 1", "column runs.note is INTEGER, not VARCHAR"),
    ("DROP TABLE trials", "no trials table"),
])
def test_a_column_of_another_type_is_named(good_db, tmp_path, capsys, sql, named):
    db = _altered(good_db, tmp_path, sql)
    for argv in READS[:4]:
        assert main([w.format(db=db, out=tmp_path / "x") for w in argv]) == 2
        assert named in capsys.readouterr().err
    with pytest.raises(StoreError, match=named.split(" is")[0]):
        Store.open(db, read_only=False)


def test_a_pipe_or_an_odd_schema_version_is_refused(good_db, tmp_path, capsys):
    fifo = tmp_path / "pipe.duckdb"
    os.mkfifo(fifo)
    assert main(["results", "--db", str(fifo)]) == 2  # at once: nothing opens the pipe
    assert "not a regular file" in capsys.readouterr().err
    for version in ("0", "-1"):
        db = _altered(good_db, tmp_path, f"UPDATE meta SET value = '{version}' WHERE key = 'schema_version'")
        assert main(["db", "migrate", str(db)]) == 2
        err = capsys.readouterr().err
        assert f"schema version {version} is not one tui-planner ever wrote" in err and "Traceback" not in err


def test_a_read_is_bounded():
    con = duckdb.connect(":memory:")
    with pytest.raises(StoreError, match="took longer than 0.2 s"):
        with _bounded(con, Path("their.duckdb"), limit_s=0.2):
            con.execute("SELECT count(*) FROM range(10000000000000)").fetchall()


def test_a_file_that_cannot_grow_says_so_and_keeps_its_rows(tmp_path):
    """A full disk or a size limit (here RLIMIT_FSIZE, in a process of its own): the write that did not happen
    says why in words, and every row written before it is still in the file."""
    import subprocess
    import sys

    code = (
        "import resource, signal, sys; sys.path.insert(0, sys.argv[1])\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "from engine.data.store import Store, Trial, Run\n"
        "from engine.data.errors import StoreError\n"
        "s = Store.open(sys.argv[2], read_only=False); r = Run(source='measured'); s.add_run(r)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (3_000_000, 3_000_000))\n"
        "n = 0\n"
        "try:\n"
        "    while n < 100000:\n"
        "        s.add_trials([Trial(model='m', gpu='g', num_gpus=1, feasible=True, source='measured', "
        "run_id=r.run_id, provenance='x' * 2000) for _ in range(50)]); n += 50\n"
        "except StoreError as e:\n"
        "    print(n); print(e)\n")
    db = tmp_path / "grow.duckdb"
    out = subprocess.run([sys.executable, "-c", code, str(ROOT), str(db)], capture_output=True, text=True, timeout=120)
    assert "Traceback" not in out.stderr, out.stderr[-1000:]
    written, message = out.stdout.splitlines()[:2]
    assert "this write did not happen; every row written before it is in the file" in message
    with Store.open(db, read_only=True) as s:
        assert s.query("SELECT count(*) AS n FROM trials")[0]["n"] == int(written) > 0


def test_ctrl_c_in_a_query_is_a_clean_stop_and_the_app_refuses_such_a_file(good_db, tmp_path):
    import threading

    from engine.data.presets import load_presets
    from tui_planner.app.app import PlannerApp

    with Store.open(None) as s:  # a query that only an interrupt ends: Ctrl-C reaches it as KeyboardInterrupt
        threading.Timer(0.3, s.con.interrupt).start()
        with pytest.raises(KeyboardInterrupt):
            s.query("SELECT count(*) FROM range(10000000000000)")
    db = _altered(good_db, tmp_path, STORED_SQL["view"][0])
    with pytest.raises(StoreError, match="refused: the file stores SQL"):
        PlannerApp(load_presets(), db, remember=False)
