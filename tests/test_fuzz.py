"""A few hundred malformed presets, configs and databases through the commands that read them: each ends
in output or one clear error (exit 2), never a traceback, and leaves no process behind. Seeded, so a
failure is the same case every run."""

import json
import os
import random
import shutil
from pathlib import Path

import duckdb
import pytest

from conftest import FIXTURES, ROOT
from engine.bench.launcher import descendants
from engine.data.jsonl import import_jsonl
from engine.data.store import Store
from tui_planner.cli import main

GOOD = FIXTURES / "presets_good"
MEASURED = ROOT / "data" / "measured" / "h100-x1-pythia-1b-causal-2026-11-23.jsonl"
ODD_VALUES = ['""', "-1", "0", "1e308", "nan", "inf", "[]", "[1, [2, [3]]]", "{a = 1}", "true", '"x[/]y"',
              '"\\u0000"', "1979-05-27", "99999999999999999999", '"' + "w" * 5000 + '"', "-0.0", "0.5"]
ODD_JSON = [None, -1, 0, 10**12, 1e308, "", "12", [], {}, True, 0.5, [1, 2], {"a": {"b": 1}}, -(10**18)]


SECRET = "fuzz-secret-of-the-reader-7d1e"


def _run(capsys, argv) -> None:
    """The command ends in its own way: 0, or 2 with one error line; never an exception (a traceback), and
    never a word of a file outside the database (SECRET, which schema mutations try to read)."""
    code = main(argv)
    out = capsys.readouterr()
    assert code in (0, 2), (argv, code, out.err[-500:])
    assert "Traceback" not in out.err and "Traceback" not in out.out
    assert SECRET not in out.out + out.err
    if code == 2:
        assert "error" in out.err, out.err[-500:]


def _mutations(text: str, rng: random.Random, n: int):
    lines = text.splitlines()
    for i in range(n):
        kind = i % 6
        ls = list(lines)
        j = rng.randrange(len(ls))
        if kind == 0:  # a value of another type or out of range
            if "=" in ls[j]:
                ls[j] = ls[j].split("=")[0] + "= " + rng.choice(ODD_VALUES)
        elif kind == 1:
            del ls[j]
        elif kind == 2:
            ls.insert(j, ls[rng.randrange(len(ls))])  # a duplicated key or table
        elif kind == 3:
            out = "\n".join(ls)
            yield out[: rng.randrange(len(out))]  # cut short
            continue
        elif kind == 4:
            out = bytearray("\n".join(ls).encode())
            for _ in range(3):
                out[rng.randrange(len(out))] = rng.randrange(256)
            yield out.decode("latin-1")
            continue
        else:  # a key nobody knows, or a table at the wrong level
            ls.insert(j, rng.choice(["bogus = 1", "[models]", "[gpus.x.y.z]", "[[cloud]]", "[models.m.training]"]))
        yield "\n".join(ls)


@pytest.fixture(scope="module")
def small_db(tmp_path_factory) -> Path:
    """One measured Pythia-1B search: enough basis for `predict` to size a GPT-NeoX model from a fuzzed
    config, and quick to build a predictor over (the shipped database's validation takes seconds)."""
    path = tmp_path_factory.mktemp("fuzz-small") / "small.duckdb"
    with Store.open(path, read_only=False) as s:
        import_jsonl(s, MEASURED)
    return path


def test_malformed_presets(tmp_path, capsys, small_db):
    rng = random.Random(24)
    text = (GOOD / "tiny_neox.toml").read_text()
    shutil.copy(GOOD / "tiny_neox_config.json", tmp_path / "tiny_neox_config.json")
    for i, mutated in enumerate(_mutations(text, rng, 120)):
        path = tmp_path / f"m{i}.toml"
        path.write_bytes(mutated.encode("utf-8", errors="surrogateescape") if isinstance(mutated, str) else mutated)
        _run(capsys, ["presets", "--presets", str(path)])
        _run(capsys, ["predict", "--db", str(small_db), "--presets", str(path), "--model", "tiny-neox", "--gpu", "h100"])
        path.unlink()
    assert not descendants(os.getpid())


def test_malformed_configs(tmp_path, capsys, small_db):
    rng = random.Random(21)
    base = json.loads((GOOD / "tiny_neox_config.json").read_text())
    shutil.copy(GOOD / "tiny_neox.toml", tmp_path / "tiny_neox.toml")
    keys = list(base) + ["num_key_value_heads", "head_dim", "n_layer", "torch_dtype"]
    for i in range(60):
        config = dict(base)
        for _ in range(1 + i % 3):
            config[rng.choice(keys)] = rng.choice(ODD_JSON)
        if i % 10 == 9:
            del config[rng.choice(list(config))]
        text = json.dumps(config) if i % 17 else json.dumps(config)[: rng.randrange(40)]
        (tmp_path / "tiny_neox_config.json").write_text(text)
        _run(capsys, ["presets", "--presets", str(tmp_path / "tiny_neox.toml")])
        _run(capsys, ["predict", "--db", str(small_db), "--presets", str(tmp_path / "tiny_neox.toml"),
                      "--model", "tiny-neox", "--gpu", "h100"])
    assert not descendants(os.getpid())


