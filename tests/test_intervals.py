"""Calibrated intervals (issue 39): a prediction's kind of extrapolation, the width its held-out errors give,
coverage checked without the case's own model, the capped figure in the middle of its interval."""

import io
import math

import pytest

from engine.data import space
from engine.predict import intervals as iv
from engine.predict.intervals import FAMILY, OTHER_COUNT, OTHER_GPU, THIS_COUNT, Case, Evidence, Intervals


@pytest.fixture(scope="module")
def presets():
    from engine.data.presets import load_presets

    return load_presets(include_user=False)


def test_the_conformal_width_is_the_rank_a_new_case_falls_under():
    assert iv.conformal_width([]) is None
    # 9 cases: rank 10 x 0.8 = 8, the 8th smallest
    assert iv.conformal_width([0.01 * k for k in range(1, 10)]) == pytest.approx(0.08)
    # 8 cases: rank 9 x 0.8 = 7.2, a fifth of the way from the 7th to the 8th (the whole rank, the 8th, would
    # cover 8 / 9 = 89% of new cases, not 80%)
    assert iv.conformal_width([0.01 * k for k in range(1, 9)]) == pytest.approx(0.072)
    # 3 cases: the rank (4) passes the largest: wider than any case seen
    assert iv.conformal_width([0.1, 0.2, 0.3]) == pytest.approx(0.375)


def test_a_prediction_knows_its_kind_from_what_is_measured_where():
    ev = Evidence(frozenset({("GPTNeoX", "h100", 1), ("GPTNeoX", "h200", 2), ("Roberta", "h100", 1)}))
    assert ev.evidence("GPTNeoX", "h100", 1) == THIS_COUNT
    assert ev.evidence("GPTNeoX", "h100", 4) == OTHER_COUNT
    assert ev.evidence("Roberta", "a100", 8) == OTHER_GPU
    assert ev.evidence("Llama", "h100", 1) == FAMILY
    assert ev.arch_cells("GPTNeoX") == 2 and ev.arch_cells("Llama") == 0


def test_a_kind_short_of_cases_takes_the_next_wider_kind_and_a_single_cell_architecture_its_own():
    cal = Intervals(widths={THIS_COUNT: 0.05, OTHER_GPU: 0.2, FAMILY: 0.3, iv.kind_name(OTHER_GPU, True): 0.4},
                    cases={THIS_COUNT: 3, OTHER_GPU: 20, FAMILY: 30, iv.kind_name(OTHER_GPU, True): 2},
                    single_cell={"ConvNext": 0.7})
    assert cal.width(THIS_COUNT, False) == (0.2, OTHER_GPU)  # 3 cases: not enough; other count has none
    assert cal.width(FAMILY, False) == (0.3, FAMILY)
    # too few offloaded cases: the plain kind's width, but never narrower than the offloaded cases' spread
    assert cal.width(OTHER_GPU, True) == (0.4, OTHER_GPU)
    w, what = cal.for_prediction("ConvNext", OTHER_GPU, False)
    assert w == 0.7 and "ConvNext is measured in one cell only" in what
    assert cal.for_prediction("GPTNeoX", OTHER_GPU, False)[0] == 0.2
    empty = Intervals({}, {})
    assert empty.width(THIS_COUNT, False) == (iv.UNCALIBRATED_W, "")


def _case(model, kind, err, arch="A"):
    return Case("cell", kind, arch, model, "h100", 1, f"s{err}", 1 + err, 1.0)


def test_coverage_is_checked_without_the_cases_own_model_and_says_when_it_is_off():
    # model m1's errors are small, m2's large: each calibrated on the other, the interval misses or overshoots
    cases = ([_case("m1", OTHER_GPU, 0.01 * k) for k in range(1, 11)]
             + [_case("m2", OTHER_GPU, 0.3 + 0.01 * k) for k in range(1, 11)])
    (row,) = iv.coverage(cases)
    assert row["kind"] == OTHER_GPU and row["cases"] == 20
    assert row["coverage"] == pytest.approx(0.5)  # m1 all inside m2's wide width, m2 all outside m1's narrow one
    assert row["off"]
    # the same spread in both models: calibrated on the other, about the stated level
    even = [_case(m, OTHER_GPU, 0.02 * k) for m in ("m1", "m2", "m3") for k in range(1, 11)]
    (row,) = iv.coverage(even)
    assert abs(row["coverage"] - iv.LEVEL) <= iv.TOLERANCE and not row["off"]


