"""The Textual app, driven as a person would: real key presses (Textual's Pilot), a real DuckDB file,
a real tiny sweep on the CPU from the Benchmark screen, and the real console command inside tmux.

The app reads a database built here from committed data (the paper's tables, one measured H100 file and
a fixed set of predicted Pythia-1B rows), so the screens do not change when the shipped database gains
rows or the predictor changes; prices turn stale against a fixed date.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from textual.widgets import Checkbox, DataTable, Input, Select, SelectionList, Static

from conftest import FIXTURES, ROOT
from engine.data import paperdb
from engine.data.jsonl import import_jsonl
from engine.data.presets import load_presets
from engine.data.store import Store
from tui_planner.app import chart
from tui_planner.app import state as st
from tui_planner.app.app import PlannerApp
from engine.bench.launcher import descendants
from tui_planner.app.screens.dialogs import HelpScreen, TrialDetail, binding_rows

SIZE = (80, 24)
NARROW = (60, 20)  # the smallest size the screens are laid out for
MEASURED = ROOT / "data" / "measured" / "superseded" / "h100-x1-2026-11-22.jsonl"  # a fixed data set
PREDICTED = FIXTURES / "app" / "predicted-pythia-1b.jsonl"  # the predictor's rows of 2026-11-24, fixed
TODAY = dt.date(2026, 11, 24)


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("app") / "fixture.duckdb"
    with Store.open(path, read_only=False) as store:
        paperdb.add_paper(store, ROOT / "data" / "paper", load_presets(include_user=False))
        import_jsonl(store, MEASURED)
        import_jsonl(store, PREDICTED)
        store.con.execute("CHECKPOINT")
    return path


@pytest.fixture(autouse=True)
def _fixed_data_home(monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", "/tmp/tui-planner-test-data")  # the Benchmark screen shows this path


def make_app(db: Path, **kw) -> PlannerApp:
    paths = kw.pop("presets", ())
    kw.setdefault("today", TODAY)
    return PlannerApp(load_presets(include_user=False, extra=paths), db, preset_paths=paths, **kw)


async def bench_on_clock(pilot, app: PlannerApp, clock: list[float]):
    """The Benchmark screen, its clock the test's own (clock[0], moved by the test)."""
    await pilot.press("3")
    app.screen.clock = lambda: clock[0]
    return app.screen


async def benchmark_screen(pilot, app: PlannerApp, tries: int = 400):
    """Open the Benchmark screen (3) and wait, up to `tries` x 50 ms, for its machine probe (a Python that
    imports torch) to answer; returns the screen."""
    await pilot.press("3")
    screen = app.screen
    for _ in range(tries):
        await pilot.pause(0.05)
        if screen.machine is not None:
            break
    return screen


async def ranked(pilot, app: PlannerApp, **expect) -> None:
    """Wait until the background ranking matches the state the keys asked for."""
    for _ in range(100):
        await pilot.pause(0.05)
        r = app.ranking
        if r is not None and r.state == app.state and all(getattr(r.state, k) == v for k, v in expect.items()):
            return
    raise AssertionError(f"ranking never caught up with {expect}")


def text(app: PlannerApp, selector: str) -> str:
    return str(app.screen.query_one(selector, Static).render())


# --- plain functions --------------------------------------------------------------------------------


def test_nudges_step_and_stop_at_a_floor():
    s = st.PlanState(model="pythia-1b", budget_usd=15_000, deadline_days=15)
    assert st.nudge_budget(s, 2).budget_usd == 35_000
    assert st.nudge_budget(s, -5).budget_usd == st.BUDGET_STEP_USD
    assert st.nudge_deadline(s, -3).deadline_days == st.DEADLINE_STEP_DAYS
    assert st.nudge_deadline(st.PlanState(model="x", deadline_days=None), 1).deadline_days == 110
    assert st.cycle(["a", "b", "c"], "c", 1) == "a" and st.cycle(["a", "b"], "a", -1) == "b"
    assert st.cycle_sources(s).sources == ("measured", "paper")


@pytest.mark.parametrize("text, value", [("50000", 50_000), ("$50,000", 50_000), ("50k", 50_000), ("1.2m", 1.2e6)])
def test_money_parses_as_people_type_it(text, value):
    assert st.parse_money(text, "budget") == value


@pytest.mark.parametrize("text", ["fifty", "-5", "0", ""])
def test_bad_money_says_what_is_wrong(text):
    with pytest.raises(Exception, match="budget"):
        st.parse_money(text, "budget")


def test_price_overrides_name_unknown_gpus():
    assert st.parse_prices("h100=25k ws4=12000", ["h100", "ws4"]) == (("h100", 25_000.0), ("ws4", 12_000.0))
    with pytest.raises(Exception, match="no GPU or system called 'h900'"):
        st.parse_prices("h900=1", ["h100"])
    with pytest.raises(Exception, match="ID=USD"):
        st.parse_prices("h100", ["h100"])


def _row(gpu, n, cost, days, deadline=60, **kw):
    base = dict(gpu=gpu, num_gpus=n, system="ws4", system_name="4-GPU workstation", system_short="ws4",
                hardware_cost_usd=cost, days=days, days_low=days, days_high=days,
                cost_per_experiment_usd=cost * days / 1825, within_budget=True, within_deadline=True, pareto=True,
                source="measured", mfu=0.4, plausibility="ok", config="free-lunch", status="ok", extrapolated=None,
                paper_days=None, gpu_price_usd=cost / n, gpu_price_date=TODAY, gpu_price_source="x",
                gpu_price_stale=False, system_price_usd=0, system_price_date=TODAY, system_price_source="y",
                system_price_stale=False, price_stale=False)
    base.update(kw)
    from engine.plan.uncertainty import deadline_verdict

    base["deadline_verdict"] = deadline_verdict(base["days_low"], base["days_high"], deadline)
    return base


def test_verdict_names_the_winner_and_what_the_runner_up_trades():
    s = st.PlanState(model="m", budget_usd=100_000, deadline_days=60)
    rows = [_row("h100", 4, 150_000, 10, within_budget=False), _row("a6000", 4, 23_200, 25),
            _row("a6000", 2, 11_600, 51)]
    lines = st.verdict(rows, s)
    assert "Buy 4 x A6000 in a 4-GPU workstation" in lines[0] and "25.0 days" in lines[0]
    assert "Runner-up 2 x A6000 in a 4-GPU workstation: saves $11,600 but takes 26.0 more days" in lines[-1]


def test_verdict_warns_when_the_winner_rests_on_an_implausible_figure():
    """The paper's own view ranks on its figures, flags intact."""
    s = st.PlanState(model="m", budget_usd=100_000, deadline_days=60, sources=("paper",))
    lines = st.verdict([_row("a6000", 8, 49_000, 22, source="paper-table1", mfu=0.81, plausibility="implausible")], s)
    assert "implausible" in lines[1] and "expect longer" in lines[1]


def test_verdict_when_nothing_fits_says_what_it_would_take():
    s = st.PlanState(model="m", budget_usd=20_000, deadline_days=30)
    rows = [_row("h100", 4, 150_000, 51, within_budget=False, deadline=30),
            _row("h100", 8, 285_000, 25, within_budget=False, deadline=30)]
    lines = st.verdict(rows, s)
    assert "Nothing fits the budget" in lines[0] and "$150,000" in lines[0]
    assert "Meeting the deadline for sure needs $285,000" in lines[1]


def test_chart_draws_points_frontier_and_the_budget_and_deadline_lines():
    pts = [chart.Point(2_000, 300, "a", True, False), chart.Point(30_000, 50, "b", False, True),
           chart.Point(60_000, 20, "c", True, True)]
    lines = chart.render(pts, 60, 14, budget=40_000, deadline=100).plain.splitlines()
    assert len(lines) == 14
    body = "\n".join(lines[:-2])
    assert body.count("◆") == 2 and body.count("●") == 1
    budget_cols = {line.index("│", 7) for line in lines[:-2] if "│" in line[7:]}
    assert len(budget_cols) == 1  # one vertical budget line
    assert sum("─" * 10 in line for line in lines[:-2]) == 1  # one horizontal deadline line
    assert "$10k" in lines[-1]


def test_chart_labels_the_deadline_line_with_its_value_and_finds_room_for_the_picks_label():
    """Issue 41, item 14: the 90-day line was drawn on the row the axis labels 100; the pick's label
    disappeared where its row had no room on either side (60x20)."""
    pts = [chart.Point(2_000, 300, "a", True, False), chart.Point(30_000, 50, "b", False, True),
           chart.Point(60_000, 20, "c", True, True)]
    for height in range(8, 30):  # whichever row the line falls on, it reads 90
        lines = chart.render(pts, 60, height, budget=40_000, deadline=90).plain.splitlines()
        assert [line[:6] for line in lines[:-2] if "─" * 10 in line] == ["   90 "], height
    crowded = [chart.Point(10_000, 50, "left", False, True), chart.Point(12_000, 50, "pick", False, True, pick=True),
               chart.Point(14_400, 50, "right", False, True), chart.Point(2_000, 10, "a", True, True),
               chart.Point(60_000, 300, "b", False, False)]
    assert "▸pick" in chart.render(crowded, 36, 12).plain  # on the row above its point
    assert chart.pareto([(1, 10), (2, 5), (3, 5), (2, 20)]) == [True, True, False, False]


# --- screens, by key presses ------------------------------------------------------------------------


def test_plan_what_if_keys_move_the_ranking(db):
    async def go():
        app = make_app(db)
        async with app.run_test(size=SIZE) as pilot:
            await ranked(pilot, app)
            assert app.state.model == "pythia-1b" and len(app.ranking.rows) > 5
            await pilot.press("right_square_bracket", "right_square_bracket")
            await ranked(pilot, app, budget_usd=70_000)
            assert "$70,000" in text(app, "#title")
            assert app.screen.query_one("#budget", Input).value == "70000"
            await pilot.press("comma", "comma", "comma")
            await ranked(pilot, app, deadline_days=70)
            late = [r for r in app.ranking.rows if r["days"] and r["days"] > 70]
            assert late and not any(r["within_deadline"] for r in late)
            await pilot.press("m")
            await ranked(pilot, app)
            assert app.state.model != "pythia-1b" and app.screen.query_one("#model", Select).value == app.state.model
            await pilot.press("M", "f")
            await ranked(pilot, app, model="pythia-1b", sources=("measured", "paper"))
            assert "Buy" in text(app, "#verdict") or "Nothing" in text(app, "#verdict")

    asyncio.run(go())


