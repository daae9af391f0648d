"""Move runs and their trials between databases as JSON lines: how measured results from a GPU machine
become committed data (data/measured/*.jsonl) that the shipped database is rebuilt from."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from engine.data.store import RUN_COLUMNS, TRIAL_COLUMNS, Run, Store, Trial, plain


def export_jsonl(store: Store, path: Path, source: str = "measured") -> int:
    """Write every run of `source` that has trials, each followed by its trials; returns the trial count.
    A measured run's trials include the rows its sweep decided without a launch ('predicted' rows: skipped
    by the memory model, or left unrun by the guided search, with their reasons and predictions)."""
    runs = store.query("SELECT * FROM runs WHERE source = ? AND run_id IN (SELECT run_id FROM trials) "
                       "ORDER BY started_at", [source])
    n = 0
    with open(path, "w") as f:
        for run in runs:
            f.write(json.dumps({"run": {k: plain(run[k]) for k in RUN_COLUMNS}}) + "\n")
            for t in store.query("SELECT * FROM trials WHERE run_id = ? AND (source = ? OR (? = 'measured' AND "
                                 "source = 'predicted' AND failure_kind IN ('memory', 'cannot-win'))) "
                                 "ORDER BY created_at", [run["run_id"], source, source]):
                f.write(json.dumps({"trial": {k: plain(t[k]) for k in TRIAL_COLUMNS}}) + "\n")
                n += 1
    return n


def _parse(cls, data: dict, time_fields: tuple[str, ...]):
    for k in time_fields:
        if data.get(k):
            data[k] = dt.datetime.fromisoformat(data[k])
    return cls(**data)


def import_jsonl(store: Store, path: Path, models=None) -> int:
    """Add the runs and trials of an exported file. Rows exported before the store kept their training run
    get their model's (from `models`, a mapping of id to Model, else the shipped presets)."""
    runs, trials = [], []
    for line in Path(path).read_text().splitlines():
        if not line.strip():
            continue
        item = json.loads(line)
        if "run" in item:
            runs.append(_parse(Run, item["run"], ("started_at", "ended_at")))
        else:
            trials.append(_parse(Trial, item["trial"], ("created_at",)))
    for r in runs:
        store.add_run(r)
    store.add_trials(trials)
    if any(t.training_run is None for t in trials):
        store.fill_training_runs(models)
    if any(r.source == "measured" and r.search is None for r in runs):
        store.fill_search_cost()
    return len(trials)
