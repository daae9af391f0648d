"""GPU generations: published measurements as data, the per-generation fit, its validation and its bands.

The fit is checked on a fixture whose truth is known (rows made from chosen factors); the shipped data is
checked for what it must hold (every file loads with its source, every used row is predicted), never for
how good the numbers come out: that is the closing note's and `predict --validate`'s business.
"""

import csv
import dataclasses
import json
import math
import re

import pytest

from conftest import ROOT
from engine.data import generations
from engine.data.external import ExternalRow, load
from engine.data.presets import load_presets
from engine.data.store import Store
from engine.data.paths import shipped_db
from engine.predict import generations as gen
from engine.predict.fit import Fit
from engine.predict.validate import build_predictor

EXTERNAL = ROOT / "data" / "external"


@pytest.fixture(scope="module")
def presets():
    return load_presets(include_user=False)


def test_every_external_file_loads_with_its_source(presets):
    data = load(gpu_ids=set(presets.gpus))
    folders = sorted(p.name for p in EXTERNAL.iterdir() if p.is_dir())
    assert sorted(data.sources) == folders  # every folder is a source that says whether it is used
    for sid, source in data.sources.items():
        readme = (EXTERNAL / sid / "README.md").read_text()
        assert re.search(r"\b[0-9a-f]{7,40}\b", readme) or "http" in readme, f"{sid}: its README names no commit or address"
        rows = list(csv.DictReader(open(EXTERNAL / sid / "rows.csv")))
        assert rows and all(r["source_id"] for r in rows), sid
        assert source.use or source.why_not, f"{sid}: a source left out says why"
    used = {r.source for r in data.rows}
    assert used == {s for s, src in data.sources.items() if src.use}
    assert all(r.tokens_per_s > 0 and r.num_gpus <= 8 for r in data.rows)
    # Every row left out carries its reason.
    assert data.left_out and all(why for _, why in data.left_out)


def test_generations_come_from_the_chip_not_the_name(presets):
    assert generations.generation_of(presets.gpu("h100")).id == "hopper"
    assert generations.generation_of(presets.gpu("a100")).id == "ampere-dc"
    assert generations.generation_of(presets.gpu("rtx3090")).id == "ampere-ada-ws"
    assert generations.generation_of(presets.gpu("rtx4090")).id == "ampere-ada-ws"
    assert generations.generation_of(presets.gpu("v100")).id == "volta"
    # the line is the best MFU measured or published on the generation: 65% on the A100 (llm-foundry) and on Hopper
    # (our Pythia-6.9B FSDP rows, 63.6%); 60% where nothing shows more
    assert generations.mfu_line(presets.gpu("a100")) == generations.mfu_line(presets.gpu("h100")) == 0.65
    assert generations.mfu_line(presets.gpu("rtx3090")) == 0.60


# --- the fit on a fixture whose truth is known ------------------------------------------------------------


def _row(source, gpu, hidden, seq, mb=8, n=1, tokens=1.0, line=2):
    return ExternalRow(source=source, line=line, model=f"m{hidden}", task="causal-lm", params=None, layers=12,
                       hidden=hidden, heads=hidden // 64, ffn=4 * hidden, vocab=32000, seq_len=seq, gpu_name=gpu,
                       gpu=gpu, num_gpus=n, micro_batch=mb, grad_accum=1, global_batch=None, sharding="none",
                       checkpointing=False, fused_attention=True, tokens_per_s=tokens, mfu_published=None,
                       software="")