def test_a_field_applies_on_enter_or_on_leaving_it_and_the_title_agrees(db):
    """Issue 41, item 3: typing 70000 then deleting it never applies $7; what is typed applies on enter or on
    leaving the field, checked; text that is not a value stays in the field on enter with why beside it, and
    leaving puts the plan's value back, so the field and the title agree (80x24, then 60x20)."""

    async def go():
        app = make_app(db)
        async with app.run_test(size=SIZE) as pilot:
            await ranked(pilot, app)
            applied = []
            app.screen.watch(app, "state", lambda s: applied.append((s.budget_usd, s.deadline_days)), init=False)
            box = app.screen.query_one("#budget", Input)
            await pilot.press("e", *"70000", *["backspace"] * 5)
            await pilot.press(*"70000")
            assert applied == [] and app.state.budget_usd == 50_000 and "$50,000" in text(app, "#title")
            assert "not applied yet" in text(app, "#field-note")
            await pilot.press("enter")
            await ranked(pilot, app, budget_usd=70_000)
            assert applied == [(70_000, 100)] and box.value == "70000" and "$70,000" in text(app, "#title")
            assert app.screen.query_one("#ranking", DataTable).has_focus
            assert not app.screen.query_one("#field-note", Static).display
            await pilot.resize_terminal(*NARROW)
            await pilot.press("e", *"lots")
            assert box.has_class("-bad") and "not an amount" in text(app, "#field-note")
            await pilot.press("enter")  # not a value: it stays, with why, and applies nothing
            assert box.has_focus and box.value == "lots" and app.state.budget_usd == 70_000
            await pilot.press("tab")  # leaving it: the plan's value back
            assert box.value == "70000" and not box.has_class("-bad") and len(applied) == 1
            await pilot.press(*"45", "escape")  # leaving by escape applies what is typed
            await ranked(pilot, app, deadline_days=45)
            assert applied[-1] == (70_000, 45) and ", 45 d" in text(app, "#title")
            assert "45" == app.screen.query_one("#deadline", Input).value
            await pilot.press("e", "shift+tab", "shift+tab", "shift+tab", *"100B")  # tokens
            await pilot.press("shift+tab")  # leaving by a key: applied before the focus moves
            await ranked(pilot, app)
            assert app.state.run.tokens == 100e9 and "100B tokens" in text(app, "#run")

    asyncio.run(go())


def test_x_writes_the_plan_as_a_report_and_says_where_and_a_screenshot_makes_its_folder(db, tmp_path, monkeypatch):
    """Issue 41, item 8: the run, the inputs, every option with its evidence and dated prices, the verdict,
    as Markdown and CSV, and an SVG of the screen, in a folder made for them; Textual's screenshot makes
    ~/Downloads where it is missing."""
    import csv
    import io

    import platformdirs

    from tui_planner import format as fmt
    from tui_planner import report

    folder = tmp_path / "not" / "yet"
    downloads = tmp_path / "Downloads"
    monkeypatch.setattr(platformdirs, "user_downloads_path", lambda: downloads)

    async def go():
        app = make_app(db)
        async with app.run_test(size=SIZE) as pilot:
            await ranked(pilot, app)
            await pilot.press("right_square_bracket")
            await ranked(pilot, app, budget_usd=60_000)  # x before the ranking caught up says "x again"
            await pilot.press("x")  # the plan as it is now: $60,000
            for _ in range(100):
                if type(app.screen).__name__ == "AskPath":
                    break
                await pilot.pause(0.05)
            await pilot.press(*str(folder), "enter")
            for _ in range(100):
                if folder.is_dir() and any(folder.glob("*.svg")):
                    break
                await pilot.pause(0.05)
            said = [n.message for n in app._notifications]
            app.deliver_screenshot()  # the command palette's "Screenshot"
            await pilot.pause(0.1)
            said += [n.message for n in app._notifications]
            return app.ranking, said

    ranking, said = asyncio.run(go())
    files = sorted(folder.iterdir())
    assert [p.suffix for p in files] == [".csv", ".md", ".svg"] and files[0].stem.startswith("plan-pythia-1b-")
    assert any(str(folder) in m and files[1].name in m for m in said), said
    options = [r for r in ranking.rows if r["system"]]
    md = files[1].read_text()
    assert "300B tokens: 143,000 steps" in md and "| budget (hardware) | \\$60,000 |" in md
    assert "- Buy " in md and "Runner-up" in md and "MFU" in md  # the verdict and its reasons
    first = options[0]  # its prices, dated, with their whole sources
    assert f"- {first['gpu']} (per GPU): \\{fmt.usd(first['gpu_price_usd'])}, {fmt_date(first['gpu_price_date'])}" in md
    assert report.md(first["gpu_price_source"]) in md
    lines = list(csv.DictReader(io.StringIO(files[0].read_text())))
    assert [(int(x["num_gpus"]), x["gpu"]) for x in lines] == [(r["num_gpus"], r["gpu"]) for r in options]
    assert all(x["evidence"] and x["gpu_price_date"] and x["run"].startswith("300B") for x in lines)
    # issue 41, item 6: a capped MFU is marked in both, and said to be the line, not an estimate
    assert [x["capped"] == "True" for x in lines] == [bool(r["capped"]) for r in options] and lines[0]["capped"] == "True"
    assert "| 60%^ |" in md and "capped at 60% (this generation's line)" in md
    svg = files[2].read_text()
    assert svg.startswith("<svg") and "Buy" in svg and "60,000" in svg
    shots = list(downloads.iterdir())
    assert len(shots) == 1 and shots[0].suffix == ".svg" and any(str(shots[0]) in m for m in said), said
    assert report.md("a|b [x](y) *z* $5 \x1b") == "a\\|b \\[x\\](y) \\*z\\* \\$5 \\\\x1b"  # ESC written out, its \\ shown


def test_each_option_shows_its_days_beside_its_band_and_what_it_trades_against_the_pick(db):
    """Issue 41, item 7: rows read '25.2 25-43', not '25-43' alone (the order is the figure's); any row
    highlighted says what it trades against the verdict's pick, not only the runner-up; at 60 columns the
    band alone, the figure in the line under the table."""
    from tui_planner import format as fmt

    async def go():
        app = make_app(db)
        async with app.run_test(size=SIZE) as pilot:
            await ranked(pilot, app)
            table = app.screen.query_one("#ranking", DataTable)
            options = app.screen.option_rows
            days = [str(table.get_cell_at((i, table.get_column_index("days")))).strip() for i in range(len(options))]
            banded = [(d, r) for d, r in zip(days, options) if r["days_low"] != r["days_high"]]
            assert banded and all(d == f"{fmt.days(r['days'])} {fmt.band(r['days_low'], r['days_high'])}"
                                  for d, r in banded)
            assert "vs the pick" not in text(app, "#option")  # the pick itself
            pane = app.screen.query_one("#verdict-pane")  # longer than its lines at 80x24: it scrolls, not cut
            for _ in range(50):  # the verdict is laid out after the ranking lands: on a busy machine, a beat later
                if pane.max_scroll_y > 0:
                    break
                await pilot.pause(0.05)
            assert pane.max_scroll_y > 0 and "Runner-up" in text(app, "#verdict")
            pick = options[table.cursor_row]
            await pilot.press("down", "down", "down", "down")
            other = options[table.cursor_row]
            more = other["hardware_cost_usd"] - pick["hardware_cost_usd"]
            slower = other["days"] - pick["days"]
            assert more > 0 and slower > 0
            assert f"vs the pick: {fmt.usd(more)} more, {fmt.days(slower)} d slower" in text(app, "#option")
            table.move_cursor(row=len(options) - 1)  # over budget, and a late row: said against the pick
            await pilot.pause(0.1)
            assert not options[-1]["within_budget"] and "over budget" in text(app, "#option")
            table.move_cursor(row=next(i for i, r in enumerate(options) if r["deadline_verdict"] == "missed"))
            await pilot.pause(0.1)
            assert "misses the deadline" in text(app, "#option")
            await pilot.resize_terminal(*NARROW)
            await pilot.pause(0.3)
            cell = str(table.get_cell_at((table.cursor_row, table.get_column_index("days")))).strip()
            last = options[table.cursor_row]
            assert cell == fmt.band(last["days_low"], last["days_high"]) and f"{fmt.days(last['days'])} d" in \
                text(app, "#option")

    asyncio.run(go())


def test_measured_only_says_why_the_measured_gpus_are_not_options(db):
    """Issue 41, item 5: trusting measured rows alone, the H100 measured one at a time is no option (no
    system sold takes one H100 SXM): the verdict says so and why, as `rank` does, not only 'no results'."""

    async def go():
        app = make_app(db)
        async with app.run_test(size=SIZE) as pilot:
            await ranked(pilot, app)
            await pilot.press("f", "f", "f")
            await ranked(pilot, app, sources=("measured",))
            verdict = text(app, "#verdict")
            assert "No results" in verdict
            assert "Not an option (no system sold takes them; 4 lists their rows): 1 x h100 (measured): h100 goes " \
                   "4 or 8 to a system" in verdict

    asyncio.run(go())


