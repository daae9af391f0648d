"""What a measured search found, cell by cell: the questions a sweep answers in the paper's terms.

A cell is one model on one GPU type and count (and node count), over the machine's own links or host-staged
(NCCL_P2P_DISABLE=1: the cards-without-peer-access cell, its keys' '|host-staged'). For each, from the measured rows of
the store: the winner; free-lunch alone; the best memory-saving combination and its speed-up over
free-lunch (the paper reports up to 71% less time); the median and the worst combination; the naive
baseline; what did not fit; and the paper's pick for the cell (Table 1's days with Appendix J's
settings): on the GPU the caller names, else on the same GPU, else on a GPU of the same architecture
(the paper measured no H200: its H100 cell, the same Hopper chip with less memory).

Only default trials count: one per combination, the latest with a final outcome. Runs with another
torch.compile mode or a capped micro-batch (keys with a suffix) are variants, not the search. A
combination the sweep's memory model skipped (a 'predicted' row, failure 'memory') counts as not run;
one never tried is listed as such against the search space of the cell's GPU count.
Reads the store; never writes. No torch here.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any

from engine.data.links import HOST_STAGED
from engine.data.presets import Presets
from engine.data.space import by_label, combinations
from engine.data.store import Store, final_outcome_sql

# One row per measured (cell, combination): the latest final outcome (a time, or a verdict that the
# combination cannot run: oom, dominated, refused), else the latest failure.
_ROWS_SQL = """
SELECT model, gpu, num_gpus, num_nodes, split_part(key, '|', 7) AS link, split_part(key, '|', 5) AS label, days, mfu, micro_batch,
       grad_accum, failure_kind, failure_message, free_lunch, activation_checkpointing, sharding, offloading,
       created_at, coalesce(CASE WHEN json_valid(provenance) THEN json_extract_string(provenance, '$.causal_mask') END
                = 'dense mask', false) AS dense_mask
FROM trials
WHERE (source = 'measured' OR (source = 'predicted' AND failure_kind IN ('memory', 'cannot-win')))
  AND (len(string_split(key, '|')) = 6 OR (len(string_split(key, '|')) = 7 AND split_part(key, '|', 7) = ?))
  {where}
QUALIFY count(*) FILTER (WHERE source = 'measured') OVER (PARTITION BY model, gpu, num_gpus, num_nodes, link) > 0
    AND row_number() OVER (
    PARTITION BY model, gpu, num_gpus, num_nodes, link, label
    ORDER BY source = 'measured' AND """ + final_outcome_sql() + """ DESC, created_at DESC) = 1
ORDER BY model, gpu, num_gpus, num_nodes, link
"""

_PAPER_SQL = """
SELECT days, mfu, plausibility, micro_batch, grad_accum, activation_checkpointing, sharding, offloading,
       config_source
FROM trials WHERE source = 'paper-table1' AND model = ? AND gpu = ? AND num_gpus = ? AND num_nodes = ?
"""


@dataclass(frozen=True)
class Entry:
    """One combination of a cell, as measured."""

    label: str
    days: float | None
    mfu: float | None = None
    micro_batch: int | None = None
    grad_accum: int | None = None
    failure_kind: str | None = None
    failure_message: str | None = None
    dense_mask: bool = False  # compiled causal attention got a dense mask (engine before its fixes): slow

    @property
    def measured(self) -> bool:
        """Timed: a positive, finite number of days (a shared results file may hold anything)."""
        return self.days is not None and math.isfinite(self.days) and self.days > 0

    @property
    def extras(self) -> tuple[str, ...]:
        """The methods beyond the paper's it used (fused, fp8); () for a label this version cannot read."""
        m = by_label(self.label)
        return m.extras if m is not None else ()

    @property
    def changes_numerics(self) -> bool:
        """fp8: another training's maths (its matrix products in FP8), whatever its speed."""
        return "fp8" in self.extras


