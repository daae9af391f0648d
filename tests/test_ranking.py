"""Purchase ranking: the arithmetic against hand-computed cases, one honest figure per cell, systems that
exist, dated prices, the deadline against the band, and the edge cases."""

import datetime as dt
import json

import pytest

from conftest import FIXTURES
from engine.data.errors import PlannerError
from engine.data.presets import load_presets
from engine.plan.ranking import RankRequest, no_data_gpus, rank
from engine.data.store import Store, Trial
from tui_planner.cli import main

TODAY = dt.date(2026, 11, 24)


@pytest.fixture()
def presets():
    return load_presets(include_user=False)


def _t(gpu, n, days, source="measured", feasible=True, **kw):
    return Trial(model="pythia-1b", gpu=gpu, num_gpus=n, feasible=feasible, source=source, days=days,
                 free_lunch=True, sharding="none", activation_checkpointing=False, offloading=False,
                 micro_batch=8, grad_accum=1024 // (8 * n), **kw)


def _pred(gpu, n, days, low, high, **kw):
    return _t(gpu, n, days, source="predicted", days_low=low, days_high=high, basis="a fit", mfu=0.5,
              plausibility="ok", **kw)


@pytest.fixture()
def store():
    with Store.open(None) as s:
        s.add_trials([
            _t("rtx3090", 2, 100.0),                           # hand-checked below
            _t("rtx3090", 2, 300.0),                           # a slower setting of the same cell
            _t("rtx3090", 2, 80.0, source="paper-table1", mfu=0.5, plausibility="ok"),  # measured wins
            _pred("rtx6000ada", 4, 20.0, 19.0, 34.0),          # predicted wins over the paper's row
            _t("rtx6000ada", 4, 15.0, source="paper-table1", mfu=0.55, plausibility="ok"),
            _t("a6000", 4, 40.0, source="paper-table1", mfu=0.89, plausibility="implausible"),  # never ranked on
            _pred("a6000", 8, 30.0, 28.0, 50.0),
            _t("a6000", 8, 22.0, source="paper-table1", mfu=0.81, plausibility="implausible"),  # shown beside
            _t("a6000", 2, 72.0, source="paper-table1", mfu=0.55, plausibility="ok"),  # plausible: ranked on
            _t("a6000", 1, 9.0, source="paper-table1", mfu=1.4, plausibility="impossible"),  # refused everywhere
            _t("l40s", 1, None, feasible=False, failure_kind="refused"),  # a measurement the sweep refused
            _t("l40s", 4, None, feasible=False, failure_kind="oom"),  # infeasible at every setting
            _t("h100", 1, 40.5),                               # measured, but nobody sells one H100 SXM
            _pred("h100", 4, 10.0, 9.0, 16.0),
            _pred("rtx4090", 4, 60.0, 55.0, 90.0),             # four open-air cards: no system takes them
            _pred("rtx4090", 2, 110.0, 100.0, 180.0),
            _pred("rtxpro6000q", 4, 25.0, 24.0, 41.0),
        ])
        yield s


def _by_cell(rows):
    return {(r["gpu"], r["num_gpus"]): r for r in rows}


def _rank(store, presets, **kw):
    args = dict(model="pythia-1b", budget_usd=1e6, today=TODAY)
    args.update(kw)
    return _by_cell(rank(store, RankRequest(**args), presets))


def test_costs_by_hand(store, presets):
    r = _rank(store, presets, budget_usd=10_000, deadline_days=120, kwh_price_usd=0.2)[("rtx3090", 2)]
    assert r["system"] == "ws2" and r["system_name"] == "2-GPU workstation"
    hardware = 6000 + 2 * 750  # the 2-GPU workstation without GPUs + two used RTX 3090s (presets, 2026)
    assert r["hardware_cost_usd"] == pytest.approx(hardware)
    assert r["days"] == 100.0 and r["source"] == "measured"  # measured wins over the paper's 80 days
    energy = (350 * 2 + 350) / 1000 * 24 * 100 * 0.2 * 1.0  # GPUs' TDP + the system's base power, PUE 1
    assert r["energy_usd"] == pytest.approx(energy)
    assert r["cost_per_experiment_usd"] == pytest.approx(hardware * 100 / (5 * 365) + energy)
    assert r["within_budget"] and r["within_deadline"] and r["status"] == "ok"
    assert r["config"] == "free-lunch, micro-batch 8 x 64"
    # A server in a server room: its base power and the room's cooling overhead count too.
    hgx = _rank(store, presets, kwh_price_usd=0.2)[("h100", 4)]
    assert hgx["energy_usd"] == pytest.approx((700 * 4 + 2000) * 1.5 / 1000 * 24 * 10 * 0.2)


def test_the_default_electricity_price_is_the_presets_dated_one(store, presets):
    r = _rank(store, presets)[("rtx3090", 2)]
    e = presets.electricity
    assert r["kwh_price_usd"] == e.usd_per_kwh and r["kwh_date"] == e.date and r["energy_usd"] > 0
    assert _rank(store, presets, kwh_price_usd=0.0)[("rtx3090", 2)]["energy_usd"] == 0  # 0: leave energy out


def test_one_honest_figure_per_cell(store, presets):
    cells = _rank(store, presets)
    assert cells[("rtx6000ada", 4)]["source"] == "predicted"  # measured, then predicted, then paper
    assert cells[("rtx6000ada", 4)]["paper_days"] == 15.0  # the paper's figure rides beside
    assert cells[("a6000", 2)]["source"] == "paper-table1" and cells[("a6000", 2)]["days"] == 72.0
    # An implausible paper figure is never what a cell is ranked on: shown beside its prediction ...
    beside = cells[("a6000", 8)]
    assert beside["source"] == "predicted" and beside["days"] == 30.0
    assert (beside["paper_days"], beside["paper_plausibility"]) == (22.0, "implausible")
    # ... and a cell with nothing else has no figure at all.
    alone = cells[("a6000", 4)]
    assert alone["days"] is None and alone["status"] == "implausible" and alone["paper_days"] == 40.0
    assert not alone["pareto"] and not alone["within_deadline"]
    assert cells[("a6000", 1)]["status"] == "refused"  # faster than the hardware: refused everywhere
    assert cells[("l40s", 1)]["status"] == "refused" and cells[("l40s", 1)]["days"] is None
    assert cells[("l40s", 4)]["status"] == "infeasible"


def test_the_papers_own_view_keeps_its_rows_prices_and_machines(store, presets):
    cells = _rank(store, presets, sources=("paper",))
    flagged = cells[("a6000", 4)]
    assert flagged["days"] == 40.0 and flagged["plausibility"] == "implausible"  # ranked, flag intact
    assert flagged["system"] == "paper-4" and flagged["system_short"] == "T7"
    assert flagged["hardware_cost_usd"] == pytest.approx(4 * 4800 + 7482)  # 2024 price, Table 7 server
    assert flagged["price_stale"] and flagged["price_date"] == dt.date(2024, 9, 21)
    assert flagged["energy_usd"] == 0  # the paper left energy out
    assert cells[("a6000", 1)]["status"] == "refused"
    assert cells[("rtx3090", 2)]["source"] == "paper-table1"  # only the paper's rows


def test_only_systems_that_exist_are_options(store, presets):
    cells = _rank(store, presets)
    single = cells[("h100", 1)]  # an SXM module is sold only on its HGX baseboard, 4 or 8 of them
    assert single["system"] is None and single["status"] == "no-system" and "4 or 8" in single["why"]
    assert single["hardware_cost_usd"] is None and not single["within_budget"] and not single["pareto"]
    assert single["source"] == "measured" and single["days"] == 40.5  # the evidence stays visible
    hgx = cells[("h100", 4)]
    assert hgx["system"] == "hgx4" and hgx["hardware_cost_usd"] == pytest.approx(40_000 + 4 * 27_500)
    four = cells[("rtx4090", 4)]  # four open-air cards: the 4-GPU workstation takes blower or water-cooled
    assert four["system"] is None and "blower or water" in four["why"]
    assert cells[("rtx4090", 2)]["system"] == "ws2"
    rows = rank(store, RankRequest(model="pythia-1b", budget_usd=1e6, today=TODAY), presets)
    assert all(r["system"] is None for r in rows[rows.index(single):])  # no system: listed last, never ranked


def test_order_budget_deadline_and_pareto(store, presets):
    rows = rank(store, RankRequest(model="pythia-1b", budget_usd=50_000, deadline_days=60, today=TODAY), presets)
    ranked = [(r["gpu"], r["num_gpus"]) for r in rows if r["days"] is not None and r["system"]]
    # Fastest first among those within budget; over-budget options after.
    assert ranked[:4] == [("rtx6000ada", 4), ("a6000", 2), ("rtx3090", 2), ("rtx4090", 2)]
    assert ranked[4:] == [("h100", 4), ("rtxpro6000q", 4), ("a6000", 8)]
    cells = _by_cell(rows)
    assert not cells[("h100", 4)]["within_budget"]
    # Pareto among options with a system: the cheapest, the fastest, and what lies between.
    assert {k for k, r in cells.items() if r["pareto"]} == {("rtx3090", 2), ("a6000", 2), ("rtx6000ada", 4),
                                                           ("h100", 4)}
    assert not cells[("rtx4090", 2)]["pareto"]  # dearer and slower than 2 x rtx3090


def test_the_deadline_verdict_reads_the_band(store, presets):
    cells = _rank(store, presets, deadline_days=40)
    assert cells[("rtx6000ada", 4)]["deadline_verdict"] == "met"  # 19-34: even the band's top is inside
    assert cells[("a6000", 8)]["deadline_verdict"] == "at risk"  # 28-50 straddles 40
    assert cells[("rtx3090", 2)]["deadline_verdict"] == "missed"  # measured 100: no band
    assert (cells[("rtx3090", 2)]["days_low"], cells[("rtx3090", 2)]["days_high"]) == (100.0, 100.0)
    assert _rank(store, presets)[("a6000", 8)]["deadline_verdict"] is None  # no deadline, no verdict


def test_extrapolated_names_a_generation_nobody_measured(store, presets):
    cells = _rank(store, presets)
    assert cells[("h100", 4)]["extrapolated"] is None  # Hopper: measured here (h100 x 1)
    assert cells[("rtxpro6000q", 4)]["extrapolated"] == "Blackwell workstation and consumer"  # nobody measured
    # The RTX 6000 Ada is of the RTX 3090's generation (engine/data/generations.py), measured here.
    assert cells[("rtx6000ada", 4)]["extrapolated"] is None
    assert cells[("rtx3090", 2)]["extrapolated"] is None  # a measurement is never extrapolated


def test_prices_are_dated_and_a_stale_one_is_marked(store, presets):
    old = load_presets([FIXTURES / "presets_good" / "old_price.toml"], include_user=False)
    r = _rank(store, old)[("rtx3090", 2)]
    assert r["gpu_price_stale"] and r["price_stale"] and r["price_date"] == dt.date(2024, 1, 15)
    assert not r["system_price_stale"]
    fresh = _rank(store, presets)[("rtx3090", 2)]
    assert not fresh["price_stale"] and fresh["gpu_price_source"] and fresh["system_price_source"]
    fixed = _rank(store, old, price_overrides={"rtx3090": 700})[("rtx3090", 2)]  # today's price fixes it
    assert not fixed["price_stale"] and fixed["gpu_price_date"] == TODAY and "override" in fixed["gpu_price_source"]
    assert fixed["hardware_cost_usd"] == pytest.approx(6000 + 2 * 700)
    ws = _rank(store, presets, price_overrides={"ws2": 4000})[("rtx3090", 2)]  # a system's price too
    assert ws["hardware_cost_usd"] == pytest.approx(4000 + 2 * 750)


def test_sources_price_overrides_and_gpu_filter(store, presets):
    cheap = _rank(store, presets, price_overrides={"h100": 20_000})
    assert cheap[("h100", 4)]["hardware_cost_usd"] == pytest.approx(4 * 20_000 + 40_000)  # the HGX moves with it
    only = rank(store, RankRequest(model="pythia-1b", budget_usd=1e6, gpus_allowed=("a6000", "h200")), presets)
    assert {r["gpu"] for r in only} == {"a6000"}
    assert no_data_gpus(store, RankRequest(model="pythia-1b", budget_usd=1, gpus_allowed=("a6000", "h200")),
                        presets) == ["h200"]


def test_nothing_within_budget(store, presets):
    rows = rank(store, RankRequest(model="pythia-1b", budget_usd=100), presets)
    assert rows and not any(r["within_budget"] for r in rows)


def test_rent_versus_buy(store, presets):
    cells = _rank(store, presets)
    h100 = cells[("h100", 4)]
    cheapest = min((c for c in presets.cloud if c.gpu == "h100"), key=lambda c: c.usd_per_gpu_hour)
    assert h100["rent_usd"] == pytest.approx(cheapest.usd_per_gpu_hour * 4 * 24 * 10)
    assert (h100["rent_provider"], h100["rent_date"]) == (cheapest.provider, cheapest.date)
    assert h100["buy_or_rent"] == ("rent" if h100["rent_usd"] < h100["cost_per_experiment_usd"] else "buy")
    assert cells[("rtx3090", 2)]["rent_usd"] is None  # no cloud price for it
    assert cells[("h100", 1)]["buy_or_rent"] == "rent"  # not sold as one GPU: renting is the way


@pytest.mark.parametrize("kw, message", [
    (dict(budget_usd=0), "budget"), (dict(budget_usd=-5), "budget"), (dict(deadline_days=0), "deadline"),
    (dict(lifespan_years=-1), "lifespan"), (dict(kwh_price_usd=-0.1), "electricity"),
    (dict(price_overrides={"h100": 0}), "price"), (dict(utilisation=1.5), "utilisation"),
    (dict(sources=("rumour",)), "sources"), (dict(gpus_allowed=("tpu",)), "gpus.tpu"),
    (dict(price_overrides={"tpu": 10}), "gpus.tpu"),
])
def test_bad_inputs_are_refused_clearly(store, presets, kw, message):
    args = dict(model="pythia-1b", budget_usd=1000)
    args.update(kw)
    with pytest.raises(PlannerError, match=message):
        rank(store, RankRequest(**args), presets)


def test_rank_command_json(capsys):
    assert main(["rank", "--model", "pythia-1b", "--budget", "50000", "--deadline", "60", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    for key in ("gpu", "num_gpus", "system", "hardware_cost_usd", "days", "days_low", "days_high",
                "deadline_verdict", "price_date", "price_stale", "cost_per_experiment_usd", "within_budget",
                "within_deadline", "source", "config", "pareto", "paper_days", "extrapolated"):
        assert key in rows[0]
    first = rows[0]
    assert first["within_budget"] and first["system"] and first["price_date"]
    dt.date.fromisoformat(first["price_date"])
    h100 = [r for r in rows if r["gpu"] == "h100" and r["num_gpus"] == 1][0]
    assert h100["source"] == "measured" and h100["status"] == "no-system"  # measured, but not sold alone
    assert main(["rank", "--model", "pythia-1b", "--budget", "0"]) == 2
    assert main(["rank", "--model", "pythia-1b", "--budget", "10", "--price", "h100"]) == 2


def test_a_predictions_floor_reaches_the_ranking_as_numbers_and_junk_as_nothing(presets):
    """The ranking reads how far a prediction's floor lifts its pass and whether its floor was measured there (what
    'what to measure next' keeps a floor-bound pick's width by); a shared file's junk in them reads as nothing."""
    prov = {"predicted": {"floor_lift": 1.7, "floor_elsewhere": True, "kind": "another GPU + floor-bound"}}
    junk = {"predicted": {"floor_lift": "abc", "floor_elsewhere": "[1]"}}
    with Store.open(None) as s:
        s.add_trials([_pred("rtx6000ada", 4, 20.0, 15.0, 27.0, provenance=json.dumps(prov)),
                      _pred("a6000", 8, 30.0, 28.0, 50.0, provenance=json.dumps(junk))])
        cells = _rank(s, presets)
    ok, bad = cells[("rtx6000ada", 4)], cells[("a6000", 8)]
    assert ok["floor_lift"] == pytest.approx(1.7) and ok["floor_elsewhere"] is True
    assert bad["floor_lift"] is None and not bad["floor_elsewhere"]
