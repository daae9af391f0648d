"""How much of the GPU-to-GPU communication a step exposes, calibrated on rows measured across emulated
nodes: the same setting measured over the machine's own links and over TCP sockets between nodes (the
`loopback` network preset, whose rate scripts/nccl_probe.py measured on that machine). Over NVLink the
communication is too small to see in a pass; over sockets it is most of the difference, so

    exposed = (time over sockets - time over the own links) / (comm bytes / socket rate - comm bytes / own rate)

per kind of traffic: DDP's all-reduce (in the update: the engine times the step's last backward and its
all-reduce apart), FSDP's gathers and reduce-scatters, ZeRO's (both in each pass). Clipped to [0, 1]
(prefetch can hide communication behind the GPU's work, never make it cost less than nothing); the median
per kind; 1 (added in full, as before any such pair was measured) where no pair says otherwise.
No torch here.
"""

from __future__ import annotations

import statistics
from typing import Any, Iterable, Mapping

from engine.data.errors import PlannerError
from engine.data.links import HOST_STAGED
from engine.data.presets import Presets
from engine.predict import memory
from engine.predict.terms import comm_bytes, link_bytes_per_s

LOOPBACK = "loopback"  # the network preset of nodes emulated on one machine (TCP sockets over lo)
KINDS = ("ddp", "fsdp", "zero")


def comm_kind(methods) -> str:
    if methods.sharding == "none":
        return "ddp"
    return "fsdp" if methods.fsdp else "zero"


def comm_exposure(rows: Iterable[Mapping[str, Any]], presets: Presets) -> tuple[dict[str, float], dict[str, str]]:
    """(exposed share per kind, a note per kind saying where it comes from)."""
    rows = [r for r in rows if r.get("source") == "measured" and r.get("feasible") and r.get("pass_s")
            and r.get("micro_batch")]
    net = presets.networks.get(LOOPBACK)
    found: dict[str, list[tuple[float, str]]] = {k: [] for k in KINDS}
    if net is not None:
        own: dict[tuple, Mapping[str, Any]] = {}
        for r in sorted(rows, key=lambda r: str(r.get("created_at") or "")):
            if int(r.get("num_nodes") or 1) == 1 and r.get("interconnect") not in (HOST_STAGED, "sockets", "network"):
                own[_cell(r)] = r
        for r in rows:
            if int(r.get("num_nodes") or 1) < 2 or r.get("interconnect") != "sockets":
                continue
            o = own.get(_cell(r))
            if o is None or o["micro_batch"] != r["micro_batch"]:
                continue
            try:
                model, gpu, methods = presets.model(r["model"]), presets.gpu(r["gpu"]), memory.methods_of(r)
            except PlannerError:
                continue
            n = _gpus(r)
            cb_pass, cb_update = comm_bytes(model, methods, n)
            own_rate = link_bytes_per_s(gpu, n)
            sock_rate = min(link_bytes_per_s(gpu, int(r["num_gpus"])), net.node_bytes_per_s)
            kind = comm_kind(methods)
            if kind == "ddp":
                extra, comm = (r.get("update_s") or 0) - (o.get("update_s") or 0), cb_update
            else:
                extra, comm = r["pass_s"] - o["pass_s"], cb_pass
            added = comm / sock_rate - comm / own_rate
            if added > 0:
                label = f"{r['model']}/{r['num_nodes']}x{r['num_gpus']}x{r['gpu']} {methods.label}"
                found[kind].append((min(1.0, max(0.0, extra / added)), label))
    exposed, notes = {}, {}
    for k in KINDS:
        pool = found[k]
        if pool:
            exposed[k] = statistics.median(e for e, _ in pool)
            notes[k] = (f"{exposed[k]:.0%} of it exposed: measured over sockets between emulated nodes against "
                        f"the machine's own links ({', '.join(label for _, label in pool)})")
        else:
            exposed[k] = 1.0
            notes[k] = "added in full (no overlap credit: no measured pair says how much is hidden)"
    return exposed, notes


def _gpus(r: Mapping[str, Any]) -> int:
    return int(r["num_gpus"]) * int(r.get("num_nodes") or 1)


def _cell(r: Mapping[str, Any]) -> tuple:
    return (r["model"], r["gpu"], _gpus(r), str(r.get("key", "")).split("|")[4] if r.get("key") else None)