def test_fields_take_every_letter_t_leaves_three_figures_and_reset_asks(db):
    """Issue 41, item 15: every field takes what is typed, letters too, and checks it the same way (1e309
    tokens: why not, beside the field; leaving: the plan's value back, said); after t the Tokens field reads
    as the run line does (600B, not 600.078336B) and leaving it unedited keeps the exact run; R asks before
    it resets the plan (80x24, then 60x20)."""

    async def go():
        app = make_app(db)
        async with app.run_test(size=SIZE) as pilot:
            await ranked(pilot, app)
            tokens = app.screen.query_one("#tokens", Input)
            await pilot.press("e", "shift+tab", "shift+tab", "shift+tab", *"1e309")
            assert tokens.has_focus and tokens.value == "1e309" and tokens.has_class("-bad")
            assert "not a number above 0" in text(app, "#field-note")
            await pilot.press("escape")  # left: not applied, the field empty again (the model's own)
            await ranked(pilot, app)
            assert tokens.value == "" and app.state.run.tokens is None
            await pilot.resize_terminal(*NARROW)
            await pilot.press("t")
            await ranked(pilot, app)
            exact = app.state.run.tokens
            assert tokens.value == "600B" and exact != 600e9 and "600B tokens" in text(app, "#run")
            await pilot.press("e", "shift+tab", "shift+tab", "shift+tab")
            assert "not applied" not in text(app, "#field-note")
            await pilot.press("escape")  # not edited: the exact run stands
            assert app.state.run.tokens == exact
            await pilot.press("e", "tab", "tab", "tab", "tab", *"hgx8=70k", "enter")  # g typed, not the GPU list
            await ranked(pilot, app, price_overrides=(("hgx8", 70_000.0),))
            await pilot.press("R")
            assert type(app.screen).__name__ == "Confirm" and app.state.price_overrides
            await pilot.press("n")
            assert app.state.price_overrides and app.state.run.tokens == exact
            await pilot.press("R", "y")
            await ranked(pilot, app)
            assert app.state.price_overrides == () and app.state.run.tokens is None

    asyncio.run(go())


def test_second_hand_prices_are_marked_and_n_leaves_them_out(db):
    """Issue 41, item 9: a used A6000 at $2,800, a used RTX 3090 at $750 and a V100 off the secondary market
    ranked beside new systems, unmarked: their cost and their price in the GPU list carry a u, and n leaves
    those GPU types out (n again brings them back)."""
    used = {"a6000", "rtx3090", "v100"}

    async def go():
        app = make_app(db)
        async with app.run_test(size=SIZE) as pilot:
            await ranked(pilot, app)
            assert st.second_hand_gpus(app.presets, app.state) == used
            table = app.screen.query_one("#ranking", DataTable)
            cost = table.get_column_index("hw")
            marks = {r["gpu"]: str(table.get_cell_at((i, cost))).strip().endswith(st.USED_MARK)
                     for i, r in enumerate(app.screen.option_rows)}
            assert marks["a6000"] and not marks["rtx6000ada"]
            gpus = app.screen.query_one("#gpus", SelectionList)
            prompts = {str(gpus.get_option_at_index(i).value): str(gpus.get_option_at_index(i).prompt)
                       for i in range(gpus.option_count)}
            assert {g for g, p in prompts.items() if p.endswith(st.USED_MARK)} == used
            await pilot.press("n")
            await ranked(pilot, app)
            assert not used & {r["gpu"] for r in app.ranking.rows} and set(app.state.gpus_allowed)
            assert any("Left out, priced second-hand: a6000, rtx3090, v100" in n.message for n in app._notifications)
            await pilot.press("n")
            await ranked(pilot, app, gpus_allowed=())

    asyncio.run(go())


def test_toggling_a_gpu_type_drops_it_from_the_ranking(db):
    async def go():
        app = make_app(db)
        async with app.run_test(size=SIZE) as pilot:
            await ranked(pilot, app)
            assert any(r["gpu"] == "rtx3090" for r in app.ranking.rows)
            await pilot.press("g")
            assert app.screen.query_one("#gpus", SelectionList).has_focus
            await pilot.press("space")  # the first GPU in the list
            first = next(iter(app.presets.gpus))
            await ranked(pilot, app)
            assert first not in app.state.gpus_allowed and app.state.gpus_allowed
            assert not any(r["gpu"] == first for r in app.ranking.rows)

    asyncio.run(go())


def test_enter_on_an_option_shows_its_trial_with_mfu_and_provenance(db):
    async def go():
        app = make_app(db)
        async with app.run_test(size=SIZE) as pilot:
            await ranked(pilot, app)
            await pilot.press("enter")
            await pilot.pause(0.5)
            assert isinstance(app.screen, TrialDetail)
            body = str(app.screen.query_one("#detail-body", Static).render())
            assert "MFU" in body and "Provenance" in body
            await pilot.press("escape")
            assert not isinstance(app.screen, TrialDetail)

    asyncio.run(go())


def test_chart_picks_points_and_switches_axis(db):
    async def go():
        app = make_app(db)
        async with app.run_test(size=SIZE) as pilot:
            await ranked(pilot, app)
            await pilot.press("2")
            await pilot.pause(0.2)
            assert type(app.screen).__name__ == "ChartScreen"
            await pilot.press("right")
            cheapest = min((r for r in app.ranking.rows if r["days"] and r["system"]),
                           key=lambda r: r["hardware_cost_usd"])
            assert f"{cheapest['num_gpus']} x {cheapest['gpu']}" in text(app, "#chart-info")
            await pilot.press("right_square_bracket")
            await ranked(pilot, app, budget_usd=60_000)
            await pilot.press("c")
            await ranked(pilot, app, x_axis="experiment")
            assert "cost per experiment" in text(app, "#chart-title")
            # the frontier on the cost plotted now: a point dominated per experiment loses its diamond
            points = app.screen.query_one("#chart").points
            assert [p.pareto for p in points] == chart.pareto([(p.x, p.y) for p in points])
            assert any(p.pareto != r["pareto"] for p, r in zip(points, app.screen.rows))

    asyncio.run(go())


def test_results_sort_filter_and_open_another_database(db, tmp_path):
    async def go():
        app = make_app(db)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press("4")
            await pilot.pause(0.5)
            table = app.screen.query_one("#results", DataTable)
            everything = table.row_count
            assert everything > 300 and "sorted by days" in text(app, "#results-status")
            await pilot.press("s")
            assert "sorted by MFU" in text(app, "#results-status")
            await pilot.press("f", "enter")  # open the model filter, type to find, choose
            await pilot.press(*"pythia-2.8b", "enter")
            await pilot.pause(0.5)
            assert app.screen.query_one("#f-model", Select).value == "pythia-2.8b"
            assert 0 < table.row_count < everything
            screen = app.screen
            screen.query_one("#f-method", Select).value = "zero"
            await pilot.pause(0.5)
            assert 0 < table.row_count and all(r["sharding"].startswith("zero") for r in screen.rows)
            await pilot.press("escape", "enter")
            await pilot.pause(0.5)
            assert isinstance(app.screen, TrialDetail)
            await pilot.press("escape")
            # another file: a copy with one model's rows only
            other = tmp_path / "other.duckdb"
            with Store.open(other, read_only=False) as s:
                import_jsonl(s, MEASURED)
            await pilot.press("o")
            await pilot.pause(0.2)
            await pilot.press(*str(other), "enter")
            await pilot.pause(0.8)
            assert app.db_path == str(other)
            assert str(other) in text(app, "#results-status")
            # a file that is not a database: a clear message, the current one stays
            bad = tmp_path / "notes.txt"
            bad.write_text("not a database")
            await pilot.press("o")
            await pilot.pause(0.2)
            await pilot.press(*str(bad), "enter")
            await pilot.pause(0.5)
            assert app.db_path == str(other)

    asyncio.run(go())


def test_the_header_says_which_database_and_o_goes_back_to_the_shipped_one(db, tmp_path, monkeypatch):
    """Issue 41, item 4: every screen's header names the database shown; `o`, enter returns to the shipped
    one from another file (the Benchmark screen's v or an earlier o); 80x24, then 60x20."""
    from textual.widgets._header import HeaderTitle

    from engine.data import paths

    (tmp_path / "db").mkdir()
    shipped = tmp_path / "db" / "tui-planner.duckdb"
    shutil.copy(db, shipped)
    monkeypatch.setattr(paths, "db_dir", lambda: tmp_path / "db")
    other = tmp_path / "mine.duckdb"
    with Store.open(other, read_only=False) as s:
        import_jsonl(s, MEASURED)

    def header(app) -> str:
        return str(app.screen.query_one(HeaderTitle).render())

    async def go():
        app = make_app(shipped)
        async with app.run_test(size=SIZE) as pilot:
            await ranked(pilot, app)
            assert "tui-planner — shipped database" in header(app)
            await pilot.press("4", "o")
            await pilot.pause(0.2)
            await pilot.press(*str(other), "enter")
            await pilot.pause(0.5)
            assert app.db_path == str(other) and "mine.duckdb" in header(app)
            assert not [n for n in app._notifications if "laid out for" in n.message]
            await pilot.resize_terminal(*NARROW)
            await pilot.press("1")
            await pilot.pause(0.2)
            # below 80x24 what is cut is said (issue 41, item 10)
            assert [n for n in app._notifications if "terminal is 60x20" in n.message and "cut" in n.message]
            assert "mine.duckdb" in header(app) and "shipped" not in header(app)
            await pilot.press("o")
            await pilot.pause(0.2)
            assert "back to the shipped database" in str(app.screen.query_one("#path-hint", Static).render())
            await pilot.press("enter")
            await pilot.pause(0.5)
            assert app.db_path == str(shipped) and "tui-planner — shipped database" in header(app)

    asyncio.run(go())


def test_w_shows_what_the_highlighted_rows_search_found(db):
    async def go():
        app = make_app(db)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press("4")
            await pilot.pause(0.5)
            screen = app.screen
            screen.query_one("#f-model", Select).value = "pythia-1b"
            screen.query_one("#f-source", Select).value = "measured"
            await pilot.pause(0.5)
            assert screen.rows and all(r["source"] == "measured" for r in screen.rows)
            await pilot.press("escape", "w")
            await pilot.pause(0.5)
            assert type(app.screen).__name__ == "CellFindings"
            from rich.console import Console

            console = Console(width=76, record=True, file=open(os.devnull, "w"))
            console.print(app.screen.query_one("#findings-body", Static).content)
            shown = console.export_text()
            assert "pythia-1b on 1 x h100: 2 of 12 combinations timed" in shown  # the rest dominated
            assert "winner" in shown and "paper h100" in shown and "time vs free-lunch" in shown
            await pilot.press("escape")
            screen.query_one("#f-source", Select).value = "paper"  # a paper row: no search to summarise
            await pilot.pause(0.5)
            await pilot.press("escape", "w")
            await pilot.pause(0.5)
            assert "no measured search here" in str(app.screen.query_one("#findings-body", Static).render())

    asyncio.run(go())