def test_a_published_rows_memory_term_holds_its_optimizer_step_per_sample(presets):
    """The optimizer step is in every published step time: the update's bytes (32 a parameter a GPU holds) over the
    samples a GPU takes a step. Languini's 731M GPT steps every 4 sequences on its RTX 3090 and every 36 on its A100:
    left out, the 3090 was 19% too fast there. ZeRO-1 and FSDP update their shard only."""
    from engine.predict.terms import ADAM_UPDATE_BYTES

    base = Fit("published", "compiled", 1.8, 1.2, ())
    g = presets.gpu("h100")
    bw = g.memory_bandwidth_gbs * 1e9

    def b(**kw):
        return gen.row_terms(dataclasses.replace(_row("one", "h100", 1024, 512), **kw), g, base).b

    small, large = b(micro_batch=4), b(micro_batch=36)
    params = 12 * (4 * 1024 * 1024 + 2 * 1024 * 4096) + 32000 * 1024
    assert small - large == pytest.approx(base.x_m * ADAM_UPDATE_BYTES * params / bw * (1 / 4 - 1 / 36), rel=1e-9)
    # a global batch over 4 GPUs: 9 samples a GPU a step, whatever the micro-batch; sharded: a quarter of it
    ddp = b(num_gpus=4, micro_batch=3, global_batch=36, sharding="ddp")
    assert ddp - large == pytest.approx(base.x_m * ADAM_UPDATE_BYTES * params / bw * (1 / 9 - 1 / 36), rel=1e-9)
    fsdp = b(num_gpus=4, micro_batch=3, global_batch=36, sharding="fsdp_full")
    assert ddp - fsdp == pytest.approx(base.x_m * ADAM_UPDATE_BYTES * params / bw * (1 / 9) * 3 / 4, rel=1e-9)


def _fixture(presets, truth_kc, truth_km, src_factor):
    """Two sources, each with rows on Hopper and on another generation, made from known factors."""
    base = Fit("published", "compiled", 1.8, 1.2, ())
    terms = []
    for source, s in src_factor.items():
        for gpu in ("h100", "a100", "v100"):
            for hidden in (512, 1024, 2048, 4096):
                for seq in (512, 2048):
                    r = _row(source, gpu, hidden, seq)
                    t = gen.row_terms(r, presets.gpu(gpu), base)
                    g = t.generation
                    kc, km = (1.0, 1.0) if g == "hopper" else (truth_kc[g], truth_km[g])
                    seconds = s * (kc * t.a + kc * t.a_attention + km * t.b)
                    r = dataclasses.replace(r, tokens_per_s=seq / seconds)
                    terms.append(gen.row_terms(r, presets.gpu(gpu), base))
    return terms


def test_the_fit_recovers_known_factors_and_predicts_held_out_groups(presets):
    truth_kc, truth_km = {"ampere-dc": 0.7, "volta": 1.3}, {"ampere-dc": 0.9, "volta": 1.1}
    terms = _fixture(presets, truth_kc, truth_km, {"one": 1.0, "two": 1.6})
    fitted = gen.fit(terms, cycles=30)
    for g in truth_kc:
        assert fitted.kc[g] == pytest.approx(truth_kc[g], rel=0.08), g
        assert fitted.km[g] == pytest.approx(truth_km[g], rel=0.25), g
    assert fitted.source["two"] / fitted.source["one"] == pytest.approx(1.6, rel=0.05)
    held = gen.leave_group_out(terms, fitted)
    assert len(held) == len(terms)
    assert max(abs(c.error) for c in held) < 0.1  # exact data: held out, still predicted closely


def test_an_unmeasured_generations_band_is_wider_than_a_measured_ones(presets):
    terms = _fixture(presets, {"ampere-dc": 0.7, "volta": 1.3}, {"ampere-dc": 0.9, "volta": 1.1},
                     {"one": 1.0, "two": 1.6})
    fitted = gen.fit(terms, cycles=30)
    bands = gen.generation_bands(gen.leave_group_out(terms, fitted), gen.leave_generation_out(terms, fitted))
    far = bands["extrapolated"]
    for g in ("ampere-dc", "volta"):
        assert far.high_factor / far.low_factor > bands[g].high_factor / bands[g].low_factor, g
    cal = gen.Calibration(fitted, bands, "x")
    assert cal.band_for("blackwell-ws") == (far, "extrapolated")
    assert cal.fit.factors("blackwell-ws")[3] == "ampere-dc"  # its fallback: the consumer Ampere/Ada line, then A100
    assert gen.Calibration.from_json(json.loads(json.dumps(cal.to_json()))).fit.kc == fitted.kc