def test_the_calibration_names_single_cell_architectures_and_round_trips_its_file(tmp_path):
    cases = [_case("convnext", FAMILY, 0.4 + 0.01 * k, arch="ConvNext") for k in range(10)]
    cases += [_case("pythia", FAMILY, 0.01 * k, arch="GPTNeoX") for k in range(10)]
    ev = Evidence(frozenset({("ConvNext", "h100", 1), ("GPTNeoX", "h100", 1), ("GPTNeoX", "h200", 1)}))
    cal = iv.calibrate(cases, ev)
    assert set(cal.single_cell) == {"ConvNext"} and cal.single_cell["ConvNext"] > math.log(1.4)
    iv.write(cal, tmp_path)
    back = iv.load(tmp_path)
    assert back.widths == cal.widths and back.cases == cal.cases and back.single_cell == cal.single_cell
    assert iv.load(tmp_path / "nowhere") is None


def test_an_unmeasured_generation_takes_the_widest_of_the_generations_predicted_from_another():
    narrow, wide = [0.01, -0.02, 0.03] * 4, [0.5, 0.4, -0.3] * 4
    w = iv.unmeasured_generation_width({"a": narrow, "b": wide})
    assert w == pytest.approx(iv.generation_width(wide))
    assert w > iv.generation_width(narrow + wide) - 1e-12


def test_the_interval_is_symmetric_around_the_point_and_a_capped_one_does_not_start_at_the_cap(presets, monkeypatch):
    """The point is the interval's median (symmetric in log); a capped figure's interval reaches below the cap
    and is wider by how far past the line the time model went."""
    from test_predict import _synthetic
    from engine.predict import Predictor, predictor as predictor_mod

    p = Predictor(_synthetic(presets), presets)
    p.intervals = Intervals({k: 0.1 for k in (THIS_COUNT, OTHER_COUNT, OTHER_GPU, FAMILY)},
                            {k: 50 for k in (THIS_COUNT, OTHER_COUNT, OTHER_GPU, FAMILY)})
    h = p.predict("pythia-1b", "h100", 2, space.FREE_LUNCH)
    assert h.kind and h.days_low * h.days_high == pytest.approx(h.days ** 2)
    assert h.days_high / h.days_low == pytest.approx(math.exp(0.2))
    monkeypatch.setattr(predictor_mod, "mfu_line", lambda gpu: 0.5 * h.mfu)  # a line half the MFU predicted
    c = p.predict("pythia-1b", "h100", 2, space.FREE_LUNCH)
    assert c.capped and c.mfu == pytest.approx(0.5 * h.mfu) and c.days == pytest.approx(2 * h.days)
    assert c.days_low < c.days < c.days_high
    # wider by the factor the cap hides (2x) on each side: exp(0.1) x 2
    assert c.days_high / c.days == pytest.approx(2 * math.exp(0.1))
    assert c.days_low * c.days_high == pytest.approx(c.days ** 2)
    assert c.uncapped_days < c.days
    assert any("capped at" in line and "this generation's line" in line for line in c.lines)


def test_validate_says_in_words_which_kind_misses_its_coverage():
    from rich.console import Console

    from tui_planner.predict_cli import _print_intervals

    report = {"level": 0.8, "tolerance": 0.1, "min_cases": 8, "cases": 40, "met": False,
              "kinds": [{"kind": OTHER_GPU, "cases": 20, "inside": 10, "coverage": 0.5, "median_width": 1.2,
                         "off": True},
                        {"kind": FAMILY, "cases": 20, "inside": 16, "coverage": 0.8, "median_width": 1.6, "off": False}],
              "published": [{"kind": "blackwell-dc (published rows)", "cases": 0, "coverage": None, "rows": 5,
                             "groups": ["lambda_dlbench_v2"], "off": False}],
              "single_cell": {"ConvNext": 3.9}}
    out = io.StringIO()
    _print_intervals(Console(file=out, width=200, color_system=None), report)
    text = out.getvalue()
    assert "coverage missed: another GPU: 10 of 20 held-out cases inside, 50% against the stated 80%" in text
    assert "family only: " not in text.split("coverage missed")[1]
    assert "not checked: blackwell-dc (published rows)" in text
    assert "measured in one cell only" in text and "ConvNext 3.90x" in text


