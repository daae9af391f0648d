"""Assemble the shipped database from committed data: the paper's tables, exported measured runs, and
predictions (engine/predict/) for every GPU preset x count no measurement covers."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from engine.data import paperdb
from engine.data.presets import load_presets
from engine.data.store import Store

_PREDICTED_RUN = uuid.UUID("9d3f5a60-1c2b-4e8f-a7d4-3b6e0c9f2a58")


def build(path: Path, data_dir: Path, predictions: bool = True) -> list[dict]:
    presets = load_presets(include_user=False)  # shipped presets only: the build must not depend on $HOME
    with Store.open(path, read_only=False) as store:
        paperdb.add_paper(store, data_dir / "paper", presets)
        measured = data_dir / "measured"
        if measured.is_dir():
            from engine.data.jsonl import import_jsonl, mark_superseded

            for f in sorted(measured.glob("*.jsonl")):
                import_jsonl(store, f, presets.models)
            mark_superseded(store)  # a combination measured again: the later row counts
            judge_plausibility(store, presets)
        if predictions:
            calibrate_generations(store, presets, data_dir / "external")
            calibrate_intervals(store, presets, data_dir / "external")
            add_predictions(store, presets)
        store.con.execute("CHECKPOINT")
        return store.summary()


def judge_plausibility(store: Store, presets) -> None:
    """A measured row's plausibility against today's line of its GPU's generation (engine/data/generations.py),
    not the line of the day it was measured: the line is the best MFU measured or published on the generation,
    so a row that raised it reads 'ok'."""
    from engine.data.generations import judge

    rows = store.query("SELECT trial_id, gpu, fp8, mfu, plausibility FROM trials WHERE source = 'measured' "
                       "AND mfu IS NOT NULL")
    for r in rows:
        gpu = presets.gpus.get(r["gpu"])
        if gpu is None:
            continue
        now = judge(gpu, r["mfu"], bool(r["fp8"]))
        if now != r["plausibility"]:
            store.con.execute("UPDATE trials SET plausibility = ? WHERE trial_id = ?", [now, r["trial_id"]])


def calibrate_generations(store: Store, presets, folder: Path) -> None:
    """Fit and validate the GPU generations' factors on the published rows in `folder` (data/external) against
    this database's measurements, and write them beside those rows (fitted.json), where every predictor
    reads them."""
    import json

    from engine.data.external import load
    from engine.predict.generations import CALIBRATION_FILE, base_fit, calibrate
    from engine.predict.predictor import Predictor

    rows = store.query("SELECT * FROM trials WHERE source <> 'predicted'")
    base = base_fit(Predictor(rows, presets))
    if base is None or not (folder / "sources.toml").exists():
        return
    cal = calibrate(presets, base, load(folder, gpu_ids=set(presets.gpus)))
    # Written beside and renamed into place: a predictor reading it meanwhile (another process, or a test
    # worker while another rebuilds the database) sees the old file or the new one, never half of one.
    target = folder / CALIBRATION_FILE
    tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
    tmp.write_text(json.dumps(cal.to_json(), indent=1, sort_keys=True) + "\n")
    os.replace(tmp, target)


def calibrate_intervals(store: Store, presets, folder: Path) -> None:
    """The calibrated interval per kind of extrapolation (engine/predict/intervals.py) from this database's
    measurements, each held out by cell, architecture, GPU type and GPU count; written beside fitted.json
    (intervals.json), where every predictor reads them. Before the predictions, which carry them."""
    from engine.predict import intervals
    from engine.predict.predictor import Predictor
    from engine.predict.validate import held_out_cases

    rows = store.query("SELECT * FROM trials WHERE source <> 'predicted'")
    if not folder.is_dir():
        return
    cases = held_out_cases(rows, presets)
    if cases:
        intervals.write(intervals.calibrate(cases, Predictor(rows, presets).evidence), folder)


def add_predictions(store: Store, presets) -> int:
    """The fastest predicted setting for every model with a basis, on every GPU preset x 1/2/4/8 GPUs that
    holds no measured row (`tui-planner predict` shows every setting). Deterministic: ids come from the
    inputs, the date from the newest basis row."""
    from engine.predict import build_predictor, predict_missing, write_predictions

    rows = store.query("SELECT * FROM trials WHERE source <> 'predicted'")
    if not rows:
        return 0
    predictor = build_predictor(rows, presets)
    preds = predict_missing(predictor, presets, best_only=True)  # the fastest per cell: what ranking shows
    when = max(r["created_at"] for r in rows if r["created_at"] is not None)
    run_id = uuid.uuid5(_PREDICTED_RUN, f"{len(rows)}|{when.isoformat()}").hex
    return write_predictions(store, preds, presets, command="scripts/build_db.py (engine/predict/, every "
                             "GPU preset x 1, 2, 4, 8 GPUs without a measurement)", run_id=run_id, created_at=when)