def test_a_multi_gpu_cells_findings_show_its_scaling_and_what_the_links_cost():
    from engine.data.paths import shipped_db
    from tui_planner.app.screens.dialogs import CellFindings

    async def go():
        app = make_app(shipped_db())
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause(0.3)
            app.push_screen(CellFindings("pythia-1b", "h200", 4))
            await pilot.pause(0.2)
            body = app.screen.query_one("#findings-body", Static)
            from rich.console import Console

            shown = ""
            for _ in range(50):
                await pilot.pause(0.1)
                console = Console(width=76, record=True, file=open(os.devnull, "w"))
                console.print(body.content)
                shown = console.export_text()
                if "Scaling" in shown:
                    break
            assert "pythia-1b on 4 x h200" in shown
            # 1 -> 2 -> 4 H200s, of 16-bit rows (an fp8 row on one GPU is another training): 3.73x from the one-GPU
            # best, fused (the loss kernel only, same maths: 38.7 days against free-lunch's 39.4; 4 GPUs: 10.4, measured
            # again on 2026-11-28)
            assert "Scaling on one node" in shown and re.search(r"3\.73x", shown)
            # the fastest here is fp8: marked as another training, and not the best memory-saving setting
            assert "fp8≈" in shown and "≈ changes numerics" in shown and "memory-saving setting: +2%" in shown
            assert "host-staged (no P2P)" in shown and "2 nodes, sockets" in shown

    asyncio.run(go())


def test_help_lists_every_key_and_the_palette_runs_actions(db):
    rows = binding_rows()
    screens = {r[0] for r in rows}
    assert {"Everywhere", "Plan (1)", "Chart (2)", "Benchmark (3)", "Results (4)"} <= screens
    assert {("Plan (1)", "t"), ("Plan (1)", "T"), ("Chart (2)", "t")} <= {r[:2] for r in rows}  # the run's tokens

    async def go():
        app = make_app(db)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press("question_mark")
            assert isinstance(app.screen, HelpScreen)
            await pilot.press("escape")
            await pilot.press("ctrl+p")
            await pilot.pause(0.2)
            await pilot.press(*"Results", "enter")
            await pilot.pause(0.5)
            assert type(app.screen).__name__ == "ResultsScreen"
            await pilot.press("ctrl+t")
            assert app.theme == "textual-light"
            await pilot.press("1")
            await pilot.pause(0.2)
            # the palette in one voice: the screen, what the key does in words, the key (issue 41, item 13)
            titles = {str(c.title): c.help for c in app.get_system_commands(app.screen)}
            assert titles["Plan: Budget +$10k"] == "key []" and titles["Plan: Budget -$10k"] == "key ["
            assert titles["Plan: Cycle which sources are trusted (the from column)"] == "key f"
            assert titles["Plan: Every price with its date and source, stale ones marked, and how to override"] \
                == "key $"
            assert not [t for t in titles if t.startswith("Plan: ") and not t[6].isupper()]

    asyncio.run(go())


def test_a_key_means_one_thing_on_every_screen():
    """Issue 41, item 13: s sorted Results but cycled the Plan's sources, r ran a benchmark but reversed a sort,
    p paused a sweep but listed prices, k and l stopped and logged a sweep but moved on the chart. Across the
    four screens and the app, a key is bound to one action (an action on the app is the same one wherever it
    is bound), or to one meaning: f filters (the sources a ranking trusts; the rows Results shows); dialogs
    are modal and keep their own (y, n, escape)."""
    import importlib

    from textual.binding import Binding

    from tui_planner.app.screens.dialogs import SCREENS

    meaning = {"sources": "filter", "focus_filters": "filter"}
    actions: dict[str, set[str]] = {}
    for _, module, cls in SCREENS:
        for b in getattr(importlib.import_module(module), cls).BINDINGS:
            if isinstance(b, Binding):
                for key in b.key.split(","):
                    action = b.action.removeprefix("app.")
                    actions.setdefault(key.strip(), set()).add(meaning.get(action, action))
    assert {k: a for k, a in actions.items() if len(a) > 1} == {}
    assert actions["s"] == {"sort"} and actions["f"] == {"filter"} and actions["r"] == {"start"}
    assert actions["p"] == {"pause"} and actions["dollar_sign"] == {"prices"} and actions["S"] == {"reverse"}


# --- the benchmark screen: a real sweep -------------------------------------------------------------


def test_benchmark_screen_runs_a_real_cpu_sweep_and_rows_arrive(db, tmp_path):
    """Without a GPU the screen offers only the tiny CPU models shipped with the package (presets/cpu/), not
    Pythia-1B for hours of batch search on the CPU (issue 41, item 1); one of them is measured here."""
    out = tmp_path / "mine.duckdb"

    async def go():
        app = make_app(db)
        async with app.run_test(size=SIZE) as pilot:
            screen = await benchmark_screen(pilot, app)  # the probe starts a Python that imports torch
            assert screen.machine is not None and not screen.machine.gpus
            assert screen.query_one("#b-device", Select).value == "cpu"
            models = screen.query_one("#b-model", Select)
            offered = [value for _, value in models._options]
            assert offered == ["cpu-tiny-neox", "cpu-tiny-roberta", "cpu-tiny-vit"] and models.value == offered[0]
            assert "the CPU runs the tiny models only" in text(app, "#machine")
            from engine.bench.environment import Machine

            probed, cpu_models = screen.machine, screen.cpu_models
            screen._show_machine(Machine(host="here"))  # no torch: the hint's install command, not cut at 80
            await pilot.pause(0.1)
            hint = " ".join(text(app, "#machine").split())
            assert screen.query_one("#machine").size.height == 3 and "pip install '.[bench]'" in hint
            # no GPU either: torch's CPU build first, not the CUDA build pip takes by default (issue 41, item 17)
            assert "no GPU here: pip install torch --index-url https://download.pytorch.org/whl/cpu (CPU build" in hint
            screen._show_machine(Machine(host="here", gpus=["NVIDIA H100"], memory_gb=[80.0]))  # a GPU: the extra alone
            await pilot.pause(0.1)
            assert "whl/cpu" not in text(app, "#machine") and "pip install '.[bench]'" in text(app, "#machine")
            screen._show_machine(probed, cpu_models)
            await pilot.pause(0.1)
            assert "cpu" in screen.request().presets[0]  # the shipped tiny models go to the trials
            screen.query_one("#b-device", Select).value = "cuda"  # a GPU's list: every model
            await pilot.pause(0.1)
            assert "pythia-1b" in [value for _, value in models._options]
            screen.query_one("#b-device", Select).value = "cpu"
            await pilot.pause(0.1)
            assert models.value == "cpu-tiny-neox"
            screen.query_one("#b-methods", Select).value = "free-lunch+extras"  # issue 42's opt-in methods
            await pilot.pause(0.1)
            req = screen.request()
            assert (req.methods, req.extras) == ("free-lunch", ("fused", "fp8"))
            screen.query_one("#b-methods", Select).value = "free-lunch"
            await pilot.pause(0.1)
            assert screen.request().extras == ()
            screen.query_one("#b-compile", Checkbox).value = False
            box = screen.query_one("#b-db", Input)
            box.value = str(out)
            await pilot.press("escape", "r")
            table = screen.query_one("#trials", DataTable)
            for _ in range(2400):
                await pilot.pause(0.1)
                if not app.sweep_running() and table.row_count and app.sweep.worker.is_finished:
                    break
            assert table.row_count == 2
            states = [str(table.get_cell_at((i, 1))) for i in range(2)]
            assert all("measured" in s for s in states), states
            assert "done" in text(app, "#progress-label")
            days_cells = [str(table.get_cell_at((i, table.get_column_index("days")))) for i in range(2)]
            with Store.open(out, read_only=True) as s:
                rows = s.trials(model="cpu-tiny-neox")
            assert len(rows) == 2 and all(r["feasible"] for r in rows)
            from tui_planner import format as fmt

            assert sorted(days_cells) == sorted(fmt.days(r["days"]) for r in rows)  # the table shows the store
            retry = screen.query_one("#b-retry", Checkbox)  # what crashed twice: skipped unless ticked
            assert not screen.request().retry_failed
            retry.value = True
            assert screen.request().retry_failed
            retry.value = False
            # run again: everything resumes from the database, nothing is measured twice
            await pilot.press("r")
            for _ in range(600):
                await pilot.pause(0.1)
                if "done" in text(app, "#progress-label") and app.sweep.worker.is_finished:
                    break
            assert "2 resumed" in text(app, "#search")  # the counts: on the search line
            assert all("resumed" in str(table.get_cell_at((i, 1))) for i in range(2))
            assert sorted(str(table.get_cell_at((i, table.get_column_index("days")))) for i in range(2)) == sorted(days_cells)
            with Store.open(out, read_only=True) as s:
                assert len(s.trials(model="cpu-tiny-neox")) == 2
            await pilot.press("v")
            await pilot.pause(0.5)
            assert type(app.screen).__name__ == "ResultsScreen" and app.db_path == str(out)
            # browsing that file read-only must not stop the next sweep from writing it
            first = app.sweep.worker
            await pilot.press("3", "r")
            for _ in range(600):
                await pilot.pause(0.1)
                if app.sweep.worker is not first and app.sweep.worker.is_finished:
                    break
            assert app.sweep.worker is not first and app.db_path != str(out)
            assert "2 resumed" in text(app, "#search")  # the counts: on the search line

    asyncio.run(go())


