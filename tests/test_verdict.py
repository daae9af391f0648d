"""The verdict on a ranking: met, at risk or missed against the band; the fastest option and the best sure
one named when they differ; an extrapolated figure and an implausible paper figure said as such; prices
with their dates. Decided by engine/plan/verdict.py, worded by tui_planner/views.py."""

import datetime as dt

from engine.plan.uncertainty import AT_RISK, MET, MISSED, band, deadline_verdict
from engine.plan.verdict import decide
from tui_planner import views


def _row(gpu, n, cost, days, low=None, high=None, deadline=None, **kw):
    r = dict(gpu=gpu, num_gpus=n, system="ws4", system_name="4-GPU workstation", system_short="ws4",
             hardware_cost_usd=cost, days=days, days_low=low if low is not None else days,
             days_high=high if high is not None else days, cost_per_experiment_usd=cost * days / 1825,
             within_budget=True, within_deadline=True, pareto=True, source="measured", mfu=0.45,
             plausibility="ok", config="free-lunch", status="ok", extrapolated=None, paper_days=None,
             paper_mfu=None, paper_plausibility=None, gpu_price_usd=cost / n, gpu_price_date=dt.date(2026, 5, 1),
             gpu_price_source="a shop", gpu_price_stale=False, system_price_usd=0.0,
             system_price_date=dt.date(2026, 6, 1), system_price_source="a quote", system_price_stale=False,
             price_stale=False)
    r.update(kw)
    r["deadline_verdict"] = deadline_verdict(r["days_low"], r["days_high"], deadline)
    return r


def _text(lines):
    return " ".join(lines)


def test_band_and_the_three_deadline_verdicts():
    assert band({"days": 20.0, "days_low": 18.0, "days_high": 34.0}) == (18.0, 34.0)
    assert band({"days": 40.5, "days_low": None, "days_high": None}) == (40.5, 40.5)  # measured: no band
    assert band({"days": None}) == (None, None)
    assert deadline_verdict(18, 34, 60) == MET  # even the band's top is inside
    assert deadline_verdict(46, 83, 60) == AT_RISK  # the band straddles the deadline
    assert deadline_verdict(61, 90, 60) == MISSED  # even its bottom is past it
    assert deadline_verdict(18, 34, None) is None


def test_met_names_the_option_and_says_it_is_sure():
    rows = [_row("rtx6000ada", 4, 39_824, 25.2, 25.2, 43.3, deadline=60, source="predicted",
                 extrapolated="Ampere and Ada workstation and consumer"),
            _row("rtx6000ada", 2, 19_912, 50.3, 50.3, 86.6, deadline=60, source="predicted")]
    v = decide(rows, 60)
    assert v.outcome == MET and v.buy is rows[0] and v.fastest is rows[0] and v.runner_up is rows[1]
    text = _text(views.verdict_lines(v, "pythia-1b", 50_000, 60))
    assert "Buy 4 x RTX6000ADA in a 4-GPU workstation" in text and "25.2 days (25-43)" in text
    assert "meets the deadline even at its band's top" in text
    assert "extrapolated to Ampere and Ada workstation and consumer GPUs, a generation nobody measured" in text
    assert "Runner-up 2 x RTX6000ADA" in text and "at risk" in text  # what saving $19,912 risks
    assert "2026-05-01" in text and "a shop" in text  # the buy's prices, dated, with their source


def test_the_fastest_and_the_best_sure_one_when_they_differ():
    fast = _row("rtx5090", 2, 12_000, 22.6, 20.0, 36.0, deadline=30, source="predicted")
    sure = _row("h100nvl", 2, 74_000, 23.3, 22.0, 27.0, deadline=30, source="predicted")
    v = decide([fast, sure], 30)
    assert v.outcome == MET and v.buy is sure and v.fastest is fast
    text = _text(views.verdict_lines(v, "m", 100_000, 30))
    assert "Buy 2 x H100NVL" in text and "Fastest" in text and "2 x RTX5090" in text and "at risk" in text


