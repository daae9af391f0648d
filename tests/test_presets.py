"""Presets: the shipped files are right and complete; each way a file can be wrong gets a clear error."""

import csv
import datetime as dt

import pytest

from conftest import FIXTURES, ROOT
from engine.data.errors import PresetError
from engine.data.presets import load_presets
from tui_planner.cli import main

PAPER_MODELS = ["pythia-160m", "pythia-410m", "pythia-1b", "pythia-2.8b", "pythia-6.9b",
                "roberta-large", "mamba-2.8b", "convnext-large", "vit-large"]
GPUS = ["rtx3090", "a6000", "a100", "h100", "v100", "a40", "l40s", "rtx4090", "rtx5090", "h200", "b200"]
TABLE3 = ROOT / "data" / "paper" / "paper_table3_models.csv"


def test_shipped_presets_have_the_papers_models_and_the_gpus():
    p = load_presets()
    # the paper's nine, then the 2025 shapes measured from their config.json (presets/own-runs.toml)
    assert list(p.models) == PAPER_MODELS + ["llama-3.2-1b", "qwen2.5-1.5b", "olmo-1b"]
    assert set(GPUS) <= set(p.gpus)
    assert sorted(p.machines) == [1, 2, 4, 8]
    for g in p.gpus.values():
        assert g.price is not None and g.price.source and isinstance(g.price.date, dt.date), g.id
        # TF32 needs Ampere or newer.
        assert g.tf32 == (g.architecture not in ("volta", "turing")), g.id
        # How it is sold: an SXM module has no slots; a card says its width and cooling.
        assert g.form_factor in ("sxm", "pcie", "nvl", "consumer"), g.id
        assert (g.slots is None) == (g.form_factor == "sxm") and g.cooling, g.id
    assert not p.gpus["v100"].bf16 and p.gpus["h100"].bf16
    for s in p.systems.values():
        assert s.price.source and isinstance(s.price.date, dt.date) and s.gpu_counts, s.id
    assert p.electricity is not None and p.electricity.usd_per_kwh > 0 and p.electricity.source


def test_the_variants_people_buy_have_their_own_datasheet_numbers():
    """A PCIe H100 is not an SXM H100; the ids measured data uses keep meaning the SXM modules."""
    p = load_presets()
    sxm, pcie, nvl = p.gpu("h100"), p.gpu("h100pcie"), p.gpu("h100nvl")
    assert (sxm.form_factor, pcie.form_factor, nvl.form_factor) == ("sxm", "pcie", "nvl")
    assert pcie.peak_16bit_tflops < nvl.peak_16bit_tflops < sxm.peak_16bit_tflops
    assert pcie.tdp_w < sxm.tdp_w and pcie.memory_bandwidth_gbs < sxm.memory_bandwidth_gbs
    assert p.gpu("h200").form_factor == "sxm" and p.gpu("h200nvl").tdp_w == 600
    assert p.gpu("a100").form_factor == "sxm" and p.gpu("a100pcie").tdp_w < p.gpu("a100").tdp_w
    # GeForce cards at their FP32-accumulate rate, half the FP16-accumulate headline.
    assert [p.gpu(g).peak_16bit_tflops for g in ("rtx3090", "rtx4090", "rtx5090")] == [71.2, 165.2, 209.5]
    assert {g.form_factor for g in p.gpus.values() if g.id.startswith(("rtx3", "rtx4", "rtx5"))} == {"consumer"}
    assert p.gpu("rtx6000ada").cooling == "blower" and p.gpu("rtxpro6000q").cooling == "blower"
    assert p.gpu("l40s").cooling == "passive"