def test_benchmark_screen_shows_the_guided_search_its_predictions_what_cannot_win_and_why(db):
    """The engine's events of a guided sweep (engine/bench/sweep.py), posted to the screen as its worker
    posts them: no GPU needed."""
    from engine.bench import events as ev
    from tui_planner.app.screens.bench import EngineEvent
    from tui_planner.app.screens.common import Check

    labels = ("free-lunch", "ckpt", "naive")
    keys = tuple(f"pythia-1b|h100|1|1|{label}|measured" for label in labels)
    why = ("cannot win: predicted 100 days (80-150) at micro-batch 8; even its band's low end, 80 days, is no "
           "faster than the 41 days measured (free-lunch)")

    def cells(table, column: int) -> list[str]:
        return [str(table.get_cell_at((i, column))) for i in range(table.row_count)]

    async def go():
        app = make_app(db)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press("3")
            screen = app.screen
            search = screen.query_one("#search", Static)
            assert "guided" in str(search.render()) and "exhaustive" in str(search.render())
            step_up = screen.query_one("#b-step-up", Check)  # off by default, as bench's --step-up
            assert not step_up.value and not screen.request().step_up
            step_up.toggle()
            assert screen.request().step_up
            step_up.toggle()
            exhaustive = screen.query_one("#b-exhaustive", Check)
            assert not exhaustive.value and not screen.request().exhaustive
            exhaustive.toggle()
            for _ in range(50):  # the label follows the box on the next refresh: wait for it, not a fixed time
                await pilot.pause(0.1)
                if "every combination measured" in str(search.render()):
                    break
            assert screen.request().exhaustive and "every combination measured" in str(search.render())
            exhaustive.toggle()
            for _ in range(50):
                await pilot.pause(0.1)
                if "guided" in str(search.render()):
                    break
            for e in (ev.SweepStarted(total=3, skipped=0, run_id="r", labels=labels, keys=keys),
                      ev.SearchGuided((("free-lunch", "predicted 41.3 days (37-64.3) at micro-batch 16"),
                                       ("ckpt", "predicted 48 days (39-70) at micro-batch 32"),
                                       ("naive", "predicted 100 days (80-150) at micro-batch 8")), basis="h100 rows")):
                screen.post_message(EngineEvent(e))
            await pilot.pause(0.2)
            table = screen.query_one("#trials", DataTable)
            assert cells(table, 0) == list(labels)  # in the guided order, as the sweep sent them
            assert cells(table, 2) == ["41.3 (37-64)", "48.0 (39-70)", "100 (80-150)"]  # before anything runs
            assert "3 predicted" in str(search.render())
            assert "free-lunch: predicted 41.3 days" in text(app, "#trial-line")
            for e in (ev.TrialStarted(keys[0], "free-lunch", 1, 3),
                      ev.TrialFinished(keys[0], "free-lunch", "measured", days=41.0, mfu=0.5, micro_batch=16,
                                       duration_s=60),
                      ev.TrialStarted(keys[1], "ckpt", 2, 3),
                      ev.TrialFinished(keys[1], "ckpt", "measured", days=45.0, mfu=0.45, micro_batch=32,
                                       duration_s=70),
                      ev.TrialFinished(keys[2], "naive", "cannot-win", message=why),
                      ev.SweepFinished(counts={"measured": 2, "cannot win": 1}, elapsed_s=130, best="free-lunch")):
                screen.post_message(EngineEvent(e))
            await pilot.pause(0.2)
            state = table.get_cell_at((2, 1))
            assert str(state) == "cannot-win" and "dim" in str(state.spans[0].style)
            assert "dim" in str(table.get_cell_at((2, 0)).spans[0].style)  # the row reads as not run
            assert str(table.get_cell_at((2, 6))) == "—"  # no time: nothing ran
            table.move_cursor(row=2)
            await pilot.pause(0.1)
            line = text(app, "#trial-line")
            assert "naive: cannot win: predicted 100 days" in line and "band's low end, 80 days" in line
            assert "guided: 2 measured, 1 cannot win (left unrun: exhaustive runs them) of 3" in str(search.render())
            assert "done" in text(app, "#progress-label")
            log = "\n".join(str(l.text) for l in screen.query_one("#log").lines)
            assert "[cannot-win] naive: cannot win" in log and "predictions from h100 rows" in log

    asyncio.run(go())


def test_benchmark_progress_moves_while_a_trial_runs_stops_when_paused_and_counts_what_was_resumed(db):
    """Issue 41, item 2: the engine's events posted as a sweep's worker posts them, on a clock of the test's
    own (no GPU, no waiting): the count includes what a resume took from the database; the time moves while a
    trial runs, in the progress line and the trial's row; the time left comes from the trials finished and
    the predictions (what cannot win costs nothing), none before the first; pausing drops it, and the end
    stops the clock (80x24, then 60x20)."""
    from textual.widgets import ProgressBar

    from engine.bench import events as ev
    from tui_planner.app.screens.bench import EngineEvent

    labels = ("free-lunch", "ckpt", "naive", "zero1")
    keys = tuple(f"pythia-1b|h100|1|1|{label}|measured" for label in labels)
    clock = [1000.0]

    async def post(pilot, screen, *events):
        for e in events:
            screen.post_message(EngineEvent(e))
        await pilot.pause(0.05)

    async def go():
        app = make_app(db)
        async with app.run_test(size=SIZE) as pilot:
            screen = await bench_on_clock(pilot, app, clock)
            bar = screen.query_one("#progress", ProgressBar)
            table = screen.query_one("#trials", DataTable)
            time_at = table.get_column_index("time")
            await post(pilot, screen, ev.SweepStarted(total=4, skipped=1, run_id="r", labels=labels, keys=keys),
                       ev.TrialSkipped(keys[0], "free-lunch", "already in the database (resumed)"),
                       ev.SearchGuided((("ckpt", "predicted 41.3 days (37-64.3) at micro-batch 16"),
                                        ("naive", "predicted 100 days (80-150) at micro-batch 8"),
                                        ("zero1", "predicted 44 days (30-70) at micro-batch 8"))))
            assert "1/4" in text(app, "#progress-label") and "1 resumed" in text(app, "#progress-label")
            assert bar.percentage == 0.25  # not 0% after a resume
            await post(pilot, screen, ev.TrialStarted(keys[1], "ckpt", 2, 4))
            clock[0] += 100  # a trial that has not finished: the time moves all the same
            screen._tick()
            line = text(app, "#progress-label")
            assert "ckpt 1m40s" in line and "1m40s in" in line and "time left: after a trial" in line
            assert str(table.get_cell_at((1, time_at))) == "1m40s"
            await pilot.resize_terminal(*NARROW)
            await post(pilot, screen, ev.TrialFinished(keys[1], "ckpt", "measured", days=40.0, mfu=0.5,
                                                       micro_batch=16, duration_s=100))
            # naive cannot beat 40 days even at its band's low end (80): only zero1 is left to run
            assert "2/4" in text(app, "#progress-label") and "~1m40s left" in text(app, "#progress-label")
            await post(pilot, screen, ev.TrialFinished(keys[2], "naive", "cannot-win", message="cannot win"),
                       ev.TrialStarted(keys[3], "zero1", 4, 4))
            clock[0] += 40
            screen._tick()
            assert "3/4" in text(app, "#progress-label") and "~1m00s left" in text(app, "#progress-label")
            clock[0] += 70  # past the mean trial: how much longer is not known, and nothing is left after it
            screen._tick()
            assert "last trial" in text(app, "#progress-label") and "left" not in text(app, "#progress-label")
            app.sweep_running = lambda: True  # as while the sweep's worker runs
            app.stop_sweep = lambda now: None
            await pilot.press("p")
            screen._tick()
            line = text(app, "#progress-label")
            assert "pausing after this trial" in line and "left" not in line and "zero1 1m50s" in line
            await post(pilot, screen, ev.TrialFinished(keys[3], "zero1", "measured", days=45.0, mfu=0.4,
                                                       micro_batch=8, duration_s=75),
                       ev.SweepFinished(counts={"measured": 2, "cannot win": 1, "resumed": 1}, stopped=False,
                                        elapsed_s=215, best="ckpt, 40.0 days"))
            assert screen._ticker is None and bar.percentage == 1.0
            assert screen.progress.elapsed_s(clock[0] + 500) == screen.progress.elapsed_s(clock[0])  # stopped
            assert str(table.get_cell_at((3, time_at))) == "1m15s"

    asyncio.run(go())


def test_benchmark_line_counts_the_time_while_the_sweep_starts_and_keeps_a_refusal(db, tmp_path, monkeypatch):
    """Issue 38, item 4: before its first event a sweep probes the GPUs, predicts every combination and checks
    that DeepSpeed imports (tens of seconds on a GPU machine), and the line read 'starting… 0s' all that time
    (scripts/app_bench_pilot.py saw it stand still). It counts the time since r each second, on the screen's
    own ticker; a refusal ends the count and stays."""
    import threading

    from engine.bench import sweep
    from engine.data.errors import PlannerError

    release = threading.Event()

    def starting(req, on_event, stop, pause, store):  # the probe and the predictions, then a refusal
        release.wait(30)
        raise PlannerError("asked for 2 GPUs on this machine but it has 1")

    monkeypatch.setattr(sweep, "run_sweep", starting)
    clock = [1000.0]

    async def go():
        app = make_app(db)
        async with app.run_test(size=SIZE) as pilot:
            screen = await bench_on_clock(pilot, app, clock)
            screen.query_one("#b-db", Input).value = str(tmp_path / "starting.duckdb")
            await pilot.press("escape", "r")
            assert "starting… 0s" in text(app, "#progress-label")
            clock[0] += 7
            await pilot.pause(1.3)  # the screen's ticker, each second
            assert "starting… 7s" in text(app, "#progress-label")
            release.set()
            for _ in range(100):
                await pilot.pause(0.1)
                if app.sweep.worker.is_finished and screen.write_cursor is None:
                    break
            line = text(app, "#progress-label")
            assert "it has 1" in line and "starting" not in line and screen._ticker is None
            clock[0] += 5
            await pilot.pause(1.3)
            assert text(app, "#progress-label") == line

    asyncio.run(go())


