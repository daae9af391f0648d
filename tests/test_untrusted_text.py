"""Text from outside is data: a results file or a preset whose text holds rich markup (`cpu[/]`,
`[link=...]`, `[blink]`), an escape sequence or a newline is shown as those characters by every command and
every screen, never read as markup (a crash, a vanished bracket) and never sent to the terminal raw.

The database is a real DuckDB file written through the store; the presets a real TOML folder; the commands
run through tui_planner.cli.main or a subprocess; the app is driven by Textual's Pilot.
"""

from __future__ import annotations

import asyncio
import csv
import io
import json
import os
from pathlib import Path

import pytest
from rich.console import Console
from textual.widgets import DataTable, Static

from engine.data.presets import load_presets
from engine.data.store import Run, Store, Trial
from tui_planner.cli import main

MODEL = "evil-model"  # preset ids are letters, digits and . _ + - (the loader refuses others, see below)
CPU = "cpu[/]"  # a closing tag with nothing to close: rich raises MarkupError on it
LINK = "[link=https://x]y[/link]"  # would turn into a hyperlink
BLINK = "[blink]z"  # would turn into blinking text
ESC = "a\x1b[31mred"  # an escape sequence: would turn the terminal red
NEWLINE = "l1\nl2"
SHOWN_ESC = "a\\x1b[31mred"  # how an escape character is shown: written out, never sent
MARKUP = (CPU, LINK, BLINK)
SIZE = (100, 30)

PRESETS = """
[models.evil-model]
name = "[blink]Evil[/blink] [link=https://x]y[/link]"
params_label = "cpu[/]"
hf_class = "GPTNeoXForCausalLM"
config_class = "GPTNeoXConfig"
objective = "causal-lm"
seq_len = 64
vocab_size = 512
params = 1.2e5
fsdp_wrap = "GPTNeoXLayer"
note = "[/]"
[models.evil-model.config]
hidden_size = 32
num_hidden_layers = 2
num_attention_heads = 4
intermediate_size = 128
vocab_size = 512
max_position_embeddings = 128
rotary_pct = 0.25
use_parallel_residual = true
tie_word_embeddings = false
[models.evil-model.training]
batch_size = 16
steps = 1000
precision = "bf16"
optimizer = "adam"
lr = 1e-3
betas = [0.9, 0.95]
weight_decay = 0.0
max_grad_norm = 1.0
schedule = "constant"
warmup_steps = 0

[machines.12]
num_gpus = 12
kind = "[link=https://x]y[/link]"
cost_usd = 1000
source = "cpu[/]"

[systems.evilbox]
name = "cpu[/] box"
short = "[/]"
kind = "hgx"
gpu_counts = [4]
gpu_form_factors = ["sxm"]
gpu_models = ["h100"]
max_gpu_tdp_w = 700
gpu_power_budget_w = 2800
base_power_w = 1000
circuits = "[link=https://x]y[/link]"
[systems.evilbox.price]
usd = 1000
date = 2024-01-01
source = "a\\u001b[31mred [blink]z"

[[cloud]]
gpu = "h100"
provider = "[blink]z"
usd_per_gpu_hour = 2.5
date = 2024-01-01
source = "[/]"
"""