@dataclass(frozen=True)
class PaperPick:
    """The paper's fastest setting for the cell: Table 1's days, Appendix J's methods (None: unread)."""

    gpu: str
    days: float | None
    mfu: float | None
    plausibility: str | None
    activation_checkpointing: bool | None
    sharding: str | None
    offloading: bool | None
    micro_batch: int | None
    grad_accum: int | None

    @property
    def label(self) -> str:
        if self.sharding is None and self.activation_checkpointing is None:
            return "?"
        parts = []
        if self.activation_checkpointing:
            parts.append("ckpt")
        elif self.activation_checkpointing is None:
            parts.append("ckpt?")
        if self.sharding is None:
            parts.append("shard?")
        elif self.sharding != "none":
            parts.append(self.sharding)
        if self.offloading:
            parts.append("offload")
        elif self.offloading is None:
            parts.append("offload?")
        return "+".join(parts) or "free-lunch"

    @property
    def readable(self) -> bool:
        """A pick to compare with: the paper ran the cell and its sharding can be read (checkpointing and
        offloading, where unread, are taken as either)."""
        return self.days is not None and self.sharding is not None

    def matches(self, label: str) -> bool:
        """Whether a combination's label is the paper's pick, reading an unread cell as either value."""
        m = by_label(label)
        if not self.readable or m is None or not m.free_lunch:
            return False
        return all(theirs is None or theirs == ours for theirs, ours in (
            (self.activation_checkpointing, m.activation_checkpointing),
            (self.sharding, m.sharding), (self.offloading, m.offloading)))


@dataclass(frozen=True)
class Search:
    """One search of a cell (a sweep and the runs that resumed it): how it chose what to measure and what it
    cost (schema v5: engine/bench/guide.py)."""

    kind: str  # guided | exhaustive | pruned (dominance only, before guidance)
    wall_s: float | None  # summed over its parts; None when a part has no end
    trials_run: int
    trials_skipped: int  # decided without a launch: cannot win, dominated, the memory model
    parts: int  # runs: a search stopped by a time limit and resumed has several
    started_at: Any = None
    finished: bool = True

    def describe(self) -> str:
        took = f"{self.wall_s / 60:.1f} min" if self.wall_s is not None else "time unknown"
        parts = f" in {self.parts} parts" if self.parts > 1 else ""
        when = f", {self.started_at:%Y-%m-%d}" if self.started_at is not None else ""
        end = "" if self.finished else ", not finished"
        return (f"{self.kind} search: {took}{parts}, {self.trials_run} trial{'s' if self.trials_run != 1 else ''} "
                f"run, {self.trials_skipped} left unrun{when}{end}")


_SEARCHES_SQL = """
SELECT r.run_id, r.command, r.status, r.search, r.wall_s, r.trials_run, r.trials_skipped, r.started_at
FROM runs r
WHERE r.source = 'measured' AND r.run_id IN (
    SELECT run_id FROM trials WHERE model = ? AND gpu = ? AND num_gpus = ? AND num_nodes = ?
    AND (split_part(key, '|', 7) = ?) = ?)
ORDER BY r.started_at NULLS FIRST
"""


def searches(store: Store, model: str, gpu: str, num_gpus: int, num_nodes: int = 1,
             link: str = "") -> tuple[Search, ...]:
    """The cell's searches, oldest first: a run that ended stopped (a time limit) and the next run of the same
    command are one search in parts. link 'host-staged': the cell's host-staged searches, else its own links'."""
    out: list[Search] = []
    open_command = None
    for r in store.query(_SEARCHES_SQL, [model, gpu, num_gpus, num_nodes, HOST_STAGED, link == HOST_STAGED]):
        wall = r["wall_s"]
        part = Search(r["search"] or "pruned", wall, int(r["trials_run"] or 0), int(r["trials_skipped"] or 0), 1,
                      r["started_at"], r["status"] == "done")
        if out and open_command is not None and r["command"] == open_command:
            last = out[-1]
            out[-1] = Search(last.kind, None if last.wall_s is None or wall is None else last.wall_s + wall,
                             last.trials_run + part.trials_run, last.trials_skipped + part.trials_skipped,
                             last.parts + 1, last.started_at, part.finished)
        else:
            out.append(part)
        open_command = r["command"] if r["status"] in ("stopped", "interrupted") else None
    return tuple(out)