def test_stopping_a_sweep_is_k_asks_first_logs_one_plain_line_and_counts_what_is_left(db):
    """Issue 41, items 12 and 13: k (not x, which exports on the other screens) asks before it kills the
    running trial; the killed trial's traceback stays out of
    the log, one line says what was stopped and that a resume runs it again from its start; the counts
    name what was not run yet (was 'nothing to run of 13' with 12 queued)."""
    from engine.bench import events as ev
    from tui_planner.app.screens.bench import EngineEvent

    labels = ("free-lunch", "ckpt", "naive", "zero1")
    keys = tuple(f"pythia-1b|h100|1|1|{label}|measured" for label in labels)
    clock = [1000.0]
    stops = []

    async def go():
        app = make_app(db)
        async with app.run_test(size=SIZE) as pilot:
            screen = await bench_on_clock(pilot, app, clock)
            app.sweep_running = lambda: True  # as while the sweep's worker runs
            app.stop_sweep = lambda now: stops.append(now)
            for e in (ev.SweepStarted(total=4, skipped=1, run_id="r", labels=labels, keys=keys),
                      ev.TrialSkipped(keys[0], "free-lunch", "already in the database (resumed)"),
                      ev.TrialStarted(keys[1], "ckpt", 2, 4)):
                screen.post_message(EngineEvent(e))
            await pilot.pause(0.1)
            clock[0] += 45
            await pilot.press("x")  # x exports elsewhere: here it kills nothing
            assert type(app.screen).__name__ == "BenchScreen"
            await pilot.press("k")
            assert type(app.screen).__name__ == "Confirm" and stops == []
            question = str(app.screen.query_one(Static).render())
            assert "ckpt (45s in)" in question and "again from its start" in question
            await pilot.press("n")
            assert stops == [] and type(app.screen).__name__ == "BenchScreen"
            await pilot.press("k", "y")
            assert stops == [True]
            for e in (ev.Log(keys[1], "Traceback (most recent call last):"),
                      ev.Log(keys[1], "torch.distributed.elastic.multiprocessing.api.SignalException: Process 7 got "
                                      "signal: 15"),
                      ev.TrialFinished(keys[1], "ckpt", "stopped", message="stopped by the user", duration_s=45),
                      ev.SweepFinished(counts={"resumed": 1}, stopped=True, elapsed_s=50)):
                screen.post_message(EngineEvent(e))
            await pilot.pause(0.1)
            log = [str(line.text) for line in screen.query_one("#log").lines]
            assert log == ["[stopped] ckpt: stopped by you after 45s: not saved, r runs it again from its start"]
            search = str(screen.query_one("#search", Static).render())
            assert "1 resumed, 3 not run yet of 4" in search and "nothing to run" not in search
            assert "r resumes the 3 left" in text(app, "#progress-label")

    asyncio.run(go())


def test_quitting_during_a_sweep_asks_then_stops_every_trial(db, tmp_path):
    async def go():
        app = make_app(db, presets=(str(FIXTURES / "tiny"),))
        async with app.run_test(size=SIZE) as pilot:
            screen = await benchmark_screen(pilot, app)
            screen.query_one("#b-model", Select).value = "tiny-neox"
            screen.query_one("#b-db", Input).value = str(tmp_path / "q.duckdb")
            await pilot.press("escape", "r")
            for _ in range(300):
                await pilot.pause(0.1)
                if screen.current is not None:
                    break
            assert app.sweep_running()
            for _ in range(100):  # the trial process under torchrun
                await pilot.pause(0.1)
                trials = [p for p in descendants(os.getpid()) if "engine.bench.trial" in cmdline(p)]
                if trials:
                    break
            assert trials
            await pilot.press("q")
            await pilot.pause(0.2)
            assert type(app.screen).__name__ == "Confirm" and app.sweep_running()
            await pilot.press("n")
            assert app.sweep_running()
            await pilot.press("q", "y")
            for _ in range(300):
                await pilot.pause(0.1)
                if not app.is_running:
                    break
        return app, trials

    app, trials = asyncio.run(go())
    assert app.sweep.stop.is_set() and app.sweep.worker.is_finished
    left = [p for p in trials if Path(f"/proc/{p}").exists() and "engine.bench.trial" in cmdline(p)]
    assert not left, f"trial processes left running: {left}"
    with Store.open(tmp_path / "q.duckdb", read_only=True) as s:
        assert s.runs()[0]["status"] in ("stopped", "done")


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


# --- snapshots of the main screens at 80x24 ---------------------------------------------------------


@pytest.fixture
def here(db, monkeypatch) -> Path:
    """The fixture database by a relative name, so the path on screen is the same on every run."""
    monkeypatch.chdir(db.parent)
    return Path(db.name)


def _snap(snap_compare, db, press=(), **kw):
    app = make_app(db, **kw)

    async def settle(pilot):
        await ranked(pilot, app)
        await pilot.press(*press)
        await pilot.pause(0.3)
        await app.workers.wait_for_complete()
        await pilot.pause(0.3)
        await pilot.wait_for_scheduled_animations()

    return snap_compare(app, terminal_size=SIZE, run_before=settle)


def test_snapshot_plan(snap_compare, here):
    assert _snap(snap_compare, here)


def test_snapshot_plan_light_theme(snap_compare, here):
    assert _snap(snap_compare, here, light=True)


def test_snapshot_chart(snap_compare, here):
    assert _snap(snap_compare, here, press=("2", "right", "right"))


def test_snapshot_results(snap_compare, here):
    assert _snap(snap_compare, here, press=("4",))


def test_snapshot_help(snap_compare, here):
    assert _snap(snap_compare, here, press=("question_mark",))


def test_snapshot_plan_own_run(snap_compare, here):
    """The run's fields filled at 80x24: tokens typed, the batch and sequence the model's own."""
    from engine.data.runs import RunFlags

    assert _snap(snap_compare, here, run=RunFlags(tokens=100e9))


# --- the real console command, in a terminal --------------------------------------------------------


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_console_command_in_tmux_as_a_person_would(db, tmp_path):
    exe = Path(sys.executable).with_name("tui-planner")
    assert exe.exists(), "the console script is installed with the package"
    name = f"tp{os.getpid()}"
    env_cmd = f"XDG_CONFIG_HOME={tmp_path} {exe} --db {db}"
    subprocess.run(["tmux", "new-session", "-d", "-s", name, "-x", "80", "-y", "24", env_cmd], check=True)

    def screen() -> str:
        return subprocess.run(["tmux", "capture-pane", "-p", "-t", name], capture_output=True, text=True).stdout

    def wait_for(needle: str, timeout: float = 20) -> str:
        end = time.time() + timeout
        while time.time() < end:
            shown = screen()
            if needle in shown:
                return shown
            time.sleep(0.2)
        raise AssertionError(f"{needle!r} never appeared; the screen:\n{screen()}")

    try:
        shown = wait_for("Buy")
        assert "pythia-1b" in shown and "GPUs" in shown
        subprocess.run(["tmux", "send-keys", "-t", name, "]", "]"], check=True)
        wait_for("$70,000")
        subprocess.run(["tmux", "send-keys", "-t", name, "2"], check=True)
        wait_for("Pareto")
        subprocess.run(["tmux", "send-keys", "-t", name, "q"], check=True)
        end = time.time() + 10
        while time.time() < end and subprocess.run(["tmux", "has-session", "-t", name],
                                                    capture_output=True).returncode == 0:
            time.sleep(0.2)
        assert subprocess.run(["tmux", "has-session", "-t", name], capture_output=True).returncode != 0, "q quits"
    finally:
        subprocess.run(["tmux", "kill-session", "-t", name], capture_output=True)


def test_a_measured_trial_shows_and_exports_its_training_settings(db, tmp_path):
    with Store.open(db, read_only=True) as s:
        trial = s.query("SELECT trial_id FROM trials WHERE source = 'measured' AND days IS NOT NULL AND "
                        "failure_kind IS NULL AND model = 'pythia-1b' ORDER BY days LIMIT 1")[0]["trial_id"]

    async def go():
        app = make_app(db)
        async with app.run_test(size=SIZE) as pilot:
            app.push_screen(TrialDetail(trial))
            await pilot.pause(0.8)
            settings = str(app.screen.query_one("#detail-recipe", Static).render())
            assert "per_device_train_batch_size" in settings and "gradient_accumulation_steps" in settings
            await pilot.press("x")
            await pilot.pause(0.3)
            await pilot.press(*str(tmp_path / "out"), "enter")
            for _ in range(50):
                await pilot.pause(0.1)
                if (tmp_path / "out" / "plan.json").exists():
                    break
            assert {"training_args.json", "plan.json", "launch.sh", "EXPLAIN.txt"} <= {
                p.name for p in (tmp_path / "out").iterdir()}

    asyncio.run(go())


def test_verdict_on_a_predicted_winner_says_so_with_its_band():
    s = st.PlanState(model="m", budget_usd=100_000, deadline_days=60)
    lines = st.verdict([_row("rtx6000ada", 4, 39_824, 21.3, source="predicted", days_low=18.0, days_high=26.0)], s)
    assert "21.3 days (18-26)" in lines[0] and "meets the deadline even at its band's top" in lines[0]
    assert "predicted, not measured" in lines[1] and "implausible" not in lines[1]


def test_quitting_cancels_the_exit_watchdog(db):
    async def go():
        app = make_app(db)
        async with app.run_test(size=SIZE) as pilot:
            await ranked(pilot, app)
            app._terminate()  # what SIGTERM or SIGHUP runs
            for _ in range(50):
                await pilot.pause(0.1)
                if not app.is_running:
                    break
        return app

    app = asyncio.run(go())
    assert app._watchdog is not None and app._watchdog.finished.is_set()  # cancelled: it will not fire


