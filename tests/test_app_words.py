"""Words, details, widths and the chart (issue 26, items 5, 6, 7 and 10), driven as a person would: the
glossary behind ? then g and the legends under tables; a trial's details read top-down (and x on a row that
cannot be exported says why before asking anything); columns that share the width they get; a chart that
labels its points, names only the lines it draws, and opens a point on enter. The database is test_app's
fixed one (the paper's tables, one measured H100 file, fixed predicted Pythia-1B rows)."""

from __future__ import annotations

import asyncio
import re

import pytest
from textual.widgets import Collapsible, DataTable, Select, Static

from test_app import SIZE, db, here, make_app, ranked  # noqa: F401 - fixtures and helpers shared with test_app
from tui_planner import glossary
from tui_planner.app import chart
from tui_planner.app.screens.dialogs import GlossaryScreen, HelpScreen, OptionDetail, TrialDetail, option_detail

WIDE = (120, 40)


def shown(widget: Static) -> str:
    return str(widget.render())


async def settle(pilot, until, tries: int = 100) -> None:
    for _ in range(tries):
        await pilot.pause(0.05)
        if until():
            return
    raise AssertionError(f"never settled on {pilot.app.screen}")


async def detail_loaded(pilot, app) -> str:
    await settle(pilot, lambda: isinstance(app.screen, (TrialDetail, OptionDetail))
                 and shown(app.screen.query_one("#detail-body", Static)) != "loading…")
    return shown(app.screen.query_one("#detail-body", Static))


# --- item 5: words for the words -----------------------------------------------------------------------


PRINTED = ("FL", "naive", "ckpt", "ckpt?", "shard?", "zero1", "zero2", "zero3", "fsdp2", "fsdp3", "offload",
           "MFU", "band", "T1", "T4", "meas", "pred", "$/run", "vs FL", "8x32", "°", "in", "!", "!!", "d", "?",
           "$", "infeasible", "oom", "memory", "dominated", "refused", "superseded", "†", "Pareto", "u", "^")


@pytest.mark.parametrize("term", PRINTED)
def test_every_abbreviation_the_screens_print_has_a_glossary_entry_with_why_it_matters(term):
    entry = glossary.find(term)
    assert entry.means and entry.why and entry.means != entry.why


def test_help_opens_the_glossary_by_g_and_it_explains_the_terms_in_words(db):
    async def go():
        app = make_app(db)
        async with app.run_test(size=SIZE) as pilot:
            await ranked(pilot, app)
            await pilot.press("question_mark")
            assert isinstance(app.screen, HelpScreen)
            assert "g  the glossary" in shown(app.screen.query_one(Static)).replace(" g ", "g ")
            await pilot.press("g")
            assert isinstance(app.screen, GlossaryScreen)
            text = shown(app.screen.query_one("#glossary", Static))
            for needle in ("FL free-lunch settings", "ckpt activation checkpointing", "ZeRO stages 1-3",
                           "FSDP", "offload CPU offloading", "MFU model FLOPs utilisation", "band a prediction's",
                           "T1, T4 the paper's Table 1 and Table 4", "Pareto", "$/run cost per experiment",
                           "vs FL time against free-lunch", "why it matters:"):
                assert needle in text, needle
            await pilot.press("escape", "escape")
            assert not isinstance(app.screen, (HelpScreen, GlossaryScreen))

    asyncio.run(go())


def test_the_command_palette_opens_the_glossary(db):
    async def go():
        app = make_app(db)
        async with app.run_test(size=SIZE) as pilot:
            await ranked(pilot, app)
            await pilot.press("ctrl+p")
            await pilot.pause(0.2)
            await pilot.press(*"Glossary", "enter")
            await settle(pilot, lambda: isinstance(app.screen, GlossaryScreen))
            assert "why it matters:" in shown(app.screen.query_one("#glossary", Static))

    asyncio.run(go())


