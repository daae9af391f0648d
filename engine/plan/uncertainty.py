"""How sure a ranked figure is: its band, the deadline verdict it gives, and whether it is extrapolated to a
GPU generation nobody measured.

A measured figure is its own band (its repetitions' spread is a few percent); a paper row the ranking uses
is one whose implied MFU is plausible, and it has no band either; a predicted one carries the leave-one-out
band stored with it (engine/predict/), its top widened to the paper's plausible figure for the cell when
that is slower. The deadline verdict reads the band: met when even its top is within
the deadline, at risk when the deadline falls inside it, missed when even its bottom is past it.
"""

from __future__ import annotations

from typing import Any, Iterable

from engine.data.generations import generation_of
from engine.data.presets import Presets

MET, AT_RISK, MISSED = "met", "at risk", "missed"


def band(row: dict[str, Any]) -> tuple[float | None, float | None]:
    """(low, high) days for a ranked row: a prediction's stored band, else the figure itself. A plausible
    paper figure for the same cell that is slower than a prediction's band widens its top: the paper's
    timer ran ahead of the GPU, so its figure is if anything short, and a sure verdict must hold at it."""
    days = row.get("days")
    if days is None:
        return None, None
    low, high = row.get("days_low"), row.get("days_high")
    if low is None or high is None:
        return days, days
    low, high = min(low, days), max(high, days)
    paper = row.get("paper_days")
    if row.get("source") == "predicted" and paper is not None and row.get("paper_plausibility") == "ok":
        high = max(high, paper)
    return low, high


def deadline_verdict(low: float | None, high: float | None, deadline: float | None) -> str | None:
    """met, at risk or missed for a band against a deadline; None with no figure or no deadline."""
    if low is None or high is None or deadline is None:
        return None
    if high <= deadline:
        return MET
    if low > deadline:
        return MISSED
    return AT_RISK


def generation(gpu: Any) -> str:
    """A GPU preset's generation as a short name ('Hopper', 'Blackwell data centre'): engine/data/generations.py
    groups GPUs by their chip; one it does not group goes by its architecture."""
    g = generation_of(gpu)
    return g.name.split(" (")[0] if g is not None else str(gpu.architecture).capitalize()


def measured_generations(gpus: Iterable[str], presets: Presets) -> set[str]:
    """The GPU generations the store holds a measurement on, from its measured GPU ids."""
    return {generation(presets.gpus[g]) for g in gpus if g in presets.gpus}


def extrapolated(row: dict[str, Any], presets: Presets, measured: set[str]) -> str | None:
    """The GPU generation a predicted figure is extrapolated to, when nothing of that generation was
    measured here (the prediction then carries a fit from another generation over, with factors from
    published runs or none); None for a measured or paper figure, or a prediction on a measured generation.

    One place decides it, so it can later ask the predictor which generation a prediction rests on (issue
    23) instead of reading the store's measured GPUs."""
    if row.get("source") != "predicted" or row.get("gpu") not in presets.gpus:
        return None
    name = generation(presets.gpus[row["gpu"]])
    return None if name in measured else name


# --- what would narrow a predicted option's interval (issue 39) -------------------------------------------------


def measured_arch_cells(store_cells: Iterable[tuple[str, str, int]], presets: Presets) -> frozenset:
    """(architecture, GPU, count) of every measured (model, GPU, count): what a prediction's kind is read from."""
    from engine.predict.memory import arch_of

    out = set()
    for model, gpu, n in store_cells:
        m = presets.models.get(model)
        if m is not None:
            try:
                out.add((arch_of(m), gpu, int(n)))
            except Exception:  # a model whose config names no class: not an architecture we predict from
                continue
    return frozenset(out)


def narrowing(row: dict[str, Any], model: str, presets: Presets, cells: frozenset,
              intervals: Any) -> dict[str, Any] | None:
    """Which cell to measure to narrow a predicted option's interval most, other than the option itself (whose
    measurement replaces the interval): the model on fewer of the same GPU, or on one H100 (where our
    measurements are); each changes the kind of extrapolation the option is predicted with
    (engine/predict/intervals.py), so its width. The generation's part and the cap's stay (a measurement on
    another GPU says nothing about them). None for a figure that is not a calibrated prediction."""
    import math

    from engine.predict.intervals import FLOOR_BOUND, Evidence, floor_bound
    from engine.predict.memory import arch_of

    parts = row.get("interval_parts")
    if row.get("source") != "predicted" or not parts or intervals is None or model not in presets.models:
        return None
    if isinstance(parts, str):
        import json

        parts = json.loads(parts)
    arch = arch_of(presets.models[model])
    gpu, n, off = row["gpu"], int(row["num_gpus"]), bool(row.get("offloading"))
    # a pass its floor sets keeps the floor-bound width whatever is measured (engine/predict/intervals.py)
    bound = floor_bound(row.get("floor_lift"))
    elsewhere = bool(row.get("floor_elsewhere"))

    def total(w_model: float) -> float:
        return math.hypot(w_model, parts.get("generation", 0.0)) + parts.get("cap", 0.0)

    now = total(parts["model"])
    candidates = [(gpu, k) for k in (1, 2, 4, 8) if k < n and n % k == 0]
    if gpu != "h100":
        candidates.append(("h100", 1))
    best = None
    for g, k in candidates:
        if (arch, g, k) in cells or g not in presets.gpus:
            continue
        after_cells = cells | {(arch, g, k)}
        ev = Evidence(after_cells)
        kind = ev.evidence(arch, gpu, n)
        w, source = intervals.width(kind, off, bound, elsewhere)
        if source == FLOOR_BOUND:  # the floor's width, not the evidence kind's, is what it would come to
            kind = FLOOR_BOUND
        if ev.arch_cells(arch) <= 1 and arch in intervals.single_cell:
            w = max(w, intervals.single_cell[arch])
        after = total(w)
        if best is None or after < best[0] - 1e-9:
            best = (after, g, k, kind)
    out = {"model": model, "gpu": gpu, "num_gpus": n, "width_now": math.exp(2 * now)}
    if best is None or best[0] >= now * 0.98:
        # nothing but the option itself narrows it: the generation's part or the cap's is most of it
        out.update(measure_gpu=gpu, measure_num_gpus=n, width_after=None, kind_after=None)
    else:
        out.update(measure_gpu=best[1], measure_num_gpus=best[2], width_after=math.exp(2 * best[0]),
                   kind_after=best[3])
    return out