@dataclass(frozen=True)
class CellFindings:
    model: str
    gpu: str
    num_gpus: int
    num_nodes: int
    entries: tuple[Entry, ...]  # the free-lunch-on combinations, fastest first, then those without a time
    naive: Entry | None
    paper: PaperPick | None
    never_tried: tuple[str, ...] = ()  # combinations of the search space with no row at all
    searches: tuple[Search, ...] = ()  # how the cell was searched, and what each search cost
    link: str = ""  # 'host-staged': GPU-to-GPU traffic through host memory (no peer access); '': the own links

    @property
    def timed(self) -> list[Entry]:
        return [e for e in self.entries if e.measured]

    @property
    def not_timed(self) -> list[Entry]:
        return [e for e in self.entries if not e.measured]

    @property
    def winner(self) -> Entry | None:
        return self.timed[0] if self.timed else None

    @property
    def free_lunch(self) -> Entry | None:
        return next((e for e in self.entries if e.label == "free-lunch"), None)

    @property
    def best_memory_saving(self) -> Entry | None:
        """The fastest of the paper's memory-saving settings (fused and fp8 are not: what the paper's 'up to
        71%' is read against)."""
        return next((e for e in self.timed if e.label != "free-lunch" and not e.extras), None)

    @property
    def time_saved(self) -> float | None:
        """1 - best memory-saving days / free-lunch days: the paper's 'up to 71%'. Negative: slower.
        None where free-lunch has no time (it did not fit: memory-saving methods are then the only way)."""
        fl, best = self.free_lunch, self.best_memory_saving
        if fl is None or not fl.measured or best is None:
            return None
        return 1 - best.days / fl.days

    @property
    def median(self) -> Entry | None:
        """The middle combination by days (the faster of the two middle ones for an even count)."""
        timed = self.timed
        return timed[(len(timed) - 1) // 2] if timed else None

    @property
    def median_days(self) -> float | None:
        timed = self.timed
        return statistics.median(e.days for e in timed) if timed else None

    @property
    def worst(self) -> Entry | None:
        return self.timed[-1] if self.timed else None

    @property
    def dense_mask(self) -> list[Entry]:
        """Timed with a dense causal mask: today's engine runs these faster, so their ranks may move."""
        return [e for e in self.timed if e.dense_mask]

    @property
    def space_size(self) -> int:
        return len(self.entries) + len(self.never_tried)

    @property
    def winner_agrees(self) -> bool | None:
        """Whether our winner is the paper's pick; None where there is nothing to compare: no winner, no
        readable pick, or the pick was not measured here (a winner may only beat what was run)."""
        if self.winner is None or self.paper is None or not self.paper.readable or self.paper_pick_measured is None:
            return None
        return self.paper.matches(self.winner.label)

    @property
    def paper_pick_measured(self) -> Entry | None:
        """Our measurement of the paper's pick (the fastest of them where Appendix J leaves a method unread)."""
        if self.paper is None or not self.paper.readable:
            return None
        return next((e for e in self.timed if self.paper.matches(e.label)), None)

    def as_dict(self) -> dict[str, Any]:
        def entry(e: Entry | None) -> dict[str, Any] | None:
            return None if e is None else {
                "label": e.label, "days": e.days, "mfu": e.mfu, "micro_batch": e.micro_batch,
                "grad_accum": e.grad_accum, "failure_kind": e.failure_kind, "failure_message": e.failure_message,
                "dense_mask": e.dense_mask}

        p = self.paper
        return {
            "model": self.model, "gpu": self.gpu, "num_gpus": self.num_gpus, "num_nodes": self.num_nodes,
            "link": self.link or "own",
            "combinations": self.space_size, "timed": len(self.timed), "never_tried": list(self.never_tried),
            "winner": entry(self.winner), "free_lunch": entry(self.free_lunch),
            "best_memory_saving": entry(self.best_memory_saving), "time_saved": self.time_saved,
            "median": entry(self.median), "median_days": self.median_days, "worst": entry(self.worst),
            "naive": entry(self.naive), "not_timed": [entry(e) for e in self.not_timed],
            "searches": [{"search": x.kind, "wall_s": x.wall_s, "trials_run": x.trials_run,
                          "trials_skipped": x.trials_skipped, "parts": x.parts, "finished": x.finished,
                          "started_at": x.started_at} for x in self.searches],
            "paper": None if p is None else {
                "gpu": p.gpu, "days": p.days, "mfu": p.mfu, "plausibility": p.plausibility, "label": p.label,
                "micro_batch": p.micro_batch, "grad_accum": p.grad_accum,
                "readable": p.readable, "winner_agrees": self.winner_agrees,
                "measured": entry(self.paper_pick_measured)},
        }


def findings(store: Store, presets: Presets | None = None, model: str | None = None, gpu: str | None = None,
             num_gpus: int | None = None, paper_gpu: str | None = None) -> list[CellFindings]:
    """Every measured cell (filtered by model, GPU and count), with the paper's pick for it: on paper_gpu
    where given, else on the same GPU, else (with presets) on a GPU of the same architecture."""
    where, params = [], []
    for column, value in (("model", model), ("gpu", gpu), ("num_gpus", num_gpus)):
        if value is not None:
            where.append(f"AND {column} = ?")
            params.append(value)
    rows = store.query(_ROWS_SQL.format(where=" ".join(where)), [HOST_STAGED, *params])
    cells: dict[tuple, list[dict[str, Any]]] = {}
    for r in rows:
        cells.setdefault((r["model"], r["gpu"], r["num_gpus"], r["num_nodes"], r["link"] or ""), []).append(r)
    out = []
    for (m, g, n, nodes, link), members in cells.items():
        entries = [Entry(r["label"], r["days"], r["mfu"], r["micro_batch"], r["grad_accum"],
                         None if r["days"] is not None else (r["failure_kind"] or "infeasible"),
                         r["failure_message"], bool(r["dense_mask"]) and r["days"] is not None) for r in members]
        naive = next((e for e in entries if e.label == "naive"), None)
        searched = sorted((e for e in entries if e.label != "naive"),
                          key=lambda e: (e.days is None, e.days or 0.0, e.label))
        candidates = [paper_gpu] if paper_gpu else [g, *_same_architecture(presets, g)]
        # the paper's machines had their own links: its pick is compared with the own-links cell only
        paper = None if link else next(filter(None, (_paper(store, m, c, n, nodes) for c in candidates)), None)
        seen = {e.label for e in searched}
        never = tuple(c.label for c in combinations(n * nodes) if c.label not in seen)
        out.append(CellFindings(m, g, n, nodes, tuple(searched), naive, paper, never,
                                searches(store, m, g, n, nodes, link), link))
    return out


def _same_architecture(presets: Presets | None, gpu: str) -> list[str]:
    """Other GPUs of the same architecture, the nearest first: the same form factor (an H200 SXM's twin is
    the H100 SXM, not the H200 NVL card), then memory and dense peak (an A40's twin is the A6000, not the
    RTX 3090)."""
    if presets is None or gpu not in presets.gpus:
        return []
    me = presets.gpus[gpu]
    same = [g for g in presets.gpus.values() if g.id != gpu and g.architecture == me.architecture]
    same.sort(key=lambda g: (g.form_factor != me.form_factor,
                             abs(g.memory_gb - me.memory_gb) / me.memory_gb
                             + abs(g.peak_16bit_tflops - me.peak_16bit_tflops) / me.peak_16bit_tflops))
    return [g.id for g in same]


def _paper(store: Store, model: str, gpu: str, n: int, nodes: int) -> PaperPick | None:
    rows = store.query(_PAPER_SQL, [model, gpu, n, nodes])
    if not rows:
        return None
    r = rows[0]
    return PaperPick(gpu, r["days"], r["mfu"], r["plausibility"], r["activation_checkpointing"], r["sharding"],
                     r["offloading"], r["micro_batch"], r["grad_accum"])
