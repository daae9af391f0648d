"""Guided search: predict every combination of a cell first, measure them in order of predicted time, and
leave unmeasured each one that could not beat the best measured even at the optimistic end of its band.

    guide = guide_for(rows, presets, "pythia-1b", "h100", 1)       # None: nothing to predict it from
    labels = guide.order(["naive", "free-lunch", "ckpt", ...])      # fastest predicted first
    why = guide.why_not("zero1+offload", best_days=40.5, best="free-lunch")  # a reason, or None: measure it

The rule is safe to the extent the bands are: a combination is skipped only when its band's low end
(`days_low`, from the leave-one-out validation, engine/predict/validate.py) is no faster than a time
already measured. The predictions are made without this cell's own measured rows (leave-one-cell-out),
so the search is what a user who never measured the cell would run; `replay` runs the same rule over a
cell measured exhaustively (the proof that it keeps the winner). No torch here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from engine.data.errors import PlannerError
from engine.data.presets import Presets


@dataclass(frozen=True)
class Guess:
    """One combination's prediction, as the guided search uses it."""

    label: str
    feasible: bool
    days: float | None = None
    days_low: float | None = None
    days_high: float | None = None
    micro_batch: int | None = None
    reason: str = ""  # why it is predicted not to run, when it is not feasible
    measured: bool = False  # the figure is this cell's measurement already in the database (use_measured)

    def text(self) -> str:
        if not self.feasible or self.days is None:
            return f"predicted not to run ({self.reason})" if self.reason else "no prediction"
        band = (f" ({self.days_low:.3g}-{self.days_high:.3g})"
                if self.days_low is not None and self.days_high is not None else "")
        return f"{'measured already' if self.measured else 'predicted'} {self.days:.3g} days{band} at micro-batch {self.micro_batch}"


@dataclass(frozen=True)
class Guide:
    """The predictions one sweep is guided by, and the evidence they rest on."""

    guesses: Mapping[str, Guess]
    basis: str = ""
    predictions: tuple[Any, ...] = field(default=(), compare=False)  # engine.predict.Prediction, to store

    def order(self, labels: Iterable[str]) -> list[str]:
        """Fastest predicted first; then those predicted not to fit (the memory model may be wrong: they
        are still tried, last); then those with no prediction, in their given order."""
        labels = list(labels)

        def key(item: tuple[int, str]) -> tuple[int, float, int]:
            i, label = item
            g = self.guesses.get(label)
            if g is None:
                return (2, 0.0, i)
            if g.feasible and g.days is not None:
                return (0, g.days, i)
            return (1, 0.0, i)

        return [label for _, label in sorted(enumerate(labels), key=key)]

    def why_not(self, label: str, best_days: float | None, best: str = "") -> str | None:
        """Why this combination need not be measured: even its band's low end is no faster than the best
        measured (`best_days`, set by `best`). None: it could still win, measure it."""
        g = self.guesses.get(label)
        if best_days is None or g is None or not g.feasible or g.days_low is None:
            return None
        if g.days_low < best_days:
            return None
        by = f" ({best})" if best else ""
        return (f"cannot win: {g.text()}; even its band's low end, {g.days_low:.3g} days, is no faster than "
                f"the {best_days:.3g} days measured{by}")


# A setting of the cell already measured guides by its measurement: repetitions of one setting spread by a few
# percent (docs/measurements.md), so its band is this much either side.
MEASURED_SPREAD = 0.03


