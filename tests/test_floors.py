"""What a pass takes at least (engine/predict/floors.py): the floor's maths, its calibration on measured passes,
and the predictor using it where the micro-batch is small and not where it is large. No GPU."""

import math

import pytest

from engine import predict
from engine.data import space
from engine.data.paths import shipped_db
from engine.data.presets import load_presets
from engine.data.store import Store, evidence_rows
from engine.predict import floors, intervals


def test_the_soft_corner():
    assert floors.floored(0.5, 0.0) == 0.5  # no floor: the work alone
    assert floors.floored(1.0, 1.0) == pytest.approx(2 ** (1 / 3))  # work = floor: 26% above either
    assert floors.floored(4.0, 1.0) == pytest.approx(4.0 * (1 + 1 / 64) ** (1 / 3))  # well above: +0.5%
    assert floors.floored(0.01, 1.0) == pytest.approx(1.0, rel=1e-5)  # far below: the floor


def _sample(kind, comm, layers, work, measured, compiled=True):
    return floors.Sample(kind, comm, layers, compiled, work, measured, f"{kind} {work}")


def test_passes_as_fast_as_their_work_ask_for_no_floor():
    cal = floors.calibrate([_sample("one", 0.0, 16, w, w) for w in (0.1, 0.3, 0.5)]
                           + [_sample("fsdp", 0.05, 32, w, w) for w in (0.4, 0.8)])
    assert cal.per_layer_s == 0.0 and cal.per_comm == {"fsdp": 0.0}
    assert cal.floor_s("fsdp", 0.05, 32, True) == 0.0


def test_slow_small_passes_set_the_floor_they_show():
    # passes made with c = 3 ms a layer and k = 2 (FSDP): the calibration finds them again
    c, k = 0.003, 2.0
    plain = [_sample("one", 0.0, L, w, floors.floored(w, c * L)) for L, w in ((16, 0.02), (32, 0.05), (16, 0.4))]
    fsdp = [_sample("fsdp", T, 32, w, floors.floored(w, c * 32 + k * T)) for T, w in ((0.05, 0.1), (0.1, 0.15),
                                                                                         (0.03, 1.0))]
    eager = [_sample("one", 0.0, 16, 0.02, 0.02, compiled=False)]  # an uncompiled pass: no host floor asked of it
    cal = floors.calibrate(plain + fsdp + eager)
    assert cal.per_layer_s == pytest.approx(c, abs=1e-4)
    assert cal.per_comm["fsdp"] == pytest.approx(k, abs=0.05)
    assert cal.floor_s("fsdp", 0.1, 32, True) == pytest.approx(c * 32 + k * 0.1, rel=0.05)
    assert cal.floor_s("one", 0.0, 16, False) == 0.0  # uncompiled: none
    assert "raises" in cal.note and "fsdp" in cal.note


def test_a_kind_seen_in_one_cell_sets_no_collective_floor():
    """A lone cell's misfit of its work is not a floor: a kind's k needs rows of MIN_CELLS cells."""
    k = 3.0
    lone = [floors.Sample("zero3", T, 16, True, w, floors.floored(w, k * T), f"z {w}", "pythia-1b 4xh100")
            for T, w in ((0.05, 0.1), (0.05, 0.4))]
    lone_fit = floors.calibrate(lone)
    assert lone_fit.per_comm == {"zero3": 0.0} and lone_fit.per_kind_layer == {"zero3": 0.0}
    two = lone + [floors.Sample("zero3", 0.1, 32, True, 0.2, floors.floored(0.2, k * 0.1), "z2", "pythia-6.9b 2xh200")]
    assert floors.calibrate(two).per_comm["zero3"] == pytest.approx(k, abs=0.05)


def test_a_kinds_host_time_a_layer_is_fitted_apart_from_its_bytes():
    """ZeRO-3's floor is per layer, whatever the model's width (hooks fetching every module): passes made with
    a = 20 ms a layer and no bytes term come back as a, not as a k stretched over the bytes."""
    a = 0.02
    made = [floors.Sample("zero3", T, L, False, w, floors.floored(w, a * L), f"z{L} {T}", f"cell{i}")
            for i, (T, L, w) in enumerate(((0.02, 16, 0.04), (0.05, 32, 0.1), (0.13, 32, 0.25), (0.03, 28, 0.07),
                                           (0.02, 16, 0.8)))]
    cal = floors.calibrate(made)
    assert cal.per_kind_layer["zero3"] == pytest.approx(a, abs=1e-3) and cal.per_comm["zero3"] < 0.2
    assert "zero3's host time a layer" in cal.words("zero3", 0.05, 32, False)
    assert cal.floor_s("zero3", 0.0, 10, False) == pytest.approx(10 * cal.per_kind_layer["zero3"])
    assert cal.floor_s("fsdp", 0.05, 10, False) == 0.0  # a kind no row measured: none