def test_at_risk_and_missed_say_what_meeting_it_would_cost():
    risky = _row("rtx6000ada", 1, 12_956, 52.9, 46.3, 83.3, deadline=60, source="predicted")
    dear = _row("h100", 8, 285_000, 5.2, 4.6, 8.1, deadline=60, within_budget=False, source="predicted")
    v = decide([risky, dear], 60)
    assert v.outcome == AT_RISK and v.fastest is risky and v.to_meet is dear
    text = _text(views.verdict_lines(v, "pythia-2.8b", 20_000, 60))
    assert "Deadline at risk" in text and "band reaches 83" in text and "past 60" in text
    assert "Meeting the deadline for sure needs $285,000" in text
    late = _row("rtx3090", 2, 7_500, 257.0, 257.0, 443.0, deadline=120, source="predicted")
    v = decide([late, dear], 120)
    assert v.outcome == MISSED and "Nothing meets the deadline" in _text(views.verdict_lines(v, "m", 20_000, 120))


def test_an_implausible_paper_figure_is_said_beside_never_as_the_figure():
    r = _row("a6000", 8, 52_400, 29.6, 29.6, 51.0, deadline=60, source="predicted", paper_days=22.0,
             paper_mfu=0.81, paper_plausibility="implausible")
    text = _text(views.verdict_lines(decide([r], 60), "pythia-1b", 60_000, 60))
    assert "29.6 days (30-51)" in text and "paper: 22.0 days, implies 81% of peak (implausible)" in text


def test_nothing_within_budget_and_nothing_at_all():
    r = _row("h100", 8, 285_000, 5.2, deadline=60, within_budget=False)
    v = decide([r], 60)
    assert v.outcome == "over budget" and v.cheapest is r and v.to_meet is r
    assert "Nothing fits the budget" in _text(views.verdict_lines(v, "m", 1_000, 60))
    unsold = _row("h100", 1, 0, 40.5, system=None)  # no system sells it: not an option
    assert decide([unsold], 60).outcome == "no results"


def test_a_stale_price_says_how_to_give_todays():
    r = _row("rtx3090", 2, 7_500, 100.0, deadline=120, gpu_price_stale=True, price_stale=True)
    text = _text(views.verdict_lines(decide([r], 120), "m", 20_000, 120))
    assert "--price rtx3090=USD" in text and "Prices field" in text and "presets" in text
    brief = _text(views.verdict_lines(decide([r], 120), "m", 20_000, 120, brief=True))
    assert "rtx3090=USD" in brief and "$ lists every price" in brief


def test_a_plausible_paper_figure_slower_than_the_prediction_widens_the_band():
    """The paper's timer ran ahead of the GPU: its plausible figure is if anything short, so a prediction
    faster than it cannot call the deadline sure below it."""
    r = {"days": 81.0, "days_low": 75.0, "days_high": 111.0, "source": "predicted", "paper_days": 114.0,
         "paper_plausibility": "ok"}
    assert band(r) == (75.0, 114.0)
    assert band(dict(r, paper_plausibility="implausible")) == (75.0, 111.0)  # never an implausible one
    assert band(dict(r, source="measured", days_low=None, days_high=None)) == (81.0, 81.0)  # a measurement stands


# --- issue 39: the intervals in the verdict ---------------------------------------------------------------


def test_a_cheaper_option_whose_interval_overlaps_the_picks_is_as_good_a_bet():
    pick = _row("h100nvl", 8, 254_000, 5.8, 5.1, 6.7, source="predicted")
    close = _row("h100pcie", 8, 226_000, 6.2, 5.4, 7.1, source="predicted")  # each figure inside the other's band
    far = _row("a100pcie", 8, 110_000, 13.6, 11.0, 17.0, source="predicted")  # cheaper still, but clearly slower
    v = decide([pick, close, far], None)
    assert v.buy is pick and v.as_good is close
    text = _text(views.verdict_lines(v, "m", 300_000, None))
    assert "As good a bet[/]: 8 x H100PCIE" in text and "$28,000 less" in text
    # a cheaper option just outside the pick's interval is not as good a bet
    off = _row("h100pcie", 8, 226_000, 6.8, 6.0, 7.7, source="predicted")
    assert decide([pick, off, far], None).as_good is None
    # against a deadline, one that only puts it at risk is not as good a bet where the pick meets it
    risky = _row("h100pcie", 8, 226_000, 6.2, 5.4, 7.1, deadline=7.0, source="predicted")
    sure = _row("h100nvl", 8, 254_000, 5.8, 5.1, 6.7, deadline=7.0, source="predicted")
    assert decide([sure, risky], 7.0).as_good is None
    # a measured pick has no interval: nothing is as good a bet on the strength of overlap
    measured = _row("h100", 8, 285_000, 5.1)
    assert decide([measured, close], None).as_good is None


