"""How a trial's GPUs reach each other is data stored with it: NVLink, PCIe, staged through host memory (no
peer access), or sockets between nodes; a host-staged row is another cell than the machine's own."""

from __future__ import annotations

import json

import pytest

from engine.bench import environment as env_mod
from engine.bench.environment import interconnect_of, nccl_settings
from engine.data.links import topology_link
from engine.bench.sweep import SweepRequest, host_staged, link_provenance, plan
from engine.data import space
from engine.data.presets import load_presets

NVLINK_TOPO = ("\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
               "GPU0\t X \tNV18\t0-31\t0\t\tN/A\nGPU1\tNV18\t X \t0-31\t0\t\tN/A\n")
PCIE_TOPO = "\tGPU0\tGPU1\nGPU0\t X \tPHB\nGPU1\tPHB\t X \n"


def test_interconnect_from_topology_and_nccl_settings():
    assert topology_link(NVLINK_TOPO) == "nvlink"
    assert topology_link(PCIE_TOPO) == "pcie"
    assert topology_link(None) is None and topology_link("garbage\nGPU0") is None
    assert interconnect_of({}, NVLINK_TOPO, 1) is None  # one GPU: nothing between GPUs
    assert interconnect_of({}, NVLINK_TOPO, 4) == "nvlink"
    assert interconnect_of({"NCCL_P2P_DISABLE": "1"}, NVLINK_TOPO, 4) == "host-staged"
    lo = {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1", "NCCL_SOCKET_IFNAME": "lo"}
    assert interconnect_of(lo, NVLINK_TOPO, 2, num_nodes=2, launcher="local-nodes") == "sockets"
    assert interconnect_of({}, NVLINK_TOPO, 8, num_nodes=2, launcher="srun") == "network"
    got = nccl_settings({"NCCL_P2P_DISABLE": "1", "PATH": "/bin", "NVSHMEM_DISABLE_NVLS": "1"})
    assert got == {"NCCL_P2P_DISABLE": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def test_a_host_staged_sweep_is_its_own_cell(monkeypatch):
    monkeypatch.delenv("NCCL_P2P_DISABLE", raising=False)
    presets = load_presets()
    nvlink = SweepRequest(model="pythia-1b", num_gpus=4, only=("free-lunch",))
    staged = SweepRequest(model="pythia-1b", num_gpus=4, only=("free-lunch",), no_p2p=True)
    one = SweepRequest(model="pythia-1b", num_gpus=1, only=("free-lunch",), no_p2p=True)
    [a], [b], [c] = plan(nvlink, presets, "h100"), plan(staged, presets, "h100"), plan(one, presets, "h100")
    assert not host_staged(nvlink) and host_staged(staged) and not host_staged(one)
    assert a.key.endswith("|cuda") and b.key == a.key + "|host-staged"
    assert a.env == {} and b.env == {"NCCL_P2P_DISABLE": "1"} and c.env == {}
    # NCCL_P2P_DISABLE=1 in the sweep's own environment is the same cell, labelled the same
    monkeypatch.setenv("NCCL_P2P_DISABLE", "1")
    [d] = plan(nvlink, presets, "h100")
    assert d.key == b.key
    machine = env_mod.Machine(host="h", gpus=["NVIDIA H100 80GB HBM3"] * 4, topology=NVLINK_TOPO)
    prov = link_provenance(staged, b, machine)
    assert prov["interconnect"] == "host-staged" and prov["nccl_env"]["NCCL_P2P_DISABLE"] == "1"
    assert prov["nccl_env"]["NCCL_NVLS_ENABLE"] == "0"  # the safe settings are kept and recorded
    monkeypatch.delenv("NCCL_P2P_DISABLE")
    assert link_provenance(nvlink, a, machine)["interconnect"] == "nvlink"
    assert json.dumps(prov)
    assert space.FREE_LUNCH.label == "free-lunch"


def _row(n, label, days, nodes=1, link=None, when=0):
    import datetime as dt

    from engine.data.store import Trial

    suffix = "|host-staged" if link == "host-staged" else ""
    return Trial(model="pythia-1b", gpu="h200", num_gpus=n, num_nodes=nodes, feasible=True, source="measured",
                 key=f"pythia-1b|h200|{n}|{nodes}|{label}|cuda{suffix}", days=days, mfu=0.5, interconnect=link,
                 micro_batch=16, grad_accum=16, created_at=dt.datetime(2026, 11, 27, 6, when))


def test_scaling_and_what_the_links_cost(capsys):
    from engine.data.store import Run, Store
    from engine.plan.scaling import link_costs, scaling
    from tui_planner.views import print_findings

    with Store.open(None) as s:
        s.add_run(Run(source="measured"))
        s.add_trials([_row(1, "free-lunch", 40.0), _row(2, "free-lunch", 21.0), _row(4, "free-lunch", 11.0, link="nvlink"),
                      _row(4, "free-lunch", 10.0, link="nvlink", when=5),  # a later measurement: the latest counts
                      _row(4, "fsdp2", 12.0, link="nvlink"), _row(4, "fsdp2", 13.2, link="host-staged"),
                      _row(4, "free-lunch", 10.5, link="host-staged"),
                      _row(2, "free-lunch", 12.5, nodes=2, link="sockets")])
        [sc] = scaling(s)
        costs = link_costs(s)
    assert [(p.num_gpus, p.days) for p in sc.points] == [(1, 40.0), (2, 21.0), (4, 10.0)]  # host-staged left out
    assert sc.speedup(sc.points[2]) == 4.0 and sc.efficiency(sc.points[1]) == pytest.approx(40 / 21 / 2)
    got = {(c.label, c.link): round(c.cost, 3) for c in costs}
    assert got == {("fsdp2", "host-staged"): 0.1, ("free-lunch", "host-staged"): 0.05, ("free-lunch", "sockets"): 0.25}
    print_findings([], scaling=[sc], links=costs)
    out = capsys.readouterr().out
    assert "4.00x" in out and "100%" in out and "2 nodes, sockets" in out and "+25%" in out