def test_rank_legend_explains_every_abbreviation_it_prints_and_cuts_nothing_at_80_columns(db, capsys, monkeypatch):
    from tui_planner import cli

    monkeypatch.setenv("COLUMNS", "80")
    assert cli.main(["rank", "--db", str(db), "--model", "pythia-1b", "--budget", "50000", "--deadline", "60"]) == 0
    out = capsys.readouterr().out
    assert "…" not in out.split("Buy")[0].split("marks:")[0], "a table cell is cut"  # the paper column folds
    legend = " ".join(out[out.index("marks:"):].split())  # as read, whatever the line breaks
    table = out[:out.index("marks:")]
    rows = [m for line in table.splitlines() if (m := re.match(r"^ ([*][$?d]*|[ ][$?d]+|  )\s+\d+x \S+\s+(\S+)", line))]
    assert len(rows) > 10
    for m in rows:
        for mark in m.group(1).strip():
            assert f"{mark} " in legend, mark
        assert m.group(2) in legend, m.group(2)  # the system: ws2, 2U, HGX
    for word in ("ws2/ws4", "2U/4U", "HGX", "band:", "MFU:", "! above", "!! above 100%", "$/run:", "from:",
                 "pred predicted", "micro-batch A x B", "free-lunch =",
                 "^ a prediction capped at that line (60%^: capped at 60% (this generation's line); its band is centred on it"):
        assert word in legend, word
    # issue 41, item 6: a predicted MFU held at its generation's line is marked where it is printed
    mfu = {m.group(1): next(w for w in line.split() if "%" in w) for line in table.splitlines()
           if (m := re.search(r" (\d+x \S+) ", line)) and "%" in line}  # the first % on a line is its MFU
    assert mfu["4x rtx6000ada"] == "60%^" and mfu["2x a100pcie"] == "65%^"  # the RTX and A100 lines, capped
    assert mfu["1x h100nvl"] == "57%" and mfu["4x h100"].endswith("%")  # estimates: no mark
    assert "MFU 60%^ capped at 60% (this generation's line)" in " ".join(out[out.index("Buy"):].split())


