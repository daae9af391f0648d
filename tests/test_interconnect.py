"""How a trial's GPUs reach each other is data stored with it: NVLink, PCIe, staged through host memory (no
peer access), or sockets between nodes; a host-staged row is another cell than the machine's own."""

from __future__ import annotations

import json

from engine.bench import environment as env_mod
from engine.bench.environment import interconnect_of, nccl_settings, topology_link
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