def test_the_verdict_names_the_cell_whose_measurement_narrows_the_pick_most():
    from engine.data.presets import load_presets
    from engine.plan.uncertainty import measured_arch_cells, narrowing
    from engine.predict.intervals import FAMILY, OTHER_COUNT, OTHER_GPU, THIS_COUNT, Intervals

    presets = load_presets(include_user=False)
    cal = Intervals({THIS_COUNT: 0.05, OTHER_COUNT: 0.1, OTHER_GPU: 0.2, FAMILY: 0.4},
                    {THIS_COUNT: 50, OTHER_COUNT: 50, OTHER_GPU: 50, FAMILY: 50})
    cells = measured_arch_cells([("pythia-1b", "h100", 1)], presets)
    assert cells == {("GPTNeoX", "h100", 1)}
    # a Hopper GPU nobody measured, 8 of them: one of them measured makes it 'this GPU, other count'
    row = _row("h100nvl", 8, 254_000, 5.8, 5.3, 6.4, source="predicted",
               interval_parts='{"model": 0.2, "generation": 0.0, "cap": 0.0}')
    nw = narrowing(row, "pythia-1b", presets, cells, cal)
    assert (nw["measure_gpu"], nw["measure_num_gpus"], nw["kind_after"]) == ("h100nvl", 1, OTHER_COUNT)
    assert nw["width_after"] < nw["width_now"]
    text = _text(views.verdict_lines(decide([dict(row, narrow=nw)], None), "pythia-1b", 300_000, None))
    assert "measure pythia-1b on 1 x H100NVL: 1.22x (this GPU, other count)" in text
    # an architecture nobody measured: one H100 (where our measurements are) takes it out of 'family only'
    llama = narrowing(dict(row, interval_parts='{"model": 0.4, "generation": 0.0, "cap": 0.0}'), "llama-3.2-1b",
                      presets, cells, cal)
    assert llama["kind_after"] == OTHER_COUNT and llama["width_after"] < llama["width_now"]
    # most of the width is the generation's: only measuring the pick itself narrows it
    rtx = _row("rtx6000ada", 1, 12_956, 101, 63, 161, source="predicted",
               interval_parts='{"model": 0.2, "generation": 0.5, "cap": 0.2}')
    nw = narrowing(rtx, "pythia-1b", presets, cells, cal)
    assert nw["width_after"] is None and nw["measure_gpu"] == "rtx6000ada"
    text = _text(views.verdict_lines(decide([dict(rtx, narrow=nw)], None), "pythia-1b", 300_000, None))
    assert "Only measuring the pick itself (1 x RTX6000ADA) narrows its interval" in text
    # a measured option: nothing to narrow
    assert narrowing(_row("h100", 8, 285_000, 5.1), "pythia-1b", presets, cells, cal) is None
    # a floor-bound pick (a small micro-batch) keeps the floor-bound width whatever is measured elsewhere: no
    # measurement promises it narrower than that
    from engine.predict.intervals import FLOOR_BOUND

    floored = Intervals({**cal.widths, FLOOR_BOUND: 0.25}, {**cal.cases, FLOOR_BOUND: 50})
    nw = narrowing(dict(row, interval_parts='{"model": 0.25, "generation": 0.0, "cap": 0.0}', floor_lift=1.6),
                   "pythia-1b", presets, cells, floored)
    assert nw["width_after"] is None  # 1 x H100NVL would give 'other count', but the floor's width stays