def test_no_interval_reaches_below_what_the_whole_peak_allows(presets, monkeypatch):
    """A capped figure's interval widens below the cap, but never past 100% of the dense peak (the check a stored
    row is read back with, engine/data/trust.py)."""
    from test_predict import _synthetic
    from engine.predict import Predictor, predictor as predictor_mod

    p = Predictor(_synthetic(presets), presets)
    p.intervals = Intervals({k: 3.0 for k in (THIS_COUNT, OTHER_COUNT, OTHER_GPU, FAMILY)},
                            {k: 50 for k in (THIS_COUNT, OTHER_COUNT, OTHER_GPU, FAMILY)})
    h = p.predict("pythia-1b", "h100", 2, space.FREE_LUNCH)
    monkeypatch.setattr(predictor_mod, "mfu_line", lambda gpu: 0.9 * h.mfu)
    c = p.predict("pythia-1b", "h100", 2, space.FREE_LUNCH)
    assert c.capped and c.days_low == pytest.approx(c.days * c.mfu)  # the 100% floor: days x MFU


def _floor_case(model, kind, err):
    return Case("cell", kind, "A", model, "h200", 4, f"f{err}", 1 + err, 1.0, floor_bound=True)


def test_floor_bound_cases_are_pooled_apart_and_a_floor_bound_prediction_takes_the_wider():
    plain = [_case(m, THIS_COUNT, 0.01 * k) for m in ("m1", "m2") for k in range(1, 11)]
    floor = [_floor_case(m, kind, 0.05 * k) for m, kind in (("m1", THIS_COUNT), ("m3", FAMILY)) for k in range(1, 6)]
    cal = iv.calibrate(plain + floor)
    # the floor-bound cases neither widen their evidence's kind nor go uncounted
    assert cal.cases[THIS_COUNT] == 20 and cal.cases[iv.FLOOR_BOUND] == 10
    assert cal.widths[THIS_COUNT] < 0.11 and cal.widths[iv.FLOOR_BOUND] > math.log(1.2)
    assert cal.width(THIS_COUNT, False) == (cal.widths[THIS_COUNT], THIS_COUNT)
    assert cal.width(THIS_COUNT, False, floor_bound=True) == (cal.widths[iv.FLOOR_BOUND], iv.FLOOR_BOUND)
    # the evidence's kind wins where it is the wider
    wide = Intervals({FAMILY: 1.0, iv.FLOOR_BOUND: 0.3}, {FAMILY: 10, iv.FLOOR_BOUND: 10})
    assert wide.width(FAMILY, False, floor_bound=True) == (1.0, FAMILY)
    w, what = cal.for_prediction("A", THIS_COUNT, False, lift=1.8)
    assert w == cal.widths[iv.FLOOR_BOUND] and "floor-bound" in what and "1.80x its GPU work" in what
    assert cal.for_prediction("A", THIS_COUNT, False, lift=iv.FLOOR_LIFT)[0] == cal.widths[THIS_COUNT]
    # too few floor-bound cases: a wide guess, said as such
    few = iv.calibrate(plain + floor[:3])
    w, what = few.for_prediction("A", THIS_COUNT, False, lift=2.0)
    assert w == iv.UNCALIBRATED_W and "wide" in what and "fewer than" in what
    rows = {r["kind"]: r for r in iv.coverage(plain + floor)}
    assert rows[iv.FLOOR_BOUND]["cases"] == 10 and list(rows)[-1] == iv.FLOOR_BOUND


def test_a_single_cell_architectures_own_width_leaves_its_floor_bound_cases_out():
    """The floor-bound cases are pooled apart: they neither narrow nor widen an architecture's own width."""
    ev = Evidence(frozenset({("Q", "h200", 2), ("GPTNeoX", "h100", 1), ("GPTNeoX", "h200", 1)}))
    plain = [Case("cell", FAMILY, "Q", "q", "h200", 2, f"s{k}", 1 + 0.3 + 0.01 * k, 1.0) for k in range(10)]
    floor = [Case("cell", FAMILY, "Q", "q", "h200", 2, f"f{k}", 1.01, 1.0, floor_bound=True) for k in range(30)]
    assert iv.calibrate(plain + floor, ev).single_cell["Q"] == pytest.approx(iv.calibrate(plain, ev).single_cell["Q"])
