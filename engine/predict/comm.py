"""How much of the GPU-to-GPU communication a step hides behind the GPU's own work, calibrated on settings
measured twice on one machine: over its own links (NVLink: the communication is too small to see) and over a
slower path, host-staged (NCCL_P2P_DISABLE=1) or TCP sockets between emulated nodes (the `loopback` network
preset), whose rates scripts/nccl_probe.py measured there.

The model: communication that takes T seconds at the link's rate runs beside G seconds of the GPU's work it
can overlap, and the step waits for what is left,

    exposed(T) = max(0, T - h x G)

G is the pass's GPU time for FSDP and ZeRO (their gathers run ahead of the forward, their reduce-scatters
beside the backward) and the last micro-batch's backward (2/3 of its pass) for DDP's all-reduce, which
starts as its buckets fill. h, the share of G the communication really hides behind, is per kind (DDP,
FSDP, ZeRO), from the pairs' (T over the slow path - what the pair's time grew by) / G, clipped to [0, 1].
A pair whose time grew by less than a fifth of its T hid nearly all of it: it says only that h is at least
that much (a lower bound; more GPU work to hide behind would not have shown). h is the median of the pairs
that showed their communication, raised to the largest lower bound where one is higher; the largest lower
bound where every pair hid nearly all; 0 (added in full, as before any pair was measured) where no pair says.
No torch here.
"""

from __future__ import annotations

import dataclasses
import statistics
from typing import Any, Iterable, Mapping

from engine.data import space
from engine.data.errors import PlannerError
from engine.data.links import HOST_STAGED, own_links
from engine.data.presets import Presets
from engine.data.store import provenance_view
from engine.predict import memory
from engine.predict.terms import comm_bytes, link_bytes_per_s

LOOPBACK = "loopback"  # the network preset of nodes emulated on one machine (TCP sockets over lo)
KINDS = ("ddp", "fsdp", "zero")
BACKWARD_SHARE = 2 / 3  # of a pass: what DDP's all-reduce can run beside (its buckets fill during the backward)
HID_NEARLY_ALL = 0.2  # a pair that grew by less than this share of its communication is a lower bound on h


def comm_kind(methods) -> str:
    if methods.sharding == "none":
        return "ddp"
    return "fsdp" if methods.fsdp else "zero"


def overlappable(kind: str, gpu_pass_s: float) -> float:
    """G: the GPU time a kind's communication can run beside, from a pass's GPU time."""
    return gpu_pass_s * (BACKWARD_SHARE if kind == "ddp" else 1.0)


def exposed(comm_s: float, hidden: float, kind: str, gpu_pass_s: float) -> float:
    """What a step waits for of comm_s seconds of communication (max(0, T - h x G))."""
    return max(0.0, comm_s - hidden * overlappable(kind, gpu_pass_s))


def waits(pass_bytes: float, step_bytes: float, rate: float, hidden: float, kind: str,
          gpu_pass_s: float) -> tuple[float, float]:
    """(what a pass waits for, what a step's update waits for) of its communication at `rate` bytes/s: DDP's
    all-reduce runs beside the last pass's backward; ZeRO-1/2's gather after the update beside nothing."""
    return (exposed(pass_bytes / rate, hidden, kind, gpu_pass_s),
            exposed(step_bytes / rate, hidden if kind == "ddp" else 0.0, kind, gpu_pass_s))