def test_results_command_keeps_the_gpu_count_at_80_columns_and_says_what_its_columns_mean(db, capsys, monkeypatch):
    from tui_planner import cli

    monkeypatch.setenv("COLUMNS", "80")
    assert cli.main(["results", "--db", str(db), "--model", "pythia-1b"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith(" pythia-1b ")]
    assert rows and all(re.search(r"\b\d+x [a-z0-9]+", line) for line in rows)
    assert "…" not in "\n".join(rows)
    assert "FL free-lunch" in out and "micro-batch x accumulation" in out and "T1/T4 the paper's" in out


def test_results_command_shows_a_predictions_band_and_keeps_it_in_json_only_where_one_has_it(db, capsys, monkeypatch):
    import json

    from tui_planner import cli

    monkeypatch.setenv("COLUMNS", "80")
    args = ["results", "--db", str(db), "--model", "pythia-1b", "--gpu", "h100"]
    assert cli.main([*args, "--source", "predicted"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"\bband\b", out.splitlines()[2])
    assert re.search(r"\s\d+(\.\d)?-\d+(\.\d)?\s", next(l for l in out.splitlines() if l.startswith(" pythia-1b ")))
    assert cli.main([*args, "--source", "paper-*"]) == 0
    assert not re.search(r"\bband\b", capsys.readouterr().out.splitlines()[2])  # no row has one: no column
    assert cli.main([*args, "--source", "predicted", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows and all(r["days_low"] < r["days"] < r["days_high"] for r in rows)


# --- item 7: columns that share the width ---------------------------------------------------------------


def _cells(table: DataTable) -> list[list[str]]:
    return [[table.get_cell_at((i, j)).plain for j in range(len(table.columns))] for i in range(table.row_count)]


def _column(table: DataTable, key: str) -> list[str]:
    j = table.get_column_index(key)
    return [table.get_cell_at((i, j)).plain.strip() for i in range(table.row_count)]


def test_results_columns_share_the_width_cut_nothing_at_80_and_widen_at_120(db):
    async def go():
        app = make_app(db)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press("4")
            table = app.screen.query_one("#results", DataTable)
            await settle(pilot, lambda: table.row_count > 300)
            narrow = [str(c.label).strip() for c in table.columns.values()]
            assert narrow[:3] == ["model", "GPU", "n"] and "band" not in narrow
            cells = _cells(table)
            setting = narrow.index("setting")
            assert not any(row[setting].rstrip().endswith("…") for row in cells), "a setting is cut"
            assert not any(row[narrow.index("days")].rstrip().endswith("…") for row in cells)
            assert any("offload" in row[setting] for row in cells)  # one with offloading reads so
            assert sum(c.width for c in table.columns.values()) <= 80
            await pilot.resize_terminal(*WIDE)
            await settle(pilot, lambda: "band" in [str(c.label).strip() for c in table.columns.values()])
            wide = [str(c.label).strip() for c in table.columns.values()]
            assert "run" in wide and sum(c.width for c in table.columns.values()) > 100

    asyncio.run(go())


def test_plan_columns_share_the_width_cut_nothing_at_80_keep_mfu_at_60_and_widen_at_120(db):
    from tui_planner.app import state as st
    from tui_planner.app.screens.plan import SOURCES_ROOM, sources_line

    for _, sources in st.SOURCE_CHOICES:  # the sources line fits the form, whichever is chosen
        assert len(Static(sources_line(sources)).render().plain) <= SOURCES_ROOM, sources

    def labels(table: DataTable) -> list[str]:
        return [str(c.label).strip() for c in table.columns.values()]

    async def go():
        app = make_app(db)
        async with app.run_test(size=SIZE) as pilot:
            await ranked(pilot, app)
            table = app.screen.query_one("#ranking", DataTable)
            assert labels(table) == ["", "GPUs", "in", "cost", "days", "MFU", "from"]
            assert not any("…" in cell for row in _cells(table) for cell in row), "a cell is cut at 80 columns"
            # issue 41, item 6: a predicted MFU held at its generation's line (60%; A100 65%) reads 60^ (at 80
            # columns the % goes so the days keep their figure beside the band: item 7), 60%^ where there is room
            def mfu() -> dict[str, str]:
                return {r["gpu"] + str(r["num_gpus"]): cell
                        for r, cell in zip(app.screen.option_rows, _column(table, "mfu"))}

            assert mfu()["rtx6000ada4"] == "60^" and mfu()["a100pcie2"] == "65^" and mfu()["h100nvl1"] == "57"
            assert " " in _column(table, "days")[0]  # '25.2 25-43'
            assert "MFU 60%^ capped at 60% (this generation's line)" in \
                " ".join(shown(app.screen.query_one("#verdict", Static)).split())
            assert sum(c.width for c in table.columns.values()) < table.size.width  # no sideways scrolling
            assert "(predicted)" not in shown(app.screen.query_one("#option", Static))  # the column says it
            await pilot.resize_terminal(60, 20)
            await settle(pilot, lambda: "from" not in labels(table))
            assert {"GPUs", "cost", "days", "MFU"} <= set(labels(table))
            assert _column(table, "mfu")[0] == "60^"  # the mark stays where 60 columns are short (the % goes)
            assert sum(c.width for c in table.columns.values()) <= table.size.width - 1  # its scrollbar
            assert "(predicted)" in shown(app.screen.query_one("#option", Static))  # the source, said below
            await pilot.resize_terminal(*WIDE)
            await settle(pilot, lambda: "$/run" in labels(table))
            assert {"in", "from"} <= set(labels(table))
            assert mfu()["rtx6000ada4"] == "60%^" and mfu()["a100pcie2"] == "65%^" and mfu()["h100nvl1"] == "57%"

    asyncio.run(go())


def test_the_line_under_the_results_table_spells_out_the_highlighted_setting(db):
    async def go():
        app = make_app(db)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press("4")
            screen = app.screen
            table = screen.query_one("#results", DataTable)
            await settle(pilot, lambda: table.row_count > 300)
            screen.query_one("#f-method", Select).value = "offload"
            await settle(pilot, lambda: screen.rows and all(r["offloading"] for r in screen.rows))
            words = shown(screen.query_one("#results-words", Static))
            assert "CPU offloading" in words and "micro-batch x accumulation" in words and "glossary" in words

    asyncio.run(go())


# --- item 6: a trial's details, top-down ---------------------------------------------------------------


def _trial(db, where: str) -> str:
    from engine.data.store import Store

    with Store.open(db, read_only=True) as s:
        return s.query(f"SELECT trial_id FROM trials WHERE {where} ORDER BY days NULLS LAST LIMIT 1")[0]["trial_id"]


def test_a_predicted_trial_reads_top_down_and_x_says_why_it_cannot_export_before_asking(db):
    trial = _trial(db, "source = 'predicted' AND days IS NOT NULL AND model = 'pythia-1b'")
    capped = _trial(db, "source = 'predicted' AND model = 'pythia-1b' AND gpu = 'rtx6000ada' AND num_gpus = 4")

    async def go():
        app = make_app(db)
        async with app.run_test(size=SIZE, notifications=True) as pilot:
            await ranked(pilot, app)
            app.push_screen(TrialDetail(trial))
            body = await detail_loaded(pilot, app)
            order = [body.index(s) for s in ("pythia-1b on ", "Predicted", "Result", "band", "MFU", "Run ",
                                             "How it was derived", "step = ", "Settings", "What next")]
            assert order == sorted(order), body
            assert re.search(r"step = [\d.]+ x \d+ \+ [\d.]+ = [\d.]+ s; x [\d,]+ steps = [\d.]+ days", body)
            assert "tui-planner bench --model pythia-1b" in body
            raw = app.screen.query_one("#detail-raw", Collapsible)
            assert raw.collapsed and '"explanation"' in shown(app.screen.query_one("#detail-raw-body", Static))
            assert "^" not in body.split("Run ")[0]  # not capped: its MFU is the estimate
            app.push_screen(TrialDetail(capped))  # issue 41, item 6: a capped one says so on its first lines
            head = (await detail_loaded(pilot, app)).split("Run ")[0]
            assert "MFU 60%^" in head and "^ capped at 60% (this generation's line)" in head
            await pilot.press("escape")
            await pilot.press("x")
            await pilot.pause(0.2)
            assert isinstance(app.screen, TrialDetail), "x asked for a folder on a row it cannot export"
            said = [n.message for n in app._notifications]
            assert any("Cannot export" in m and "predicted" in m and "tui-planner bench" in m for m in said), said

    asyncio.run(go())


def test_a_measured_trial_shows_how_it_was_timed(db):
    trial = _trial(db, "source = 'measured' AND days IS NOT NULL AND failure_kind IS NULL AND model = 'pythia-1b'")

    async def go():
        app = make_app(db)
        async with app.run_test(size=SIZE) as pilot:
            app.push_screen(TrialDetail(trial))
            body = await detail_loaded(pilot, app)
            assert "How it was measured" in body and "synchronize" in body
            assert re.search(r"step = [\d.]+ x \d+ \+ [\d.]+ = ", body)
            assert "x writes its training settings" in body and "tui-planner export --trial" in body

    asyncio.run(go())


def test_a_cpu_trial_reads_as_a_cpu_run_flags_a_wide_spread_and_rounds_its_numbers():
    """Issue 41, item 16: a CPU trial's details said 'torch.cuda.synchronize() + barrier' and TF32 (the
    engine stores its GPU wording for every trial), did not flag a spread wider than the median, and
    printed provenance as stored (allreduce_s: 0.025769456000034552, checkpointing: None)."""
    import json

    from tui_planner.app import details

    row = dict(model="cpu-tiny-neox", gpu="cpu", num_gpus=1, source="measured", feasible=True, days=0.5,
               key="cpu-tiny-neox|cpu|1|1|free-lunch|cpu", free_lunch=True, sharding="none", tf32=True,
               compile=False, pass_s=0.010, pass_spread_s=0.024, update_s=0.002, update_spread_s=0.001,
               grad_accum=2, step_s=0.022, steps=1000, repetitions=3, micro_batch=8,
               provenance=json.dumps({"device": "cpu", "host": "laptop", "allreduce_s": 0.025769456000034552,
                                      "checkpointing": None, "timing": "torch.cuda.synchronize() + barrier around "
                                      "each pass and update; median of repetitions"}))
    body = details.detail_text(row)
    assert "synchronize()" not in body and "no GPU to synchronize" in body
    assert "TF32" not in body
    assert "the pass times spread wider than their median" in body
    assert "allreduce_s: 0.0258" in body and "0.025769456" not in body and "None" not in body
    gpu = dict(row, key="pythia-1b|h100|1|1|free-lunch|cuda", provenance=json.dumps({"device": "NVIDIA H100"}))
    assert "TF32" in details.detail_text(gpu)  # a GPU run keeps it


def test_enter_on_an_infeasible_row_opens_its_details_saying_why(db):
    async def go():
        app = make_app(db)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press("4")
            screen = app.screen
            table = screen.query_one("#results", DataTable)
            await settle(pilot, lambda: table.row_count > 300)
            index = next(i for i, r in enumerate(screen.rows) if not r["feasible"])
            table.move_cursor(row=index)
            await pilot.press("enter")
            body = await detail_loaded(pilot, app)
            assert "no usable time" in body and screen.rows[index]["failure_kind"] in body

    asyncio.run(go())


def test_an_option_with_no_trial_opens_a_dialog_that_says_why_it_is_not_ranked(db):
    row = {"gpu": "a100", "num_gpus": 1, "status": "refused", "why": None, "trial_id": None,
           "paper_days": 3.0, "paper_mfu": 1.4, "paper_plausibility": "impossible"}
    screen = option_detail(row)
    assert isinstance(screen, OptionDetail)
    assert isinstance(option_detail({**row, "trial_id": "t1"}), TrialDetail)

    async def go():
        app = make_app(db)
        async with app.run_test(size=SIZE) as pilot:
            app.push_screen(screen)
            body = await detail_loaded(pilot, app)
            assert "not ranked" in body and "faster than the GPU's peak" in body and "140%!!" in body

    asyncio.run(go())


def test_enter_on_a_plan_option_with_no_trial_opens_a_dialog_saying_why_it_is_not_ranked(db):
    async def go():
        app = make_app(db)
        async with app.run_test(size=SIZE) as pilot:
            await ranked(pilot, app)
            await pilot.press("f")  # measured and the paper: the paper's refused and implausible rows show
            await ranked(pilot, app, sources=("measured", "paper"))
            screen = app.screen
            index = next(i for i, r in enumerate(screen.option_rows) if not r.get("trial_id"))
            row = screen.option_rows[index]
            screen.query_one("#ranking", DataTable).move_cursor(row=index)
            await pilot.press("enter")
            body = await detail_loaded(pilot, app)
            assert isinstance(app.screen, OptionDetail)
            assert "not ranked" in body and row["gpu"] in body

    asyncio.run(go())


# --- item 10: the chart ------------------------------------------------------------------------------


def test_chart_labels_the_pareto_points_and_the_pick_and_its_legend_names_only_what_is_drawn():
    pts = [chart.Point(2_000, 300, "1x a", True, False), chart.Point(30_000, 50, "2x b", False, True),
           chart.Point(60_000, 20, "4x c", True, True, pick=True)]
    picture = chart.render(pts, 70, 14, budget=40_000, deadline=100).plain
    assert "1x a" in picture and "▸4x c" in picture and "2x b" not in picture  # not Pareto, not selected
    assert "2x b" in chart.render(pts, 70, 14, budget=40_000, deadline=100, selected=1).plain
    words = [w for _, _, w in chart.legend(pts, 40_000, 100)]
    assert words == ["Pareto", "fits", "pick", "budget", "deadline"]
    assert [w for _, _, w in chart.legend(pts, None, 100)] == ["Pareto", "fits", "pick", "deadline"]


def test_chart_legend_follows_the_axis_and_enter_opens_the_selected_points_details(db):
    async def go():
        app = make_app(db)
        async with app.run_test(size=SIZE) as pilot:
            await ranked(pilot, app)
            await pilot.press("2")
            await pilot.pause(0.2)
            legend = shown(app.screen.query_one("#chart-legend", Static))
            assert "$50,000 budget" in legend and "100-day deadline" in legend and "pick" in legend
            await pilot.press("c")
            await ranked(pilot, app, x_axis="experiment")
            await pilot.pause(0.1)
            legend = shown(app.screen.query_one("#chart-legend", Static))
            assert "│" not in legend and "$50,000 budget" not in legend and "deadline" in legend  # no budget line drawn
            await pilot.press("up")  # the cheapest Pareto point
            chosen = app.screen.rows[app.screen.query_one("#chart").selected]
            assert chosen["pareto"]
            await pilot.press("enter")
            body = await detail_loaded(pilot, app)
            assert f"on {chosen['num_gpus']} x {chosen['gpu']}" in body

    asyncio.run(go())


# --- snapshots of the new states (80x24 and 120x40) ------------------------------------------------------


def _snap(snap_compare, db, size, press=(), then=None):
    app = make_app(db)

    async def settle_all(pilot):
        await ranked(pilot, app)
        await pilot.press(*press)
        await pilot.pause(0.3)
        if then is not None:
            await then(pilot, app)
        await app.workers.wait_for_complete()
        await pilot.pause(0.3)
        await pilot.wait_for_scheduled_animations()

    return snap_compare(app, terminal_size=size, run_before=settle_all)


async def _open_predicted(pilot, app):
    trial = app.store.query("SELECT trial_id FROM trials WHERE source = 'predicted' AND model = 'pythia-1b' "
                            "AND days IS NOT NULL ORDER BY days LIMIT 1")[0]["trial_id"]
    app.push_screen(TrialDetail(trial))
    await pilot.pause(0.5)


@pytest.mark.parametrize("size", [SIZE, WIDE], ids=["80x24", "120x40"])
def test_snapshot_trial_detail(snap_compare, here, size):
    assert _snap(snap_compare, here, size, then=_open_predicted)


@pytest.mark.parametrize("size", [SIZE, WIDE], ids=["80x24", "120x40"])
def test_snapshot_chart_labelled(snap_compare, here, size):
    assert _snap(snap_compare, here, size, press=("2", "up", "up"))


@pytest.mark.parametrize("size", [SIZE, WIDE], ids=["80x24", "120x40"])
def test_snapshot_results_widths(snap_compare, here, size):
    assert _snap(snap_compare, here, size, press=("4",))


def test_snapshot_glossary(snap_compare, here):
    assert _snap(snap_compare, here, SIZE, press=("question_mark", "g"))
