"""Numbers on the command line are checked as they are parsed: a value out of range is refused with exit
status 2 and a message naming the flag and its range (nothing runs), never turned into something else
(a timeout of 0 recording every trial as timed out, `nan` switching the timeout off, `--repetitions 0`
running 20, a price of 1e308 printing $inf). The app's typed values follow the same limits.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from textual.widgets import Static

from engine.data.errors import PlannerError
from engine.data.presets import load_presets
from engine.data.paths import shipped_db
from tui_planner.app import state as st
from tui_planner.cli import _parser, main

BENCH = ["bench", "--model", "tiny-neox", "--device", "cpu", "--db", "x.duckdb"]
RANK = ["rank", "--model", "pythia-1b", "--budget", "50000"]
VERIFY = ["verify", "some-export"]
EXPORT = ["export", "--model", "pythia-1b", "--out", "some-export"]
PREDICT = ["predict", "--model", "pythia-1b", "--gpu", "h100"]

SECONDS = "above 0 and at most 1e6 seconds"
WHOLE_1 = "a whole number, at least 1 and at most"
WHOLE_0 = "a whole number, at least 0 and at most"

# (command, flag, bad values, what the message says the range is, a good value and how it parses)
CASES = [
    (BENCH, "--timeout", ["0", "-1", "nan", "inf", "1e308", "ten"], SECONDS, "900", 900.0),
    (BENCH, "--repetitions", ["0", "-5", "2.5", "many"], WHOLE_1, "3", 3),
    (BENCH, "--verify-steps", ["-1", "x"], WHOLE_0, "0", 0),
    (BENCH, "--verify-accum", ["-2"], WHOLE_0, "4", 4),
    (BENCH, "--stop-after", ["0", "nan", "-60"], SECONDS, "3600", 3600.0),
    (BENCH, "--nodes", ["0", "-1", "1.5"], WHOLE_1, "1", 1),
    (VERIFY, "--steps", ["0", "-3"], WHOLE_1, "5", 5),
    (VERIFY, "--warmup", ["-1"], WHOLE_0, "0", 0),
    (VERIFY, "--tolerance", ["-0.1", "1.5", "nan", "inf"], "a share from 0 to 1", "0.05", 0.05),
    (VERIFY, "--timeout", ["0", "nan", "inf"], SECONDS, "60", 60.0),
    (RANK, "--budget", ["0", "-5", "inf", "nan", "1e308", "2e9"], "an amount above $0 and at most $1e9", "50000",
     50000.0),
    (RANK, "--deadline", ["0", "-1", "inf", "nan"], "above 0 and at most 1e6 days", "60", 60.0),
    (RANK, "--max-gpus", ["0", "-8", "eight"], WHOLE_1, "8", 8),
    (RANK, "--lifespan-years", ["0", "inf", "nan", "1000"], "above 0 and at most 100 years", "5", 5.0),
    (RANK, "--kwh-price", ["-0.1", "inf", "nan", "1e308"], "an amount from $0 to $100", "0", 0.0),
    (RANK, "--utilisation", ["0", "1.5", "nan", "-1"], "a share above 0 and at most 1", "0.5", 0.5),
    (RANK, "--price", ["h100=1e308", "h100=inf", "h100=nan", "h100=0", "h100=-5", "h100"],
     "GPU=USD", "h100=25000", [("h100", 25000.0)]),
    (PREDICT, "--num-gpus", ["0", "-2", "two"], WHOLE_1, "2", 2),
    (["results"], "--num-gpus", ["0", "-1"], WHOLE_1, "1", 1),
    (EXPORT, "--num-gpus", ["0"], WHOLE_1, "1", 1),
    (EXPORT, "--nodes", ["0", "-1"], WHOLE_1, "1", 1),
]


@pytest.mark.parametrize("command, flag, bad, range_text, good, parsed", CASES,
                         ids=[f"{c[0][0]} {c[1]}" for c in CASES])
def test_a_number_out_of_range_is_refused_naming_the_flag_and_the_range(capsys, command, flag, bad, range_text,
                                                                         good, parsed):
    for value in bad:
        assert main([*command, f"{flag}={value}"]) == 2, (flag, value)
        err = capsys.readouterr().err
        assert f"argument {flag}: " in err and range_text in err, (value, err)
        assert repr(value) in err  # what was typed, so it can be found and fixed
    args = _parser().parse_args([*command, flag, good])
    assert getattr(args, flag.lstrip("-").replace("-", "_")) == parsed


def test_a_price_out_of_range_says_the_range(capsys):
    assert main([*RANK, "--price", "h100=1e308"]) == 2
    assert "argument --price: the price in GPU=USD must be an amount above $0 and at most $1e9, not " \
           "'h100=1e308'" in capsys.readouterr().err


def test_good_numbers_still_rank_and_a_huge_price_never_prints_inf(capsys):
    assert main([*RANK, "--deadline", "60", "--max-gpus", "8", "--lifespan-years", "5", "--kwh-price", "0.15",
                 "--utilisation", "0.5", "--price", "h100=25000", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    h100 = next(r for r in rows if r["gpu"] == "h100" and r["num_gpus"] == 4)  # an HGX 4-GPU server
    base = load_presets().systems[h100["system"]].price.usd
    assert h100["hardware_cost_usd"] == pytest.approx(4 * 25000 + base)  # the price given was used
    assert all(r["energy_usd"] is not None for r in rows if r["days"] is not None)  # and the power price
    assert main([*RANK, "--price", "h100=999999999"]) == 0  # the largest price allowed still prints as a number
    out = capsys.readouterr().out
    assert "$inf" not in out and "$nan" not in out and "$4,000,0" in out


def test_good_counts_still_filter_predict_and_export(capsys, tmp_path):
    assert main(["results", "--num-gpus", "2", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows and {r["num_gpus"] for r in rows} == {2}
    assert main(["predict", "--model", "pythia-1b", "--gpu", "h200", "--num-gpus", "2", "--format", "json"]) == 0
    preds = json.loads(capsys.readouterr().out)
    assert preds and {p["num_gpus"] for p in preds} == {2}
    assert main(["export", "--model", "pythia-1b", "--gpu", "h100", "--num-gpus", "1", "--nodes", "1", "--out",
                 str(tmp_path / "p1b")]) == 0
    assert (tmp_path / "p1b" / "plan.json").exists()


# --- the app's typed values -------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["inf", "nan", "1e308", "-inf", "1e308k", "2e9", "0"])
def test_the_app_refuses_money_that_is_not_a_finite_amount(text):
    with pytest.raises(PlannerError, match=r"budget .*above \$0 and at most \$1e9"):
        st.parse_money(text, "budget")
    with pytest.raises(PlannerError, match=r"price of h100 .*at most \$1e9"):
        st.parse_prices(f"h100={text}", ["h100"])


@pytest.mark.parametrize("text, what, unit, range_text", [
    ("inf", "deadline", "days", "above 0 and at most 1e6 days"),
    ("nan", "deadline", "days", "above 0 and at most 1e6 days"),
    ("1e308", "deadline", "days", "above 0 and at most 1e6 days"),
    ("inf", "electricity price", "USD/kWh", "from 0 to 100 USD/kWh"),
    ("nan", "electricity price", "USD/kWh", "from 0 to 100 USD/kWh"),
    ("-1", "electricity price", "USD/kWh", "from 0 to 100 USD/kWh"),
])
def test_the_app_refuses_days_and_power_prices_out_of_range(text, what, unit, range_text):
    with pytest.raises(PlannerError) as e:
        st.parse_optional(text, what, unit)
    assert what in str(e.value) and range_text in str(e.value) and repr(text) in str(e.value)


def test_the_app_still_takes_good_values():
    assert st.parse_money("$1.2m", "budget") == 1.2e6 and st.parse_money("1e9", "budget") == 1e9
    assert st.parse_optional("0", "electricity price", "USD/kWh") == 0.0
    assert st.parse_optional("", "deadline", "days") is None
    assert st.parse_years("7", "lifespan") == 7.0
    with pytest.raises(PlannerError, match="lifespan must be above 0 and at most 100 years"):
        st.parse_years("inf", "lifespan")


def test_typing_inf_in_the_budget_says_why_and_keeps_the_plan():
    from tui_planner.app.app import PlannerApp

    async def go():
        app = PlannerApp(load_presets(include_user=False), shipped_db())
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.pause(0.3)
            before = app.state
            for text in ("inf", "nan", "1e308"):
                await pilot.press("escape", "e", *text)  # e: edit the budget, its text selected
                await pilot.pause(0.3)
                note = str(app.screen.query_one("#field-note", Static).render())  # said beside the field
                assert f"budget must be above $0 and at most $1e9, not '{text}'" in note, note
                # nothing typed applies before enter or leaving the field ("1e3" on the way to "1e308" neither)
                assert app.state == before
            await pilot.press("escape", "e", *"90k", "enter")
            await pilot.pause(0.3)
            assert app.state.budget_usd == 90_000

    asyncio.run(go())