def _cards_fixture(presets, truth_card, kc=0.9, km=1.0):
    """One source, Hopper and two cards of one generation whose compute reaches different shares of their
    datasheet peak (the card's own factor), made from known factors."""
    base = Fit("published", "compiled", 1.8, 1.2, ())
    terms = []
    for gpu in ("h100", *truth_card):
        for hidden in (512, 1024, 2048, 4096):
            for seq in (512, 2048):
                r = _row("one", gpu, hidden, seq)
                t = gen.row_terms(r, presets.gpu(gpu), base)
                c = truth_card.get(gpu, 1.0)
                k_c, k_m = (1.0, 1.0) if t.generation == "hopper" else (kc * c, km)
                seconds = k_c * t.a + k_c * t.a_attention + k_m * t.b
                r = dataclasses.replace(r, tokens_per_s=seq / seconds, model=f"m{hidden}-{seq}")
                terms.append(gen.row_terms(r, presets.gpu(gpu), base))
    return terms


def test_cards_of_one_generation_keep_their_own_speed_against_the_h100(presets):
    """The RTX 3090 and the RTX 6000 Ada share a generation but not a share of their peak: without a card's own
    factor one of them comes out too slow against the H100 and the other too fast (issue 39)."""
    truth = {"rtx3090": 0.7, "rtx6000ada": 1.4}
    terms = _cards_fixture(presets, truth)
    fitted = gen.fit(terms, cycles=30)
    assert fitted.card["rtx6000ada"] / fitted.card["rtx3090"] == pytest.approx(2.0, rel=0.1)
    held = gen.leave_group_out(terms, fitted)
    rel = {r["gpu"]: r for r in gen.relative_speeds(held)}
    assert set(rel) == set(truth)
    for card in truth:
        assert abs(rel[card]["error"]) < 0.05 and rel[card]["met"], card
    # the same data with the cards' factors taken away misses: the check can fail
    flat = dataclasses.replace(fitted, card={})
    checks = [gen.ExternalCheck(t.row, t.generation, flat.predict(t), t.row.seconds_per_sample, "") for t in terms]
    assert any(not r["met"] for r in gen.relative_speeds(checks))
    # a card of the generation with no rows of its own is predicted with the generation's factors
    kc, ka, km, g = fitted.factors("ampere-ada-ws", "rtx4090")
    assert (kc, km, g) == (fitted.kc["ampere-ada-ws"], fitted.km["ampere-ada-ws"], "ampere-ada-ws")
    assert fitted.factors("ampere-ada-ws", "rtx3090")[0] == pytest.approx(kc * fitted.card["rtx3090"])
    # a generation predicted from its fallback does not take a card factor measured elsewhere
    assert fitted.factors("blackwell-ws", "rtx3090")[0] == fitted.factors("blackwell-ws")[0]
    cal = gen.Calibration(fitted, {}, "x")
    assert gen.Calibration.from_json(json.loads(json.dumps(cal.to_json()))).fit.card == fitted.card


def test_a_card_without_rows_borrows_the_factor_of_the_card_on_its_chip(presets):
    """The L40S has no published rows; the RTX 6000 Ada, the same AD102 chip, has: the L40S takes its factor
    (same_chip_as), not the generation's, which would make it 1.4x faster than its sibling on no evidence."""
    fitted = gen.fit(_cards_fixture(presets, {"rtx3090": 0.7, "rtx6000ada": 1.4}), cycles=30)
    kc, ka, km, g = fitted.factors("ampere-ada-ws")
    borrowed = fitted.factors("ampere-ada-ws", "l40s", "rtx6000ada")
    assert borrowed[0] == pytest.approx(kc * fitted.card["rtx6000ada"])
    assert borrowed[1] == pytest.approx(ka * fitted.card["rtx6000ada"])
    assert borrowed[2:] == (km, g)  # memory is the generation's: the card's bandwidth enters through memory_s
    assert borrowed[0] > 1.2 * kc  # the borrow moves it: the check can fail
    assert fitted.card_source("l40s", "rtx6000ada") == "rtx6000ada"
    # a card with rows of its own keeps its own factor whatever its preset says
    assert fitted.factors("ampere-ada-ws", "rtx3090", "rtx6000ada") == fitted.factors("ampere-ada-ws", "rtx3090")
    assert fitted.card_source("rtx3090", "rtx6000ada") == "rtx3090"
    # a sibling with no rows either (the RTX 4090 is not in this fixture): the generation's factors
    assert fitted.factors("ampere-ada-ws", "l40s", "rtx4090") == (kc, ka, km, g)
    assert fitted.card_source("l40s", "rtx4090") is None
    # a generation predicted from its fallback takes no card factor, borrowed or not
    assert fitted.factors("blackwell-ws", "rtxpro6000", "rtx6000ada") == fitted.factors("blackwell-ws")