def test_fp8_peaks_are_dense_and_only_where_there_are_fp8_tensor_cores():
    """FP8 (issue 42): dense, FP32 accumulate (what torchao's float8 matmuls run at); none before Ada/Hopper."""
    p = load_presets()
    assert [p.gpu(g).peak_fp8_tflops for g in ("h100", "h100pcie", "h200", "b200", "l40s", "rtx4090")] == \
        [1979.0, 1513.0, 1979.0, 4500.0, 733.0, 330.3]
    for g in p.gpus.values():
        has_fp8_cores = tuple(int(x) for x in g.compute_capability.split(".")) >= (8, 9)
        assert g.fp8 == has_fp8_cores, g.id
        if g.fp8:  # dense: never the sparse headline (4x the 16-bit peak)
            assert 1.9 < g.peak_fp8_tflops / g.peak_16bit_tflops < 2.1, g.id
            assert "FP8" in g.spec_source, g.id


def test_a_price_is_stale_after_twelve_months():
    h100 = load_presets().gpu("h100")
    on = h100.price.date
    assert not h100.price.stale(on + dt.timedelta(days=365))
    assert h100.price.stale(on + dt.timedelta(days=366))
    assert h100.paper_price.stale(dt.date(2026, 11, 24))  # the paper's prices of 2024-09-21


def test_replication_recipes_match_the_papers_table3():
    p = load_presets()
    rows = list(csv.DictReader(open(TABLE3)))
    assert [r["model"] for r in rows] == PAPER_MODELS
    for row in rows:
        m = p.model(row["model"])
        assert m.training.batch_size == int(row["batch_size"]), m.id
        assert m.training.steps == int(row["training_steps"]), m.id
        assert m.training.lr == pytest.approx(float(row["lr"])), m.id
        if row["seq_len"]:
            assert m.seq_len == int(row["seq_len"]), m.id
        else:
            assert (m.image_size, m.num_classes) == (224, 21841), m.id
        precision = row["mixed_precision"].split()[0].replace("none", "fp32")
        assert m.training.precision == precision, m.id


def test_paper_prices_and_machine_costs():
    p = load_presets()
    assert {g: p.gpus[g].paper_price.usd for g in ("rtx3090", "a6000", "a100", "h100")} == {
        "rtx3090": 1300, "a6000": 4800, "a100": 19000, "h100": 30000}
    assert {p.gpus[g].paper_price.date for g in ("rtx3090", "a6000", "a100", "h100")} == {dt.date(2024, 9, 21)}
    assert {m.date for m in p.machines.values()} == {dt.date(2024, 9, 21)}
    assert p.machine_for(3).num_gpus == 4 and p.machine_for(8).cost_usd == pytest.approx(10673.00)
    assert p.machine_for(16) is None


def test_honest_training_flops_where_the_paper_miscounted():
    p = load_presets()
    mamba, convnext = p.model("mamba-2.8b"), p.model("convnext-large")
    tokens = 128 * 4096 * 572204
    assert mamba.training_flops == pytest.approx(6 * 2.77e9 * tokens, rel=0.01)
    assert mamba.paper_training_flops == 8.7e20
    assert convnext.training_flops < convnext.paper_training_flops / 5


def test_a_user_file_overrides_one_key_and_adds_a_model():
    p = load_presets([FIXTURES / "presets_good"])
    h100 = p.gpu("h100")
    assert h100.price.usd == 22000 and h100.price.date == dt.date(2026, 11, 1)
    assert h100.peak_16bit_tflops == 989.4  # untouched keys keep their shipped values
    tiny = p.model("tiny-neox")
    assert tiny.config["hidden_size"] == 64  # from config.json
    assert tiny.config["num_hidden_layers"] == 2  # the inline key wins
    assert tiny.training_flops == pytest.approx(6 * 1.0e6 * 32 * 1000 * 64)