@pytest.fixture(scope="module")
def predictor():
    presets = load_presets(include_user=False)
    with Store.open(shipped_db(), read_only=True, create=False, presets=presets) as s:
        rows = evidence_rows([s])
    return predict.build_predictor(rows, presets, for_model="pythia-6.9b")


def test_the_shipped_rows_set_a_floor(predictor):
    f = predictor.floors
    assert f.per_layer_s > 0 and f.per_comm.get("fsdp", 0) > 0  # measured at micro-batches 1-4 (2026-11-28)
    assert f.samples > 20


def test_small_micro_batches_meet_the_floor_and_large_ones_do_not(predictor):
    fsdp2 = next(m for m in space.search_space("all", 4) if m.label == "fsdp2")
    small = predictor.predict("pythia-6.9b", "h200", 4, fsdp2, max_micro_batch=1)
    t = small.terms
    assert small.micro_batch == 1 and t["pass_floor_s"] > t["pass_work_s"]
    assert small.pass_s == pytest.approx(floors.floored(t["pass_work_s"], t["pass_floor_s"]))
    assert small.pass_s > 1.5 * t["pass_work_s"]
    assert any(line.startswith("floor: a pass takes at least") for line in small.lines)
    large = predictor.predict("pythia-6.9b", "h200", 4, fsdp2)
    assert large.micro_batch >= 4
    assert large.pass_s < 1.05 * large.terms["pass_work_s"]
    # without the floor, a pass is its work: what the calibration compares each measured pass with
    bare = predictor.predict("pythia-6.9b", "h200", 4, fsdp2, max_micro_batch=1, floor=False)
    assert bare.pass_s == pytest.approx(t["pass_work_s"]) and bare.terms["pass_floor_s"] == 0.0
    assert bare.micro_batch == 1


def test_a_pass_its_floor_sets_is_floor_bound_and_as_wide_as_its_held_out_cases(predictor):
    """Issue 39: a small micro-batch's prediction rests on the floor, whose held-out errors are wider than a
    measured model's: its kind says floor-bound and its interval is the floor-bound cases' (shipped widths)."""
    fsdp2 = next(m for m in space.search_space("all", 4) if m.label == "fsdp2")
    small = predictor.predict("pythia-6.9b", "h200", 4, fsdp2, max_micro_batch=1)
    large = predictor.predict("pythia-6.9b", "h200", 4, fsdp2)
    assert small.terms["floor_lift"] > intervals.FLOOR_LIFT >= large.terms["floor_lift"]
    assert small.kind.endswith("+ floor-bound") and "floor-bound" not in large.kind
    assert "floor-bound" in small.terms["band"] and "floor-bound" not in large.terms["band"]
    shipped = predictor.intervals
    assert shipped.cases.get(intervals.FLOOR_BOUND, 0) >= intervals.MIN_CASES
    assert small.days_high / small.days == pytest.approx(math.exp(shipped.widths[intervals.FLOOR_BOUND]), rel=1e-6)
    assert small.days_high / small.days > large.days_high / large.days
    assert small.days / small.days_low == pytest.approx(small.days_high / small.days, rel=1e-6)  # the middle


def test_the_capped_measurements_are_floor_bound_held_out_cases():
    """The rows timed under a micro-batch cap are no fit's basis, but each is predicted at its cap when its cell
    (or its architecture, GPU, count) is held out: they are the floor-bound kind's cases."""
    from engine.predict.validate import held_out_cases

    presets = load_presets(include_user=False)
    with Store.open(shipped_db(), read_only=True, create=False, presets=presets) as s:
        rows = [r for r in evidence_rows([s]) if r["gpu"] == "h200" and r["model"] in ("pythia-1b", "pythia-2.8b")]
    capped = [r for r in rows if space.capped(r)]
    assert capped and {space.cap_of(r) for r in capped} >= {1}
    cases = held_out_cases(rows, presets)
    at_cap = [c for c in cases if "(micro-batch at most 1)" in c.label]
    # with the cell held out, a compiled pass (host floor) or an FSDP one (its kind seen in other cells) at micro-batch
    # 1 is floor-bound (ZeRO-3 here is in fewer cells than a k needs: floors.MIN_CELLS)
    assert at_cap and all(c.floor_bound for c in at_cap if c.scheme == "cell" and not c.label.startswith("zero"))
    # a case at its cap is predicted at it, and is compared with the capped row's own days
    days = {(r["model"], int(r["num_gpus"]), r["key"].split("|")[4], space.cap_of(r)): r["days"] for r in capped}
    for c in at_cap:
        assert c.actual_days == pytest.approx(days[(c.model, c.num_gpus, c.label.split()[0], 1)])
    # the capped rows are no basis: each case of one is predicted at its cap (micro-batch 1: slower), never at
    # the micro-batch that fits
    fits = predict.build_predictor(rows, presets, for_model="pythia-1b")
    by = {m.label: m for m in space.search_space("all", 4)}
    for c in at_cap:
        if c.scheme == "cell":
            uncapped = fits.predict(c.model, c.gpu, c.num_gpus, by[c.label.split()[0]])
            assert c.predicted_days > 1.3 * uncapped.days

