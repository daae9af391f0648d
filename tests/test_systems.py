"""Systems that exist: which system presets take a GPU type at a count. SXM modules only on their HGX
baseboards, 4 or 8 (B200: 8); cards only where their form factor, cooling, width and power fit."""

import pytest

from conftest import FIXTURES
from engine.data.presets import load_presets, system_problem


@pytest.fixture(scope="module")
def presets():
    return load_presets(include_user=False)


def _ids(presets, gpu, n):
    """The systems that take n of this GPU, cheapest first."""
    return [s.id for s in presets.systems_for(gpu, n)]


@pytest.mark.parametrize("gpu, counts", [("h100", {4, 8}), ("h200", {4, 8}), ("b200", {8})])
def test_sxm_modules_only_on_their_hgx_boards_4_or_8(presets, gpu, counts):
    for n in range(1, 9):
        systems = presets.systems_for(gpu, n)
        assert bool(systems) == (n in counts), (gpu, n)
        assert all(s.kind == "hgx" and gpu in s.gpu_models for s in systems)
    assert "4 or 8" in presets.why_no_system("h100", 1) and "goes 8" in presets.why_no_system("b200", 4)


def test_an_sxm_module_without_a_baseboard_preset_is_no_option(presets):
    for gpu in ("a100", "v100"):  # no HGX A100 or SXM2 server has a dated price in the presets
        assert not any(presets.systems_for(gpu, n) for n in (1, 2, 4, 8))
        assert "baseboard" in presets.why_no_system(gpu, 8)


def test_the_pcie_variants_go_in_pcie_servers(presets):
    assert _ids(presets, "h100pcie", 4) == ["srv4", "srv8"] and _ids(presets, "h100pcie", 8) == ["srv8"]
    assert _ids(presets, "h200nvl", 1) == ["srv8"]  # 600 W: more than the 2U server's 400 W a card
    assert "400 W" in system_problem(presets.gpu("h200nvl"), 4, presets.systems["srv4"])
    assert _ids(presets, "h200nvl", 8) == ["srv8"]  # 8 x 600 W fills the 4U server's 4,800 W for GPUs


def test_passive_cards_need_a_server_and_blower_cards_fit_four_to_a_workstation(presets):
    for gpu in ("l40s", "a40", "a100pcie", "rtxpro6000s"):
        assert not {"ws2", "ws4"} & {s for n in (1, 2, 4) for s in _ids(presets, gpu, n)}, gpu
    for gpu in ("a6000", "rtx6000ada", "rtxpro6000q"):
        assert _ids(presets, gpu, 4)[0] == "ws4", gpu


def test_consumer_cards_two_to_a_workstation_never_four_open_air_never_in_a_server(presets):
    for gpu in ("rtx3090", "rtx4090", "rtx5090"):
        assert _ids(presets, gpu, 2) == ["ws2"], gpu
        assert _ids(presets, gpu, 4) == [] and _ids(presets, gpu, 8) == [], gpu
        assert "blower or water" in presets.why_no_system(gpu, 4)
    # A 600 W flow-through card: two per workstation, not four.
    assert _ids(presets, "rtxpro6000", 2) == ["ws2"] and _ids(presets, "rtxpro6000", 4) == []


def test_water_cooled_cards_in_the_four_gpu_workstation_within_its_power(presets):
    """What the 4-GPU workstation preset assumes: blower cards, or cards your presets say are water-cooled
    (and narrow enough), within the power it has for GPUs."""
    assert "blower or water" in system_problem(presets.gpu("rtx4090"), 4, presets.systems["ws4"])
    water = load_presets([FIXTURES / "presets_good" / "water_cooled_4090.toml"], include_user=False)
    assert _ids(water, "rtx4090", 4) == ["ws4"]  # 4 x 450 W = the 1,800 W it has for GPUs
    assert water.why_no_system("rtx5090", 4) == "4 x 575 W is over the 1800 W for GPUs in the 4-GPU workstation"
    assert _ids(water, "rtx5090", 3) == ["ws4"]  # three fit its power