def test_user_config_directory_is_read(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    d = tmp_path / "tui-planner" / "presets"
    d.mkdir(parents=True)
    (d / "price.toml").write_text((FIXTURES / "presets_good" / "cheaper_h100.toml").read_text())
    assert load_presets().gpu("h100").price.usd == 22000
    assert load_presets(include_user=False).gpu("h100").price.usd == 27500


BAD = {
    "not_toml.toml": (None, "valid TOML"),
    "unknown_table.toml": ("gpu", "one of the tables"),
    "extra_key.toml": ("gpus.h100.memory_gib", "no such key"),
    "wrong_type.toml": ("gpus.h100.memory_gb", "a positive number"),
    "negative.toml": ("gpus.h100.memory_gb", "a positive number"),
    "missing_key.toml": ("gpus.mi300x.tdp_w", "missing"),
    "bad_choice.toml": ("models.pythia-1b.training.precision", "'fp16', 'bf16', 'fp32'"),
    "bad_date.toml": ("gpus.h100.price.date", "a date"),
    "tf32_on_volta.toml": ("gpus.v100.peak_tf32_tflops", "older than Ampere"),
    "fp8_on_ampere.toml": ("gpus.a100.peak_fp8_tflops", "without FP8 tensor cores"),
    "bad_betas.toml": ("models.pythia-1b.training.betas", "two numbers"),
    "hf_config_missing.toml": ("models.tiny.hf_config", "config.json"),
    # the bad row comes after the shipped ones
    "cloud_unknown_gpu.toml": (f"cloud.{len(load_presets(include_user=False).cloud)}.gpu", "one of"),
    "machine_count_mismatch.toml": ("machines.4.num_gpus", "same count"),
    "recompute_too_big.toml": ("models.pythia-1b.checkpoint_recompute", "between 0 and 0.5"),
    "card_without_slots.toml": ("gpus.mi300x.slots", "a pcie card must say"),
    "bad_cooling.toml": ("gpus.mi300x.cooling", "'passive', 'blower', 'open-air', 'water'"),
    "system_unknown_gpu.toml": ("systems.hgx9.gpu_models", "no gpus.h900"),
    "sxm_without_baseboard.toml": ("systems.sxmbox.gpu_models", "fits only the baseboard made for it"),
    "system_id_is_a_gpu.toml": ("systems.h100", "not also a GPU id"),
    "system_short_too_long.toml": ("systems.tower.short", "at most 3 characters"),
    "pue_below_one.toml": ("systems.cold.pue", "a number >= 1"),
    "system_counts.toml": ("systems.empty.gpu_counts", "GPU counts from 1 to 64"),
    "electricity_bad_date.toml": ("electricity.date", "a date like"),
    "same_chip_unknown.toml": ("gpus.l40s.same_chip_as", "no gpus.rtx-6000-ada"),
    "same_chip_other_chip.toml": ("gpus.l40s.same_chip_as", "a GPU on the same chip"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_a_bad_file_names_the_file_and_the_key(name):
    key, expected = BAD[name]
    path = FIXTURES / "presets_bad" / name
    with pytest.raises(PresetError) as err:
        load_presets([path])
    message = str(err.value)
    assert str(path) in message  # the file the user must edit, not the shipped one
    if key:
        assert err.value.key == key
        assert key in message
    assert expected in message


def test_the_cli_shows_a_bad_preset_without_a_traceback(capsys):
    code = main(["--presets", str(FIXTURES / "presets_bad" / "wrong_type.toml"), "presets"])
    err = capsys.readouterr().err
    assert code == 2
    assert "gpus.h100.memory_gb" in err and "Traceback" not in err


def test_missing_presets_path_is_a_clear_error(tmp_path):
    with pytest.raises(PresetError, match="existing TOML file"):
        load_presets([tmp_path / "nope.toml"])


def test_a_parsed_preset_file_is_reused_only_for_the_same_bytes_and_never_shared():
    """Presets are read again for every command: the parse of the same bytes is reused, as a fresh copy
    (loading mutates what it merges), and bytes that changed are parsed again."""
    from engine.data.toml_tables import parse_toml as _parse_toml

    text = b'[models.m]\nlayers = 2\nsizes = [1, 2]\n'
    first, second = _parse_toml(text), _parse_toml(text)
    assert first == second == {"models": {"m": {"layers": 2, "sizes": [1, 2]}}} and first is not second
    first["models"]["m"]["sizes"].append(3)
    assert _parse_toml(text)["models"]["m"]["sizes"] == [1, 2]
    assert _parse_toml(text.replace(b"2\n", b"3\n", 1))["models"]["m"]["layers"] == 3