def _trials(run_id: str) -> list[Trial]:
    """Rows of one measured search (evil-model on 1 x H100) and rows of models and GPUs no preset has;
    every text column holds markup or control text somewhere."""
    key = f"{MODEL}|h100|1|1|{{}}|cuda"
    prov = json.dumps({"note": "[/] [blink]z", "x": ESC, "causal_mask": "[b]"})
    common = dict(run_id=run_id, attention=LINK, kernel=ESC, config_source=LINK, provenance=prov, basis=BLINK,
                  compile=False, tf32=True)
    cell = dict(model=MODEL, gpu="h100", num_gpus=1, **common)
    return [
        Trial(trial_id="winner[/]1", feasible=True, source="measured", key=key.format("free-lunch"), free_lunch=True,
              sharding="none", activation_checkpointing=False, offloading=False, micro_batch=4, grad_accum=4,
              days=10.0, mfu=0.3, plausibility="ok", pass_s=1.0, update_s=0.1, step_s=4.1, **cell),
        Trial(feasible=True, source="measured", key=key.format("naive"), free_lunch=False, sharding="none",
              activation_checkpointing=False, offloading=False, micro_batch=2, grad_accum=8, days=20.0, mfu=0.2,
              plausibility="[/]", **cell),
        Trial(feasible=False, source="measured", key=key.format(BLINK), free_lunch=True, sharding="zero3",
              activation_checkpointing=True, offloading=False, failure_kind=CPU,
              failure_message=f"{LINK}\n{ESC}{NEWLINE}", **cell),
        Trial(feasible=True, source="paper-table1", free_lunch=True, sharding="none", days=30.0, mfu=0.7,
              plausibility="implausible", key=key.format("paper"), **cell),
        Trial(feasible=True, source=BLINK, model=LINK, gpu=CPU, num_gpus=1, days=5.0, mfu=0.1, sharding=BLINK,
              key=CPU, failure_kind=None, **common),
        Trial(feasible=True, source="measured", model=ESC, gpu=NEWLINE, num_gpus=1, days=6.0, mfu=0.1,
              key="[/]|[/]|1|1|[/]|[/]", **common),
    ]


@pytest.fixture(scope="module")
def evil(tmp_path_factory) -> dict[str, Path]:
    """A results file in a folder whose name holds markup, and a presets folder, both full of markup."""
    root = tmp_path_factory.mktemp("evil")
    (root / "presets").mkdir()
    (root / "presets" / "evil.toml").write_text(PRESETS)
    folder = root / "d[/]b"  # two folders, "d[" and "]b": the path reads d[/]b
    folder.mkdir(parents=True)
    db = folder / "evil.duckdb"
    with Store.open(db, read_only=False) as store:
        run = Run(source="measured", host=ESC, device_kind=LINK, gpu_name=CPU, driver=BLINK, cuda="[/]",
                  versions=LINK, topology=NEWLINE, command=f"$(touch pwned) {CPU}", status="done", note=BLINK)
        store.add_run(run)
        store.add_trials(_trials(run.run_id))
    # For rank: a 4-GPU result (an HGX server: the 1-GPU cell is not sold as a system) whose sharding is not
    # one the engine knows (`predict` fails on such a row, an engine matter, so it sits in a file of its own).
    ranked = folder / "ranked.duckdb"
    with Store.open(ranked, read_only=False) as store:
        store.add_run(run)
        store.add_trials(_trials(run.run_id) + [
            Trial(feasible=True, source="measured", model=MODEL, gpu="h100", num_gpus=4, free_lunch=True,
                  sharding=BLINK, activation_checkpointing=False, offloading=False, micro_batch=4, grad_accum=2,
                  days=3.0, mfu=0.3, plausibility="ok", key=f"{MODEL}|h100|4|1|free-lunch|cuda", run_id=run.run_id)])
    return {"db": db, "ranked": ranked, "presets": root / "presets"}


