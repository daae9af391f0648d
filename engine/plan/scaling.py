"""What the multi-GPU measurements say beside each cell's own search: how a model's best time scales with the
GPU count on one node (speed-up and efficiency against one GPU), and what the links between the GPUs cost, per
setting: the machine's own (NVLink or PCIe) against GPU-to-GPU traffic staged through host memory (no peer
access: most PCIe workstations sold) and against the same GPUs split over nodes talking over sockets.

Only final measured rows count (a time, not a crash), 16-bit ones for the scaling (fp8 changes numerics), the
latest of each setting (a later measurement
supersedes: it is marked so, no longer final). No torch here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.data.links import HOST_STAGED
from engine.data.space import CAPPED
from engine.data.store import Store

_BEST_SQL = """
SELECT model, gpu, num_gpus * num_nodes AS n, num_nodes,
       CASE WHEN num_nodes > 1 THEN coalesce(interconnect, 'network')
            WHEN interconnect = 'host-staged' THEN 'host-staged' ELSE 'own' END AS link,
       split_part(key, '|', 5) AS label, days, mfu, micro_batch, grad_accum, step_s, coalesce(fp8, false) AS fp8
FROM trials
WHERE source = 'measured' AND feasible AND days IS NOT NULL AND failure_kind IS NULL AND gpu <> 'cpu'
  AND key NOT LIKE '%|no-compile%'
  AND key NOT LIKE '%|compile-%' AND key NOT LIKE '%{capped}%' {where}
QUALIFY row_number() OVER (PARTITION BY model, gpu, num_gpus, num_nodes, link, label ORDER BY created_at DESC) = 1
"""


@dataclass(frozen=True)
class Point:
    num_gpus: int
    days: float
    label: str  # the fastest setting at that count
    mfu: float | None


@dataclass(frozen=True)
class Scaling:
    """A model's best measured time on 1, 2, 4, ... GPUs of one node (the machine's own links)."""

    model: str
    gpu: str
    points: tuple[Point, ...]

    def speedup(self, p: Point) -> float | None:
        one = next((q for q in self.points if q.num_gpus == 1), None)
        return None if one is None else one.days / p.days

    def efficiency(self, p: Point) -> float | None:
        s = self.speedup(p)
        return None if s is None else s / p.num_gpus

    def as_dict(self) -> dict[str, Any]:
        return {"model": self.model, "gpu": self.gpu, "points": [
            {"num_gpus": p.num_gpus, "days": p.days, "label": p.label, "mfu": p.mfu, "speedup": self.speedup(p),
             "efficiency": self.efficiency(p)} for p in self.points]}


@dataclass(frozen=True)
class LinkCost:
    """One setting of one cell measured over the machine's own links and over another path."""

    model: str
    gpu: str
    num_gpus: int  # in all
    label: str
    link: str  # host-staged | sockets | network
    num_nodes: int
    own_days: float
    other_days: float

    @property
    def cost(self) -> float:
        """How much longer the run takes over the other path (0.25: 25% longer)."""
        return self.other_days / self.own_days - 1

    def as_dict(self) -> dict[str, Any]:
        return {"model": self.model, "gpu": self.gpu, "num_gpus": self.num_gpus, "label": self.label,
                "link": self.link, "num_nodes": self.num_nodes, "own_days": self.own_days,
                "other_days": self.other_days, "cost": self.cost}


def _rows(store: Store, model: str | None, gpu: str | None) -> list[dict[str, Any]]:
    where, params = [], []
    for column, value in (("model", model), ("gpu", gpu)):
        if value is not None:
            where.append(f"AND {column} = ?")
            params.append(value)
    return store.query(_BEST_SQL.format(where=" ".join(where), capped=CAPPED), params)


def scaling(store: Store, model: str | None = None, gpu: str | None = None) -> list[Scaling]:
    """Every (model, GPU) measured on more than one GPU count of one node, its best time at each count."""
    best: dict[tuple[str, str], dict[int, dict[str, Any]]] = {}
    for r in _rows(store, model, gpu):
        if r["link"] != "own" or r["num_nodes"] != 1 or r["fp8"]:
            continue  # an fp8 row is another training (changes numerics): the best is of the 16-bit ones
        at = best.setdefault((r["model"], r["gpu"]), {})
        if r["n"] not in at or r["days"] < at[r["n"]]["days"]:
            at[r["n"]] = r
    out = []
    for (m, g), at in sorted(best.items()):
        if len(at) < 2:
            continue
        out.append(Scaling(m, g, tuple(Point(n, r["days"], r["label"], r["mfu"]) for n, r in sorted(at.items()))))
    return out


def link_costs(store: Store, model: str | None = None, gpu: str | None = None) -> list[LinkCost]:
    """Each setting measured both over the machine's own links and host-staged or over nodes, same GPU count."""
    own: dict[tuple, dict[str, Any]] = {}
    others: list[dict[str, Any]] = []
    for r in _rows(store, model, gpu):
        key = (r["model"], r["gpu"], r["n"], r["label"])
        if r["link"] == "own" and r["num_nodes"] == 1:
            own[key] = r
        elif r["link"] in (HOST_STAGED, "sockets", "network"):
            others.append(r)
    out = []
    for r in others:
        mine = own.get((r["model"], r["gpu"], r["n"], r["label"]))
        if mine is not None:
            out.append(LinkCost(r["model"], r["gpu"], r["n"], r["label"], r["link"], r["num_nodes"], mine["days"],
                                r["days"]))
    return sorted(out, key=lambda c: (c.model, c.gpu, c.num_gpus, c.link, c.label))
