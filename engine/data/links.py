"""How the GPUs of a multi-GPU row reached each other: the interconnect stored with it (schema v6).

`nvlink` and `pcie` are a machine's own links (`nvidia-smi topo -m` between the first two GPUs); `host-staged`
is GPU-to-GPU traffic staged through host memory (NCCL_P2P_DISABLE=1: cards without peer access, as most
PCIe workstations sold are, emulated on a machine that has it); `sockets` is NCCL over TCP between nodes
(emulated nodes of one machine, or a cluster without InfiniBand); `network` is between nodes as NCCL found it.
A host-staged row is another cell than the machine's own: its key ends in `|host-staged`. No torch here.
"""

from __future__ import annotations

import re

HOST_STAGED = "host-staged"
INTERCONNECTS = ("nvlink", "pcie", HOST_STAGED, "sockets", "network")


def own_links(row) -> bool:
    """Whether a stored row ran on one machine over that machine's own links (not staged through host memory,
    not nodes over a network)."""
    return int(row.get("num_nodes") or 1) == 1 and row.get("interconnect") not in (HOST_STAGED, "sockets", "network")


def topology_link(topology: str | None) -> str | None:
    """`nvlink` or `pcie` between GPU0 and GPU1 in `nvidia-smi topo -m`'s matrix; None if it does not say."""
    for line in (topology or "").splitlines():
        cells = line.split()
        if cells and cells[0] == "GPU0" and len(cells) > 2:
            link = cells[2]
            if re.fullmatch(r"NV\d+", link):
                return "nvlink"
            if link in ("PIX", "PXB", "PHB", "NODE", "SYS"):
                return "pcie"
    return None