def test_the_shipped_l40s_and_a40_name_a_measured_card_on_their_chip(presets):
    assert presets.gpu("l40s").same_chip_as == "rtx6000ada"
    assert presets.gpu("a40").same_chip_as == "a6000"
    for g in presets.gpus.values():
        if g.same_chip_as:
            assert presets.gpu(g.same_chip_as).compute_capability == g.compute_capability, g.id


# --- the predictor on the shipped data ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def basis_rows():
    with Store.open(shipped_db(), read_only=True) as s:
        return s.query("SELECT * FROM trials WHERE source <> 'predicted'")


@pytest.fixture(scope="module")
def predictor(basis_rows, presets):
    return build_predictor(basis_rows, presets)


def _recalibrated(basis_rows, presets, cal, **fit_changes):
    """A fresh predictor (nothing cached) on the same rows, with the calibration's fit changed: what it would
    say had the published rows not measured something."""
    fresh = build_predictor(basis_rows, presets)
    fresh.generations = dataclasses.replace(cal, fit=dataclasses.replace(cal.fit, **fit_changes))
    return fresh


def test_the_shipped_calibration_is_current(predictor, presets):
    """data/external/fitted.json was fitted on today's rows and presets (scripts/build_db.py writes it):
    otherwise predictions would carry an unvalidated band."""
    cal = predictor.generations
    assert cal is not None and cal.bands, "run: python scripts/build_db.py"
    assert set(cal.bands) >= {"ampere-dc", "extrapolated"}


def test_other_generations_are_predicted_with_their_factors_band_and_line(predictor, presets, basis_rows):
    hopper = predictor.predict("pythia-1b", "h100", 1, predictor_methods())
    a100 = predictor.predict("pythia-1b", "a100", 1, predictor_methods())
    assert hopper.terms["generation"] == "hopper" and hopper.terms["generation_factors"]["compute"] == 1.0
    assert a100.terms["generation"] == "ampere-dc" and a100.terms["generation_factors"]["from"] == "ampere-dc"
    assert "published rows" in a100.basis and "Ampere data centre" in a100.terms["band"]
    assert a100.mfu <= generations.mfu_line(presets.gpu("a100")) + 1e-9
    # The RTX 5090's generation has published rows (gpt3small_runpod): its own factors, and its band
    five = predictor.predict("pythia-1b", "rtx5090", 8, predictor_methods())
    assert five.feasible and five.terms["generation_factors"]["from"] == "blackwell-ws"
    assert not five.terms["extrapolated"] and "published rows" in five.basis
    # A generation nobody published on is extrapolated, and says so: the same card with its generation's rows
    # taken out of the calibration
    cal = predictor.generations
    gone = {k: {g: v for g, v in d.items() if g != "blackwell-ws"}
            for k, d in (("kc", cal.fit.kc), ("ka", cal.fit.ka), ("km", cal.fit.km))}
    fresh = _recalibrated(basis_rows, presets, cal, **gone)
    fresh.generations = dataclasses.replace(fresh.generations,
                                            bands={g: b for g, b in cal.bands.items() if g != "blackwell-ws"})
    unseen = fresh.predict("pythia-1b", "rtx5090", 8, predictor_methods())
    assert unseen.feasible and unseen.terms["extrapolated"] and "extrapolated" in unseen.basis