@pytest.fixture(scope="module")
def real_db(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("fuzz") / "real.duckdb"
    with Store.open(path, read_only=False) as s:
        import_jsonl(s, MEASURED)
    return path


def _databases(real: Path, folder: Path, rng: random.Random):
    data = real.read_bytes()
    for i in range(12):  # cut short, and bytes flipped
        yield "cut", data[: rng.randrange(len(data))]
        flipped = bytearray(data)
        for _ in range(50):
            flipped[rng.randrange(len(flipped))] = rng.randrange(256)
        yield "flipped", bytes(flipped)
    for i in range(6):
        yield "random", rng.randbytes(rng.choice([0, 1, 100, 4096, 300_000]))
    sql = [
        "CREATE TABLE meta (key VARCHAR, value VARCHAR)",
        "CREATE TABLE meta (key VARCHAR, value VARCHAR); INSERT INTO meta VALUES ('schema_version', 'three')",
        "CREATE TABLE meta (key VARCHAR, value VARCHAR); INSERT INTO meta VALUES ('schema_version', '999')",
        "CREATE TABLE meta (key VARCHAR, value VARCHAR); INSERT INTO meta VALUES ('schema_version', '3');"
        "CREATE TABLE trials (x INTEGER); CREATE TABLE runs (y INTEGER)",
        "CREATE TABLE t (a INTEGER)",
    ]
    for statement in sql:
        path = folder / "tmp.duckdb"
        path.unlink(missing_ok=True)
        con = duckdb.connect(str(path))
        con.execute(statement)
        con.close()
        yield "foreign", path.read_bytes()
    # Ours, with odd values in the rows: text where numbers belong is impossible (typed columns), so
    # NULLs, negatives, zero, huge and non-finite numbers.
    for column, value in [("days", None), ("days", -5.0), ("days", 0.0), ("days", 1e308), ("days", float("nan")),
                          ("num_gpus", 0), ("num_gpus", -3), ("micro_batch", 0), ("mfu", float("inf")),
                          ("model", "no-such-model"), ("gpu", "no-such-gpu"), ("provenance", "{not json"),
                          ("sharding", "zero9"), ("key", None), ("source", "paper-table1"), ("update_s", None),
                          ("pass_s", -1.0), ("grad_accum", 0)]:
        path = folder / "tmp.duckdb"
        shutil.copy(real, path)
        con = duckdb.connect(str(path))
        con.execute(f"UPDATE trials SET {column} = ?", [value])
        con.close()
        yield f"{column}={value!r}", path.read_bytes()


def _schema_mutations(real: Path, folder: Path, rng: random.Random):
    # Ours, with its schema changed as a file from elsewhere may be: views (one reading a local file), macros
    # shadowing built-ins, types, sequences, generated columns, columns of other types or missing, tables gone.
    secret = folder / "secret.txt"
    secret.write_text(SECRET)
    read = f"(SELECT content FROM read_text('{secret}'))"
    columns = [r[0] for r in duckdb.connect(str(real), read_only=True).execute(
        "SELECT column_name FROM duckdb_columns() WHERE table_name = 'trials'").fetchall()]
    schema_changes = [
        f"ALTER TABLE trials RENAME TO t0; CREATE VIEW trials AS SELECT t0.* REPLACE ({read} AS model) FROM t0",
        f"ALTER TABLE runs RENAME TO r0; CREATE VIEW runs AS SELECT r0.* REPLACE ({read} AS note) FROM r0",
        f"CREATE MACRO split_part(a, b, c) AS {read}", f"CREATE MACRO coalesce(a, b) AS {read}",
        f"CREATE MACRO leak() AS TABLE SELECT * FROM read_text('{secret}')",
        "CREATE VIEW endless AS SELECT count(*) FROM range(10000000000000)",
        "CREATE TYPE mood AS ENUM ('a')", "CREATE SEQUENCE s",
        "CREATE TABLE g (a VARCHAR, b VARCHAR GENERATED ALWAYS AS (a || 'x') VIRTUAL)",
        "CREATE TABLE c (a INTEGER CHECK (a > 0))",
        "DROP TABLE runs", "DROP TABLE meta", "DROP TABLE presets", "ALTER TABLE meta RENAME TO m0",
        "ALTER TABLE trials ALTER {col} TYPE VARCHAR", "ALTER TABLE trials DROP COLUMN {col}",
        "ALTER TABLE trials ALTER {col} TYPE STRUCT(a INTEGER) USING NULL", "ALTER TABLE trials ADD COLUMN zz INTEGER",
    ]
    for _ in range(14):
        path = folder / "tmp.duckdb"
        shutil.copy(real, path)
        con = duckdb.connect(str(path))
        picked = [c.format(col=rng.choice(columns)) for c in rng.sample(schema_changes, rng.choice([1, 1, 2]))]
        for statement in picked:
            try:
                con.execute(statement)
            except duckdb.Error:
                pass  # a change the first one made impossible (a column of a view): the file as it stands
        con.close()
        yield "schema: " + "; ".join(picked), path.read_bytes()


@pytest.mark.parametrize("made", [_databases, _schema_mutations], ids=["damaged", "schema"])
def test_malformed_databases(real_db, tmp_path, capsys, made):
    rng = random.Random(10)
    for i, (what, data) in enumerate(made(real_db, tmp_path, rng)):
        path = tmp_path / f"db{i}.duckdb"
        path.write_bytes(data)
        for argv in (["results", "--db", str(path)], ["results", "--db", str(path), "--format", "json"],
                     ["results", "--db", str(path), "--summary"], ["summary", "--db", str(path)],
                     ["db", "info", str(path)],
                     ["rank", "--db", str(path), "--model", "pythia-1b", "--budget", "50000"],
                     ["predict", "--db", str(path), "--model", "pythia-1b", "--gpu", "a100"],
                     ["export", "--db", str(path), "--model", "pythia-1b", "--gpu", "h100", "--num-gpus", "1",
                      "--out", str(tmp_path / "export")]):
            try:
                _run(capsys, argv)
            except AssertionError as e:
                raise AssertionError(f"{what}: {e}") from None
        path.unlink()
    assert not descendants(os.getpid())