def comm_overlap(rows: Iterable[Mapping[str, Any]], presets: Presets) -> tuple[dict[str, float], dict[str, str]]:
    """(h per kind, a note per kind saying where it comes from)."""
    rows = [r for r in rows if r.get("source") == "measured" and r.get("feasible") and r.get("pass_s")
            and r.get("micro_batch") and not memory.beyond_the_paper(r)]
    own: dict[tuple, list[Mapping[str, Any]]] = {}  # a cell's rows over its own links, oldest first
    for r in sorted(rows, key=lambda r: str(r.get("created_at") or "")):
        if own_links(r) and space.cap_of(r) is None:  # a capped row times another micro-batch
            own.setdefault(_cell(r), []).append(r)
    net = presets.networks.get(LOOPBACK)
    found: dict[str, list[tuple[float, str, bool]]] = {k: [] for k in KINDS}  # (h, pair, only a lower bound)
    for r in rows:
        nodes = int(r.get("num_nodes") or 1)
        staged = nodes == 1 and r.get("interconnect") == HOST_STAGED
        sockets = nodes > 1 and r.get("interconnect") == "sockets" and net is not None
        siblings = [o for o in own.get(_cell(r), []) if o["micro_batch"] == r["micro_batch"]] \
            if staged or sockets else []
        if not siblings:
            continue
        try:
            model, gpu, methods = presets.model(r["model"]), presets.gpu(r["gpu"]), memory.methods_of(r)
        except PlannerError:
            continue
        o, older_engine = _sibling(r, siblings, comm_kind(methods))
        if o is None:
            continue
        n = _gpus(r)
        cb_pass, cb_update = comm_bytes(model, methods, n)
        if staged:
            rate = link_bytes_per_s(dataclasses.replace(gpu, p2p=False), n)
        else:
            rate = min(link_bytes_per_s(gpu, int(r["num_gpus"])), net.node_bytes_per_s)
        kind = comm_kind(methods)
        if kind == "ddp":
            grew, comm = (r.get("update_s") or 0) - (o.get("update_s") or 0), cb_update
        else:
            grew, comm = r["pass_s"] - o["pass_s"], cb_pass
        g = overlappable(kind, o["pass_s"])
        if comm > 0 and g > 0:
            t = comm / rate  # what the slow path's communication takes
            path = "host-staged" if staged else f"{nodes} nodes over sockets"
            label = (f"{r['model']} {methods.label} on {n} x {r['gpu']}, {path}"
                     + (" (timed before every block compiled: its growth holds more than communication)"
                        if older_engine else ""))
            found[kind].append((min(1.0, max(0.0, (t - grew) / g)), label,
                                grew < HID_NEARLY_ALL * t or older_engine))
    hidden, notes = {}, {}
    for k in KINDS:
        pool = found[k]
        if pool:
            shown = [h for h, _, bound in pool if not bound]
            mid = statistics.median(shown) if shown else None
            least = max((h for h, _, bound in pool if bound), default=0.0)
            hidden[k] = least if mid is None else max(mid, least)
            how = ("the least that every pair allows" if mid is None else
                   "raised to what a pair that hid nearly all of it needs" if least > mid else
                   "median of the pairs that showed it")
            notes[k] = (f"hides behind {hidden[k]:.0%} of the GPU work it can overlap ({how}): "
                        + "; ".join(f"{label}: {'at least ' if bound else ''}{h:.0%}" for h, label, bound in pool))
        else:
            hidden[k] = 0.0
            notes[k] = "added in full (no measured pair says how much is hidden)"
    return hidden, notes


def blocks_compiled(r: Mapping[str, Any]) -> bool:
    """Whether a row's engine compiled every block under FSDP: since 2026-11-27 (night) a compiled trial records
    what Dynamo made of it, and FSDP raises the recompile limit to the model's blocks; before, blocks past the
    eighth ran uncompiled, a slower pass."""
    return "dynamo" in provenance_view(r.get("provenance"))


def _sibling(r: Mapping[str, Any], siblings: list[Mapping[str, Any]], kind: str) -> tuple[Any, bool]:
    """The own-links row a slow-path row is read against: the latest at its micro-batch, of the same FSDP engine
    where one was measured (r's growth is then communication). (row, True) where only a later engine's is there:
    r's pass then also holds its uncompiled blocks, so its growth overstates the communication's and the h it
    gives is a lower bound. (None, False) for a slow-path row of the later engine beside an earlier one's (its
    growth understated)."""
    if kind != "fsdp" or not r.get("compile"):
        return siblings[-1], False
    like = [o for o in siblings if blocks_compiled(o) == blocks_compiled(r)]
    if like:
        return like[-1], False
    if blocks_compiled(r):
        return None, False
    return siblings[-1], True


def _gpus(r: Mapping[str, Any]) -> int:
    return int(r["num_gpus"]) * int(r.get("num_nodes") or 1)


def _cell(r: Mapping[str, Any]) -> tuple:
    """A setting on a GPU type and count, whatever path its GPUs talked over."""
    try:
        label = memory.methods_of(r).label
    except (PlannerError, KeyError, TypeError, ValueError):
        label = None
    return (r["model"], r["gpu"], _gpus(r), label, bool(r.get("compile")))