def test_the_collective_floor_takes_whole_buffers_and_zero3_apart(predictor):
    """T is the collectives' whole buffers at the link's rate (the ring's (N-1)/N share does not lower the floor),
    and ZeRO-3 (every module gathered every pass) has its own k, apart from ZeRO-1/2."""
    from engine.predict.terms import comm_bytes

    by = {m.label: m for m in space.search_space("all", 4)}
    p = predictor.predict("pythia-6.9b", "h200", 4, by["zero3"], max_micro_batch=1)
    kind, comm, _, _ = p.terms["floor_inputs"]
    cb_pass, _ = comm_bytes(predictor.presets.model("pythia-6.9b"), by["zero3"], 4)
    assert kind == "zero3" and comm == pytest.approx(cb_pass * 4 / 3 / p.terms["own_link_bytes_s"])
    assert predictor.predict("pythia-6.9b", "h200", 4, by["zero1"], max_micro_batch=1).terms["floor_inputs"][0] == "zero"
    # ZeRO-3 at micro-batches 1-2 on 2 and 4 H200s: a floor per layer (its hooks), whatever its bytes
    assert predictor.floors.per_kind_layer.get("zero3", 0) > 0.005


def test_a_floor_probe_is_held_out_only_where_other_probes_remain():
    """Every capped row is on H200 hosts: holding the H200 out takes the floor with it, so its probes are not
    'another GPU' cases there (they would test no floor at all), but are held out by cell."""
    from engine.predict.validate import held_out_cases

    presets = load_presets(include_user=False)
    with Store.open(shipped_db(), read_only=True, create=False, presets=presets) as s:
        rows = [r for r in evidence_rows([s]) if r["model"] == "pythia-1b"]
    assert {r["gpu"] for r in rows if r.get("source") == "measured"} >= {"h100", "h200"}
    cases = held_out_cases(rows, presets)
    capped = [c for c in cases if "(micro-batch at most" in c.label]
    assert any(c.scheme == "cell" for c in capped)
    assert not any(c.scheme == "gpu" for c in capped)


def test_the_floor_keeps_the_hosts_part_off_its_links_and_says_it_was_not_measured_there(predictor):
    """k's bytes term was fitted over one node's peer links; a and c are the host's. Over a network the pass keeps
    ZeRO-3's per-layer floor (a network is never faster than NVLink for it); on a GPU type where the floor never set
    a measured pass, the prediction says its floor was not measured there; on the H200s it was measured on, not."""
    zero3 = next(m for m in space.search_space("all", 8) if m.label == "zero3")
    one = predictor.predict("pythia-1b", "h200", 8, zero3, max_micro_batch=1)
    for net in predictor.presets.networks.values():
        two = predictor.predict("pythia-1b", "h200", 8, zero3, max_micro_batch=1, nodes=2, network=net)
        kind, comm, layers, compiled = two.terms["floor_inputs"]
        assert kind == "zero3" and comm == 0.0  # no bytes term over the network
        assert two.terms["pass_floor_s"] == pytest.approx(predictor.floors.floor_s(kind, 0.0, layers, compiled))
        assert two.terms["pass_floor_s"] > 0 and two.days >= one.days * 0.99, net.id
    assert one.terms["floor_lift"] > intervals.FLOOR_LIFT and not one.terms["floor_elsewhere"]
    a100 = predictor.predict("pythia-1b", "a100", 8, zero3, max_micro_batch=1)
    assert a100.terms["floor_elsewhere"] and "never measured" in a100.terms["band"]


def test_a_floor_never_seen_on_this_gpu_type_is_wider(predictor):
    """The floor was fitted on H200 hosts' passes: a floor-bound prediction on a GPU type where it was never seen
    adds another GPU's width in quadrature, and says so."""
    f = predictor.floors
    assert f.seen_on("fsdp", "h200") and not f.seen_on("fsdp", "a100")
    iv = predictor.intervals
    w_here, _ = iv.width(intervals.THIS_COUNT, False, floor_bound=True)
    w_else, _ = iv.width(intervals.THIS_COUNT, False, floor_bound=True, floor_elsewhere=True)
    assert w_else == pytest.approx(math.hypot(w_here, iv.width(intervals.OTHER_GPU, False)[0]))
    _, what = iv.for_prediction("GPTNeoX", intervals.OTHER_GPU, False, lift=2.0, floor_elsewhere=True)
    assert "never measured on this GPU type" in what