def test_a_card_without_rows_is_predicted_at_its_siblings_speed_and_says_so(predictor, presets, basis_rows):
    """Same chip, similar clocks and bandwidth: a card with no published rows of its own takes the factor of the
    card on its chip (same_chip_as), names the borrow, and its interval is no narrower than a card's with no rows.
    The L40S has rows of its own since gpt3small_runpod (its own factor); with them taken out, it borrows the
    RTX 6000 Ada's."""
    own = predictor.predict_cell("pythia-1b", "l40s", 4)[0]
    assert own.terms["generation_factors"]["card_from"] == "l40s" and "same chip" not in own.basis
    cal = predictor.generations
    fresh = _recalibrated(basis_rows, presets, cal, card={c: v for c, v in cal.fit.card.items() if c != "l40s"},
                          card_rows={c: v for c, v in cal.fit.card_rows.items() if c != "l40s"})
    cells = {g: fresh.predict_cell("pythia-1b", g, 4)[0] for g in ("l40s", "rtx6000ada")}
    l40s, ada = cells["l40s"], cells["rtx6000ada"]
    assert l40s.feasible and ada.feasible
    assert abs(l40s.days / ada.days - 1) < 0.10, (l40s.days, ada.days)
    f = fresh.generations.fit
    assert l40s.terms["generation_factors"]["card_from"] == "rtx6000ada"
    assert l40s.terms["generation_factors"]["compute"] == pytest.approx(
        f.factors("ampere-ada-ws", "rtx6000ada")[0])
    assert "speed from the RTX 6000 Ada Generation's published rows" in l40s.basis
    assert "same chip" in l40s.basis and "same chip" in l40s.terms["band"]
    assert "same chip" not in ada.basis  # its own rows
    # the interval's generation part is its generation's held-out width, as for any card without rows
    assert l40s.terms["interval_parts"]["generation"] >= ada.terms["interval_parts"]["generation"] > 0
    assert l40s.days_high / l40s.days_low >= math.exp(2 * math.hypot(
        l40s.terms["interval_parts"]["model"], l40s.terms["interval_parts"]["generation"])) - 1e-9


def predictor_methods():
    from engine.data import space

    return space.FREE_LUNCH


def test_validation_reports_each_source_and_generation(predictor, presets, basis_rows):
    from engine.predict.validate import published_report

    report = published_report(basis_rows, presets, predictor)
    used = {s for s, v in report["sources"].items() if v["use"]}
    assert {x["group"] for x in report["by_source"]} == used
    assert "hopper" in {x["group"] for x in report["by_generation"]}
    assert sum(x["count"] for x in report["by_source"]) == report["rows"] == len(report["checks"])
    assert all(math.isfinite(c["error"]) for c in report["checks"])
    assert report["ratios"]["count"] > 10
    # relative speeds against the H100 for the cards a PI compares (issue 39), each run held out
    rel = {(r["source"], r["gpu"]) for r in report["relative"]}
    assert {g for _, g in rel} >= {"rtx3090", "rtx4090", "a6000", "rtx6000ada", "a100"}
    assert all(math.isfinite(r["error"]) and r["runs"] >= 1 for r in report["relative"])
    # a source with no H100 is compared with its A100: Languini's GPT pre-training, the RTX 3090 against the A100
    [languini] = [r for r in report["relative"] if r["source"] == "languini_gpt"]
    assert languini["gpu"] == "rtx3090" and languini["against"] == "a100" and languini["runs"] == 5
    assert {r["against"] for r in report["relative"] if r["source"].startswith("lambda")} == {"h100"}
    assert set(report["cards"]) >= {"rtx3090", "rtx6000ada", "l40s", "a40"}
    assert report["borrowed"] == {}  # the A40 and L40S have rows of their own since gpt3small_runpod
    # GPT-style pre-training on workstation cards beside the A100 and H100, one script (gpt3small_runpod)
    runpod = {r["gpu"]: r for r in report["relative"] if r["source"] == "gpt3small_runpod"}
    assert set(runpod) >= {"a6000", "rtx6000ada", "rtx5090", "l40s", "a40", "a100"}
    assert {r["against"] for r in runpod.values()} == {"h100"}