@pytest.fixture(autouse=True)
def _wide(monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")  # rich crops a no-wrap column to the terminal: keep every cell whole


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def assert_shown(text: str, *needles: str) -> None:
    for needle in needles:
        assert needle in text, f"{needle!r} is not shown verbatim in:\n{text}"
    assert "\x1b" not in text, "an escape character reached the terminal"


# --- the commands -----------------------------------------------------------------------------------


def test_results_table_shows_markup_and_control_text_verbatim(evil, capsys):
    code, out, err = run_cli(capsys, "results", "--db", str(evil["db"]), "--presets", str(evil["presets"]))
    assert code == 0, err
    assert_shown(out, MODEL, CPU, LINK, BLINK, SHOWN_ESC, "l1\\nl2", "6 trials")


@pytest.mark.parametrize("form", ["json", "csv"])
def test_results_json_keeps_the_text_and_csv_writes_control_characters_out(evil, capsys, form):
    code, out, err = run_cli(capsys, "results", "--db", str(evil["db"]), "--format", form)
    assert code == 0, err
    rows = json.loads(out) if form == "json" else list(csv.DictReader(io.StringIO(out)))
    # JSON keeps the bytes (it escapes control characters itself); CSV writes each control character out
    # (ESC as \x1b, a newline as \n): it may land on a terminal (tests/test_hostile_inputs.py)
    esc, newline = (ESC, NEWLINE) if form == "json" else (SHOWN_ESC, "l1\\nl2")
    assert {r["model"] for r in rows} == {MODEL, LINK, esc}  # data formats keep the markup
    assert {r["gpu"] for r in rows} == {"h100", CPU, newline}
    # the rows of a model and GPU no preset has claim days nothing can recompute: refused on reading
    assert {r["failure_kind"] for r in rows if r["failure_kind"]} == {CPU, "refused"}
    brk = "\n" if form == "json" else "\\n"
    assert f"{LINK}{brk}{esc}{newline}" in {r["failure_message"] for r in rows}


def test_results_summary_shows_a_search_whose_labels_hold_markup(evil, capsys):
    code, out, err = run_cli(capsys, "results", "--summary", "--db", str(evil["db"]), "--presets",
                             str(evil["presets"]))
    assert code == 0, err
    assert_shown(out, f"{MODEL} on 1 x h100", "winner", "free-lunch", f"not timed: {BLINK} ({CPU})")
    code, out, err = run_cli(capsys, "results", "--summary", "--format", "json", "--db", str(evil["db"]),
                             "--presets", str(evil["presets"]))
    assert code == 0, err
    assert BLINK in [e["label"] for c in json.loads(out) for e in c["not_timed"]]


def test_summary_and_db_info_show_sources_models_and_the_file_name(evil, capsys):
    code, out, err = run_cli(capsys, "summary", "--db", str(evil["db"]))
    assert code == 0, err
    # (the row whose model and GPU hold ESC and a newline is refused on reading: no preset can recompute its
    # days, so the summary's best rows leave it out; `results` shows its text, test_results_table_...)
    assert_shown(out, "d[/]b", BLINK)
    code, out, err = run_cli(capsys, "db", "info", str(evil["db"]))
    assert code == 0, err
    assert_shown(out, "d[/]b", BLINK)


def test_presets_show_names_labels_and_sources_with_markup(evil, capsys):
    code, out, err = run_cli(capsys, "presets", "--presets", str(evil["presets"]))
    assert code == 0, err
    assert_shown(out, MODEL, CPU, LINK, BLINK)
    code, out, err = run_cli(capsys, "presets", "--format", "json", "--presets", str(evil["presets"]))
    assert code == 0, err
    data = json.loads(out)
    assert data["models"][MODEL]["name"] == "[blink]Evil[/blink] [link=https://x]y[/link]"


def test_a_preset_id_with_markup_is_refused_with_a_clear_error(tmp_path, capsys):
    (tmp_path / "bad.toml").write_text(PRESETS.replace("models.evil-model", 'models."evil[/]x"'))
    for argv in (["presets"], ["results", "--summary"], ["rank", "--model", "evil[/]x", "--budget", "1000"]):
        code, out, err = run_cli(capsys, *argv, "--presets", str(tmp_path))
        assert code == 2, (argv, out, err)
        assert "models.evil[/]x" in err and "an id of letters" in err and "Traceback" not in err


def test_rank_and_predict_show_the_model_and_its_rows(evil, capsys):
    code, out, err = run_cli(capsys, "rank", "--model", MODEL, "--budget", "200000", "--db", str(evil["ranked"]),
                             "--presets", str(evil["presets"]))
    assert code == 0, err
    assert_shown(out, f"{MODEL}: budget $200,000", "1 x h100", "4x h100", f"free-lunch, {BLINK}, micro-batch 4 x 2",
                 "in a cpu[/] box", f"evilbox (cpu[/] box) $1,000, 2024-01-01: {SHOWN_ESC} {BLINK}", " [/] ")
    code, out, err = run_cli(capsys, "predict", "--model", MODEL, "--gpu", "h100", "--db", str(evil["db"]),
                             "--presets", str(evil["presets"]))
    assert code == 0, err
    assert_shown(out, f"{MODEL} on 1 x h100", "This cell is measured")


def test_an_error_naming_a_file_shows_its_name_verbatim(tmp_path, capsys):
    missing = tmp_path / "no[/]such\x1b[31m.duckdb"
    code, out, err = run_cli(capsys, "results", "--db", str(missing))
    assert code == 2
    assert_shown(err, "tui-planner: error:", "no[/]such\\x1b[31m.duckdb", "no such database file")


# --- the app ----------------------------------------------------------------------------------------


def make_app(evil: dict[str, Path], db: str = "ranked"):
    from tui_planner.app.app import PlannerApp

    paths = (str(evil["presets"]),)
    return PlannerApp(load_presets(include_user=False, extra=paths), evil[db], model=MODEL, preset_paths=paths)


async def settle(pilot, until, tries: int = 100) -> None:
    """Wait until a worker has filled what `until` checks."""
    for _ in range(tries):
        await pilot.pause(0.05)
        if until():
            return
    raise AssertionError(f"the screen never filled: {pilot.app.screen}")


def shown(widget) -> str:
    """What a Static shows, as plain text (a rich renderable is printed the way the app draws it)."""
    visual = widget.render()
    if hasattr(visual, "plain"):
        return visual.plain
    with open(os.devnull, "w") as sink:
        console = Console(width=200, record=True, file=sink)
        console.print(widget.content)
        return console.export_text()


def cells(table: DataTable, column: int) -> list[str]:
    return [str(table.get_cell_at((i, column))) for i in range(table.row_count)]


def test_plan_and_chart_show_the_database_text_as_text(evil):
    async def go():
        app = make_app(evil)
        async with app.run_test(size=SIZE) as pilot:
            screen = app.screen
            await settle(pilot, lambda: app.ranking is not None and screen.query_one("#ranking", DataTable).row_count)
            assert MODEL in shown(screen.query_one("#title", Static))
            await pilot.press(*"]" * 10)  # budget $150k: an HGX server of four H100s fits, and wins on a row
            await settle(pilot, lambda: app.ranking.state.budget_usd == 150_000)  # with an unknown sharding
            verdict = shown(screen.query_one("#verdict", Static))
            assert "Buy 4 x H100 in a cpu[/] box" in verdict and f"free-lunch, {BLINK}, micro-batch 4 x 2" in verdict
            option = shown(screen.query_one("#option", Static))  # its prices, stale, sources verbatim
            assert "cpu[/] box" in option and "+ evilbox $1,000 (2024-01-01, stale)" in option
            assert SHOWN_ESC[:5] in option and "\x1b" not in option
            # what a person types is text too: a bracket in the budget box is an error message, not markup
            await pilot.press("e", *"[/]")  # e: edit the budget (its text selected)
            await pilot.pause(0.2)
            assert "budget: '[/]' is not an amount" in shown(screen.query_one("#field-note", Static))  # beside it
            await pilot.press("escape")
            table = screen.query_one("#ranking", DataTable)
            assert "4x h100" in cells(table, 1)[0]
            # the winner's details: its sharding verbatim; the export cannot read that row, and says so
            table.focus()
            await pilot.press("enter")
            await settle(pilot, lambda: type(app.screen).__name__ == "TrialDetail"
                         and "loading…" != shown(app.screen.query_one("#detail-body", Static)))
            assert f"sharding                   {BLINK}" in shown(app.screen.query_one("#detail-body", Static))
            await settle(pilot, lambda: "Training settings" in shown(app.screen.query_one("#detail-recipe", Static)))
            assert BLINK in shown(app.screen.query_one("#detail-recipe", Static))
            await pilot.press("escape")
            await pilot.press("2", "right")
            await pilot.pause(0.3)
            chart = app.screen
            assert MODEL in shown(chart.query_one("#chart-title", Static))
            assert "x h100" in shown(chart.query_one("#chart-info", Static))

    asyncio.run(go())


def test_results_screen_its_details_and_findings_show_every_text_verbatim(evil):
    async def go():
        app = make_app(evil)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press("4")
            screen = app.screen
            table = screen.query_one("#results", DataTable)
            await settle(pilot, lambda: table.row_count == 7)
            models, gpus = cells(table, 0), cells(table, 1)
            assert {LINK, SHOWN_ESC, MODEL} == set(models)
            assert {CPU, "l1\\nl2", "h100"} == set(gpus)
            assert CPU in cells(table, 5)  # the failed trial's outcome is its failure kind
            assert BLINK in cells(table, 7)  # an unknown source, shown as it is
            assert f"FL {BLINK}" in cells(table, 3)  # a sharding the engine does not know, as it is
            assert "d[/]b" in shown(screen.query_one("#results-status", Static))
            # the failed trial: its failure message, provenance and kernel, as they are in the file
            row = models.index(MODEL, [i for i, g in enumerate(cells(table, 5)) if g == CPU][0])
            table.move_cursor(row=row)
            await pilot.press("enter")
            await settle(pilot, lambda: type(app.screen).__name__ == "TrialDetail"
                         and "loading…" != shown(app.screen.query_one("#detail-body", Static)))
            body = shown(app.screen.query_one("#detail-body", Static))
            for needle in (LINK, SHOWN_ESC, "l1", "[/] [blink]z", CPU):
                assert needle in body, (needle, body)
            assert "\x1b" not in body
            await pilot.press("escape")
            # w: what that search found, with the label and failure kind that hold markup
            await pilot.press("w")
            await settle(pilot, lambda: type(app.screen).__name__ == "CellFindings"
                         and "loading…" != shown(app.screen.query_one("#findings-body", Static)))
            found = shown(app.screen.query_one("#findings-body", Static))
            assert f"{MODEL} on 1 x h100" in found and f"not timed: {BLINK} ({CPU})" in found, found
            await pilot.press("escape")
            # a row of a model and GPU no preset has: no search to show, and its names verbatim
            table.move_cursor(row=models.index(LINK))
            await pilot.press("w")
            await settle(pilot, lambda: type(app.screen).__name__ == "CellFindings"
                         and "loading…" != shown(app.screen.query_one("#findings-body", Static)))
            assert f"{LINK} on 1 x {CPU}" in shown(app.screen.query_one("#findings-body", Static))

    asyncio.run(go())


def test_help_shows_the_bracket_keys_and_the_benchmark_hint_keeps_its_extra(evil, tmp_path, monkeypatch):
    # As on a machine without the bench extra: the GPU probe's `import torch` fails.
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'torch'\")\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))

    async def go():
        app = make_app(evil)
        async with app.run_test(size=SIZE, notifications=True) as pilot:
            await pilot.press("question_mark")
            help_text = shown(app.screen.query_one(Static))
            assert "  [          budget -$10k" in help_text and "[/]" not in help_text
            await pilot.press("escape", "3")
            screen = app.screen
            await settle(pilot, lambda: screen.machine is not None, tries=400)
            hint = shown(screen.query_one("#machine", Static))
            assert "pip install '.[bench]'" in hint and "browse results offline" in hint, hint
            await pilot.press("r")  # cannot benchmark here: says why, the same words
            await settle(pilot, lambda: len(app.screen.query("Toast")))
            toasts = [str(t.render()) for t in app.screen.query("Toast")]
            assert any("pip install '.[bench]'" in t for t in toasts), toasts


    asyncio.run(go())