def test_plan_shows_systems_bands_dated_prices_and_the_override_that_fixes_a_stale_one(db):
    async def go():
        app = make_app(db, today=dt.date(2028, 1, 1))  # every shipped price is then older than 12 months
        async with app.run_test(size=SIZE) as pilot:
            await ranked(pilot, app)
            screen = app.screen
            table = screen.query_one("#ranking", DataTable)
            first = app.ranking.rows[0]
            assert first["system"] and first["price_stale"] and first["deadline_verdict"] == "met"
            assert str(table.get_cell_at((0, 2))).strip() == first["system_short"]
            assert str(table.get_cell_at((0, 3))).strip().endswith("°")  # stale: marked where the cost is
            assert "-" in str(table.get_cell_at((0, 4)))  # a prediction shows its band
            assert not any(r["system"] is None for r in screen.option_rows)  # only systems that exist
            option = text(app, "#option")
            assert fmt_date(first["gpu_price_date"]) in option and "stale" in option
            verdict = text(app, "#verdict")
            assert "in a" in verdict and "over 12 months old" in verdict and f"{first['gpu']}=USD" in verdict
            await pilot.press("dollar_sign")  # every price with its date and source
            await pilot.pause(0.3)
            assert type(app.screen).__name__ == "PricesScreen"
            listing = str(app.screen.query_one("#price-list Static", Static).render())
            assert "ws4" in listing and "stale" in listing and "2026-" in listing
            await pilot.press("escape")
            # today's price of the system, typed in the Prices field, replaces the stale one
            system = first["system"]
            await pilot.press("e", "tab", "tab", "tab", "tab", *f"{system}=1000", "enter")
            await ranked(pilot, app, price_overrides=((system, 1000.0),))
            same = next(r for r in app.ranking.rows if r["gpu"] == first["gpu"] and r["num_gpus"] == first["num_gpus"])
            assert same["hardware_cost_usd"] == first["num_gpus"] * first["gpu_price_usd"] + 1000
            assert not same["system_price_stale"] and same["gpu_price_stale"]

    asyncio.run(go())


def fmt_date(d) -> str:
    return d.isoformat()


# --- your run: tokens, batch, sequence length (engine/data/runs.py) --------------------------------


OLMO = ROOT / "presets" / "configs" / "olmo-1b.json"  # a config.json no shipped preset holds


def own_tokens(presets, model_id: str) -> float:
    from engine.data.runs import tokens

    return float(tokens(presets.model(model_id)))


def days_by_option(app: PlannerApp) -> dict[tuple[str, int], float]:
    return {(r["gpu"], r["num_gpus"]): r["days"] for r in app.ranking.rows if r["days"] is not None}


async def ranked_on(pilot, app: PlannerApp, model_id: str, seconds: float = 60) -> None:
    """Wait until the ranking of the state the keys asked for is on `model_id` (a run the database has no
    rows of is predicted first: a second or more on a busy machine)."""
    for _ in range(int(seconds / 0.1)):
        await pilot.pause(0.1)
        r = app.ranking
        if r is not None and r.state == app.state and r.model is not None and r.model.id == model_id:
            return
    raise AssertionError(f"never ranked on {model_id}: {app.ranking and app.ranking.error}")


@pytest.mark.parametrize("typed, value", [("100e9", 100e9), ("100B", 100e9), ("100b", 100e9), ("1.5T", 1.5e12),
                                          ("300,000,000,000", 3e11), ("", None), ("  ", None)])
def test_tokens_parse_as_people_type_them(typed, value):
    assert st.parse_tokens(typed) == value


@pytest.mark.parametrize("typed", ["lots", "0", "-1B", "1e16", "nan", "inf", "100x"])
def test_bad_tokens_say_what_is_wrong(typed):
    with pytest.raises(Exception, match="tokens: .* is not a number above 0"):
        st.parse_tokens(typed)


def test_batch_and_sequence_are_whole_numbers_and_tokens_read_back_exactly():
    assert st.parse_batch("512") == 512 and st.parse_batch("1k") == 1000 and st.parse_batch("") is None
    assert st.parse_seq_len("4096") == 4096 and st.parse_seq_len("") is None
    for bad in ("2.5", "0", "seq"):
        with pytest.raises(Exception, match="not a whole number"):
            st.parse_batch(bad)
    with pytest.raises(Exception, match="sequence"):
        st.parse_seq_len(str(2**23))
    for value in (3e11, 1.5e12, 52.5e9, 299_892_736_000.0, 600_078_336_000.0, 1_234_567.0, 100.0):
        assert st.parse_tokens(st.tokens_text(value)) == value
    assert st.tokens_text(3e11) == "300B" and st.tokens_text(None) == ""


def test_tokens_nudge_doubles_the_steps_and_keeps_the_model():
    from engine.data.runs import RunFlags

    presets = load_presets(include_user=False)
    s = st.PlanState(model="pythia-1b")
    _, own = st.run_model(presets, s)
    twice = st.nudge_tokens(s, own, 2)
    assert twice.run.tokens == 2 * own_tokens(presets, "pythia-1b")
    _, on_run = st.run_model(presets, twice)
    assert on_run.id == "pythia-1b" and on_run.training.steps == 2 * own.training.steps
    req = twice.request(on_run)
    assert req.model == "pythia-1b" and req.steps == 2 * own.training.steps
    tiny = st.nudge_tokens(s, own, 1e-12)  # never less than one step
    assert st.run_model(presets, tiny)[1].training.steps == 1
    _, other = st.run_model(presets, st.with_seq_len(s, 4096))
    assert other.id == "pythia-1b+b512s4096" and other.seq_len == 4096  # the same tokens a step
    # the command line's --steps and --batch-tokens, as the fields hold them: the same model
    flags = st.plain_run(presets, "pythia-1b", RunFlags(steps=1000, batch_tokens=2**20, precision="bf16"))
    assert flags.steps is None and flags.batch_tokens is None and flags.precision == "bf16"
    assert st.run_model(presets, st.PlanState(model="pythia-1b", run=flags))[1] == \
        st.run_model(presets, st.PlanState(model="pythia-1b", run=RunFlags(steps=1000, batch_tokens=2**20,
                                                                          precision="bf16")))[1]


def test_typing_tokens_scales_the_days_and_t_doubles_them(db):
    async def go():
        app = make_app(db)
        async with app.run_test(size=SIZE) as pilot:
            await ranked(pilot, app)
            before = days_by_option(app)
            own = own_tokens(app.presets, "pythia-1b")
            assert "300B tokens: 143,000 steps of 1,024 x 2,049" in text(app, "#run")
            await pilot.press("e", "shift+tab", "shift+tab", "shift+tab")  # budget, then up to the run
            assert app.screen.query_one("#tokens", Input).has_focus
            await pilot.press(*st.tokens_text(2 * own), "enter")
            await ranked(pilot, app)
            assert app.state.run.tokens == 2 * own and app.ranking.model.id == "pythia-1b"
            assert app.ranking.store is None  # the database's rows: no predictions made
            after = days_by_option(app)
            assert after.keys() == before.keys()
            assert all(after[k] == pytest.approx(2 * before[k], rel=1e-12) for k in before)
            assert "600B tokens: 286,000 steps" in text(app, "#run")
            await pilot.press("t")  # twice again
            await ranked(pilot, app)
            assert all(days_by_option(app)[k] == pytest.approx(4 * before[k], rel=1e-12) for k in before)
            assert app.screen.query_one("#tokens", Input).value == st.tokens_short(4 * own)  # as the run line
            await pilot.press("T", "T")
            await ranked(pilot, app)
            assert all(days_by_option(app)[k] == pytest.approx(before[k], rel=1e-12) for k in before)
            await pilot.press("2")  # the chart's title says which run its days are for
            await pilot.pause(0.2)
            assert "300B tokens: 143,000 steps" in text(app, "#chart-run")

    asyncio.run(go())


def test_bad_tokens_show_an_error_beside_the_fields_that_clears_when_corrected(db):
    async def go():
        app = make_app(db)
        async with app.run_test(size=SIZE) as pilot:
            await ranked(pilot, app)
            box = app.screen.query_one("#tokens", Input)
            await pilot.press("e", "shift+tab", "shift+tab", "shift+tab", *"lots")
            await pilot.pause(0.2)
            assert box.has_class("-bad") and "tokens: 'lots' is not a number" in text(app, "#field-note")
            assert app.state.run.tokens is None and "Buy" in text(app, "#verdict")  # the last good plan stays
            await pilot.press(*["backspace"] * 4, *"100B")
            assert not box.has_class("-bad") and "is not a number" not in text(app, "#field-note")
            assert app.state.run.tokens is None  # typed, not applied
            await pilot.press("enter")
            await ranked(pilot, app)
            assert app.state.run.tokens == 100e9 and "Buy" in text(app, "#verdict")
            assert "100B tokens" in text(app, "#run")
            # a run the model cannot have is said as it is typed
            await pilot.press("e", "shift+tab", "shift+tab", *"0")
            await pilot.pause(0.2)
            assert app.screen.query_one("#batch", Input).has_class("-bad")
            assert "batch: '0'" in text(app, "#field-note")

    asyncio.run(go())


def test_a_sequence_length_ranks_another_model_on_predictions_made_for_it(db):
    async def go():
        app = make_app(db)
        async with app.run_test(size=SIZE) as pilot:
            await ranked(pilot, app)
            await pilot.press("e", "shift+tab", *"4096", "enter")
            await ranked_on(pilot, app, "pythia-1b+b512s4096")
            result = app.ranking
            assert app.state.model == "pythia-1b" and app.state.run.seq_len == 4096
            rows = [r for r in result.rows if r["days"] is not None]
            assert rows and {r["source"] for r in rows} == {"predicted"} and result.store is not None
            assert "pythia-1b+b512s4096" in text(app, "#title")
            assert "of 512 x 4,096" in text(app, "#run")
            assert app.screen.query_one("#batch", Input).placeholder == "(512 seqs)"  # the same tokens a step
            store = result.store
            await pilot.press("t")  # its length: no new predictions, the same store
            await ranked_on(pilot, app, "pythia-1b+b512s4096")
            assert app.ranking.store is store and app.run_stores == {"pythia-1b+b512s4096": store}
            await pilot.press("enter")  # the predicted option's trial, read from where it was ranked
            await pilot.pause(0.5)
            assert isinstance(app.screen, TrialDetail)
            body = str(app.screen.query_one("#detail-body", Static).render())
            assert "pythia-1b+b512s4096" in body and "512x4096" in body
            await pilot.press("escape", "e", "shift+tab", "shift+tab", *"256")  # a batch applies on enter
            await pilot.pause(0.1)
            assert app.state.run.batch is None and "of 512 x 4,096" in text(app, "#run")
            await pilot.press("enter")
            await ranked_on(pilot, app, "pythia-1b+b256s4096")
            assert (app.state.run.batch, app.state.run.seq_len) == (256, 4096)
            assert "of 256 x 4,096" in text(app, "#run")

    asyncio.run(go())