def guide_for(rows: Sequence[Mapping[str, Any]], presets: Presets, model_id: str, gpu: str, num_gpus: int,
              method_set: str = "all", num_nodes: int = 1, network=None, use_measured: bool = False,
              extras: Sequence[str] = (), max_micro_batch: int | None = None) -> Guide | None:
    """The guide for one cell, predicted from `rows` (measured and paper rows) without the cell's own
    measured rows. None when the predictor has no basis for the model (nothing feasible or infeasible
    could be said): the sweep then runs in the search space's order.

    extras: the methods beyond the paper's the sweep searches too (fused, fp8), predicted with the rest.
    max_micro_batch: the sweep's cap on the micro-batch (`bench --max-micro-batch`), predicted at it; the cell's
    measurements at their own micro-batches do not guide it.

    use_measured (a new search, issue 39): what `rows` already measured of the cell guides it. The cell's rows
    stay in the predictor (its residual comes from them), and a setting measured there is guessed at its
    measured median, +-MEASURED_SPREAD. Without it (the replay's proof), the cell is predicted as if
    nobody had measured it."""
    from engine.data.runs import rows_on_run
    from engine.predict import PredictError, build_predictor

    n = num_gpus * num_nodes
    model = presets.model(model_id)
    others = [r for r in rows if r.get("source") != "predicted" and (use_measured or not (
        r.get("model") == model_id and r.get("gpu") == gpu
        and int(r.get("num_gpus") or 0) * int(r.get("num_nodes") or 1) == n))]
    try:
        predictor = build_predictor(rows_on_run(others, model), presets, for_model=model_id)
        # nodes joined by a network preset: predicted across it (the sweep gives none a guide without one)
        preds = predictor.predict_cell(model_id, gpu, n, method_set, nodes=num_nodes if network else 1,
                                       network=network, extras=extras, max_micro_batch=max_micro_batch)
    except (PredictError, PlannerError):
        return None
    if all(not p.feasible and p.reason.startswith("no basis") for p in preds):
        return None
    guesses = {p.label: Guess(p.label, bool(p.feasible and p.days is not None), p.days, p.days_low, p.days_high,
                              p.micro_batch, "" if p.feasible else p.reason) for p in preds}
    basis = next((p.basis for p in preds if p.basis), "")
    if use_measured and not (num_nodes > 1 and network) and not max_micro_batch:
        import statistics

        own: dict[str, list] = {}
        for b in predictor.basis:  # the cell's measurements on this run, today's engine (not the dense mask)
            if b.source == "measured" and b.cell == (model_id, gpu, n) and b.group != "compiled-mask":
                own.setdefault(b.methods.label, []).append(b)
        for label, bs in own.items():
            if label in guesses:
                days = statistics.median(b.days for b in bs)
                mb = max(b.micro_batch or 0 for b in bs) or guesses[label].micro_batch
                guesses[label] = Guess(label, True, days, days * (1 - MEASURED_SPREAD), days * (1 + MEASURED_SPREAD), mb,
                                    measured=True)
        if own:
            basis = (f"measured already: {len(own)} setting(s) of this cell at their measured median "
                     f"(+-{MEASURED_SPREAD:.0%}), the rest predicted with the cell's rows in the fit; " + basis)
    return Guide(guesses, basis=basis, predictions=tuple(preds))


@dataclass(frozen=True)
class Replay:
    """What the guided rule would have done in a cell measured exhaustively."""

    order: tuple[str, ...]
    measured: tuple[str, ...]
    skipped: Mapping[str, str]
    winner: str | None
    exhaustive_winner: str | None

    @property
    def same_winner(self) -> bool:
        return self.winner == self.exhaustive_winner


def replay(guide: Guide, outcomes: Mapping[str, float | None]) -> Replay:
    """Run the guided rule over a cell whose every combination was measured: `outcomes` maps each label to
    its measured days (None: it did not run, out of memory or refused). The guided search measures in
    the guide's order and skips what cannot beat the best so far; its winner is the fastest it measured."""
    order = guide.order(outcomes)
    best_days, best = None, None
    measured, skipped = [], {}
    for label in order:
        why = guide.why_not(label, best_days, best or "")
        if why is not None:
            skipped[label] = why
            continue
        measured.append(label)
        days = outcomes[label]
        if days is not None and (best_days is None or days < best_days):
            best_days, best = days, label
    done = {k: v for k, v in outcomes.items() if v is not None}
    exhaustive = min(done, key=lambda k: done[k]) if done else None
    return Replay(tuple(order), tuple(measured), skipped, best, exhaustive)


def exhaustive_cells(rows: Sequence[Mapping[str, Any]], presets: Presets) -> dict[tuple[str, str, int, int], dict]:
    """The cells of `rows` measured over the whole search space (each combination has a time, or ran out
    of memory, or was refused): (model, gpu, num_gpus, num_nodes) -> {label: days or None}. The latest
    final outcome of each combination counts."""
    from engine.data import space

    latest: dict[tuple[str, str, int, int, str], tuple[Any, float | None]] = {}
    for r in rows:
        if r.get("source") != "measured" or not r.get("key"):
            continue
        parts = str(r["key"]).split("|")
        if len(parts) != 6:
            continue
        if r.get("feasible") and r.get("days") and not r.get("failure_kind"):
            outcome = float(r["days"])
        elif r.get("failure_kind") in ("oom", "refused", "dominated"):
            outcome = None  # did not run, or cannot be faster than a measured subset of its methods (trial.py)
        else:
            continue  # a failure, a stop, a pruned combination: not a final measured outcome
        cell = (r["model"], r["gpu"], int(r["num_gpus"]), int(r.get("num_nodes") or 1), parts[4])
        when = r.get("created_at")
        if cell not in latest or (when is not None and latest[cell][0] is not None and when > latest[cell][0]):
            latest[cell] = (when, outcome)
    cells: dict[tuple[str, str, int, int], dict] = {}
    for (model, gpu, n, nodes, label), (_, outcome) in latest.items():
        cells.setdefault((model, gpu, n, nodes), {})[label] = outcome
    out = {}
    for cell, got in cells.items():
        if cell[0] not in presets.models:
            continue
        want = {m.label for m in space.search_space("all", cell[2] * cell[3])}
        if want <= set(got) and any(v is not None for v in got.values()):
            out[cell] = {k: got[k] for k in want}
    return out