def test_app_opens_on_a_config_json_and_a_run_from_the_command_line(db):
    from engine.data.errors import PlannerError
    from engine.data.runs import RunFlags

    async def go():
        app = make_app(db, model=str(OLMO), run=RunFlags(tokens=50e9, precision="bf16"))
        async with app.run_test(size=SIZE) as pilot:
            await ranked_on(pilot, app, "olmo-1b")
            assert app.state.model == "olmo-1b" and "olmo-1b" in app.presets.models
            assert app.screen.query_one("#model", Select).value == "olmo-1b"
            assert app.screen.query_one("#tokens", Input).value == "50B"
            assert any(r["days"] is not None and r["source"] == "predicted" for r in app.ranking.rows)
            assert "50B tokens:" in text(app, "#run") and "Buy" in text(app, "#verdict")

    asyncio.run(go())
    with pytest.raises(PlannerError, match="image model"):
        make_app(db, model="vit-large", run=RunFlags(tokens=1e9))
    with pytest.raises(PlannerError):
        make_app(db, model="no/such/config.json")


def test_an_own_config_is_named_as_it_says_its_sequence_limit_is_said_and_results_explain_no_trials(db, tmp_path):
    """Issue 41, item 11: a config.json in a folder named for nothing (run-7/config.json) is the model its
    `_name_or_path` names; a sequence past its max_position_embeddings is said with the limit (rotary: planned);
    Results, filtered to it, says why it has no trial and how to measure it."""
    import json

    from engine.data.runs import RunFlags

    config = json.loads(OLMO.read_text()) | {"_name_or_path": "student/olmo-1b-2k", "num_hidden_layers": 12}
    (tmp_path / "run-7").mkdir()
    path = tmp_path / "run-7" / "config.json"
    path.write_text(json.dumps(config))

    async def go():
        app = make_app(db, model=str(path), run=RunFlags(tokens=100e9, seq_len=4096))
        async with app.run_test(size=SIZE) as pilot:
            await ranked_on(pilot, app, "olmo-1b-2k+b256s4096")
            assert app.screen.query_one("#model", Select).value == "olmo-1b-2k" and "run-7" not in text(app, "#title")
            assert "sequence 4,096 is past the model config's max_position_embeddings (2,048): planned as asked" in \
                " ".join(text(app, "#verdict").split())
            await pilot.press("4")
            await pilot.pause(0.3)
            app.screen.query_one("#f-model", Select).value = "olmo-1b-2k"
            for _ in range(50):
                await pilot.pause(0.1)
                if "No trial" in text(app, "#results-words"):
                    break
            words = " ".join(text(app, "#results-words").split())
            assert "0 trials" in text(app, "#results-status")
            assert "No trial of olmo-1b-2k in this database: nobody measured it here" in words
            assert f"tui-planner bench --model {path} --db mine.duckdb" in words and "--write" in words

    asyncio.run(go())


def test_results_say_which_run_a_row_is_for_and_export_follows_the_plans_run(db, tmp_path):
    import json

    from engine.data.runs import RunFlags

    async def go():
        presets = load_presets(include_user=False)
        app = make_app(db, run=RunFlags(tokens=2 * own_tokens(presets, "pythia-1b")))
        async with app.run_test(size=SIZE) as pilot:
            await ranked(pilot, app)
            await pilot.press("4")
            await pilot.pause(0.5)
            screen = app.screen
            screen.query_one("#f-model", Select).value = "pythia-1b"
            screen.query_one("#f-source", Select).value = "measured"
            await pilot.pause(0.5)
            row = screen.rows[0]
            assert row["days"] is not None
            shown = text(app, "#results-run")
            assert row["training_run"] in shown and f"{row['steps']:,} steps" in shown
            await pilot.press("escape", "enter")
            await pilot.pause(0.8)
            assert isinstance(app.screen, TrialDetail)
            assert "600B tokens" in str(app.screen.query_one("#detail-recipe", Static).render())
            await pilot.press("x")
            await pilot.pause(0.3)
            await pilot.press(*str(tmp_path / "out"), "enter")
            for _ in range(50):
                await pilot.pause(0.1)
                if (tmp_path / "out" / "plan.json").exists():
                    break
        return row

    row = asyncio.run(go())
    plan = json.loads((tmp_path / "out" / "plan.json").read_text())
    assert plan["steps"] == 2 * row["steps"] and plan["days"] == pytest.approx(2 * row["days"])
    assert plan["run"].startswith("600B tokens")


def test_the_app_command_opens_on_a_config_and_its_run_or_says_why_not(db, monkeypatch, capsys):
    """`tui-planner app --model path/to/config.json --tokens ... --seq-len ...`, up to the app's first screen
    (run_app's PlannerApp.run is replaced: the screens are tested above); a run the model cannot have is an
    error before any screen, exit status 2."""
    from tui_planner import cli

    opened = []
    monkeypatch.setattr(PlannerApp, "run", lambda self: opened.append(self))
    assert cli.main(["app", "--db", str(db), "--model", str(OLMO), "--tokens", "100B", "--seq-len", "4096"]) == 0
    app = opened[0]
    assert app.initial.model == "olmo-1b" and app.initial.run.tokens == 100e9 and app.initial.run.seq_len == 4096
    _, on_run = st.run_model(app.presets, app.initial)
    assert on_run.id == "olmo-1b+b256s4096" and on_run.training.batch_size * on_run.seq_len == 2**20
    app.store.close()
    assert cli.main(["app", "--db", str(db), "--model", "vit-large", "--tokens", "1B"]) == 2
    assert "image model" in capsys.readouterr().err and len(opened) == 1


def test_a_model_added_on_the_plan_screen_is_one_to_benchmark_from_its_config(db, tmp_path, monkeypatch):
    """Issue 40: a model added with `a` is listed on the Benchmark screen (open before it came) and chosen
    there, and the sweep is asked for its config.json (`bench --model CONFIG`: no preset holds its id); on the
    CPU a model as small as the tiny ones is listed too, a large one is not."""
    import json

    from engine.bench import environment
    from engine.data.runs import model_for

    monkeypatch.setattr(environment, "probe", lambda: environment.Machine(host="here", torch="2"))  # no GPU
    big = tmp_path / "config.json"
    big.write_text(json.dumps(json.loads(OLMO.read_text()) | {"_name_or_path": "lab/olmo-9l", "num_hidden_layers": 9}))
    tiny = ROOT / "tests" / "fixtures" / "configs" / "llama.json"
    tiny_id = model_for(load_presets(include_user=False), str(tiny))[1].id

    async def add(pilot, app, path: Path, model_id: str) -> None:
        await pilot.press("1", "a")
        await pilot.pause(0.2)
        app.screen.query_one("#path", Input).value = str(path)
        await pilot.press("enter")
        await ranked_on(pilot, app, model_id)
        await pilot.press("3")

    async def go():
        app = make_app(db)
        async with app.run_test(size=SIZE) as pilot:
            await ranked(pilot, app)
            screen = await benchmark_screen(pilot, app, tries=200)
            device, model = screen.query_one("#b-device", Select), screen.query_one("#b-model", Select)
            device.value = "cuda"
            await pilot.pause(0.05)
            await add(pilot, app, big, "olmo-9l")
            assert app.screen is screen and model.value == "olmo-9l"
            assert screen.request().model == str(big.resolve())
            device.value = "cpu"
            await pilot.pause(0.05)
            assert model.value != "olmo-9l"  # a billion parameters: not on the CPU
            await add(pilot, app, tiny, tiny_id)
            assert model.value == tiny_id and screen.request().model == str(tiny.resolve())

    asyncio.run(go())


def test_a_adds_a_model_from_a_config_path_or_the_hugging_face_cache_named_as_its_config_says(db, tmp_path, monkeypatch):
    """Issue 40: `a` on the Plan screen asks for a config.json's path (→ completes it) or a model id in the local
    Hugging Face cache (offline); the model is then listed, planned and named by its `_name_or_path`, shown
    as text (never read as markup); a path that is neither is a message, not a traceback."""
    import json

    from tui_planner.app.completion import complete

    config = json.loads(OLMO.read_text()) | {"_name_or_path": "lab/[bold]olmo-12l", "num_hidden_layers": 12}
    (tmp_path / "runs" / "seven").mkdir(parents=True)
    path = tmp_path / "runs" / "seven" / "config.json"
    path.write_text(json.dumps(config))
    assert complete(str(tmp_path / "ru")) == str(tmp_path / "runs") + "/"
    assert complete(str(tmp_path / "runs" / "seven") + "/") == str(path)
    hub = tmp_path / "hub"
    snap = hub / "models--lab--olmo-6l" / "snapshots" / "0a1b2c"
    snap.mkdir(parents=True)
    (snap / "config.json").write_text(json.dumps(json.loads(OLMO.read_text()) | {"num_hidden_layers": 6}))
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    assert complete("lab/ol") == "lab/olmo-6l"

    async def go():
        app = make_app(db)
        async with app.run_test(size=SIZE) as pilot:
            await ranked(pilot, app)
            await pilot.press("a")
            await pilot.pause(0.2)
            box = app.screen.query_one("#path", Input)
            box.value = str(path)
            await pilot.press("enter")
            await ranked_on(pilot, app, "bold-olmo-12l")
            assert app.screen.query_one("#model", Select).value == "bold-olmo-12l"
            assert app.presets.model("bold-olmo-12l").config["num_hidden_layers"] == 12
            assert app.config_models["bold-olmo-12l"] == str(path.resolve())
            await pilot.press("a")
            await pilot.pause(0.2)
            app.screen.query_one("#path", Input).value = "lab/olmo-6l"
            await pilot.press("enter")
            await ranked_on(pilot, app, "olmo-6l")
            assert app.presets.model("olmo-6l").config["num_hidden_layers"] == 6
            await pilot.press("a")
            await pilot.pause(0.2)
            app.screen.query_one("#path", Input).value = "nobody/no-such-model"
            await pilot.press("enter")
            for _ in range(50):
                await pilot.pause(0.1)
                if any("no model of that id in the local Hugging Face cache" in str(n.message)
                       for n in app._notifications):
                    break
            else:
                raise AssertionError("no message for a model that is nowhere")
            assert app.state.model == "olmo-6l"

    asyncio.run(go())
