"""Move runs and their trials between databases as JSON lines: how measured results from a GPU machine
become committed data (data/measured/*.jsonl) that the shipped database is rebuilt from."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from engine.data.store import RUN_COLUMNS, TRIAL_COLUMNS, Run, Store, Trial, final_outcome_sql, plain


def export_jsonl(store: Store, path: Path, source: str = "measured") -> int:
    """Write every run of `source` that has trials, each followed by its trials; returns the trial count.
    A measured run's trials include the rows its sweep decided without a launch ('predicted' rows: skipped
    by the memory model, or left unrun by the guided search, with their reasons and predictions)."""
    runs = store.query("SELECT * FROM runs WHERE source = ? AND run_id IN (SELECT run_id FROM trials) "
                       "ORDER BY started_at", [source])
    shipped = _shipped_model_ids()
    n = 0
    with open(path, "w") as f:
        for run in runs:
            f.write(json.dumps({"run": {k: plain(run[k]) for k in RUN_COLUMNS}}) + "\n")
            # A model the shipped presets do not hold (one described from its config.json): the preset its run
            # stored goes along, so its rows can be recomputed from their own timings and shape where they land.
            for p in store.query("SELECT run_id, kind, id, content, file FROM presets WHERE run_id = ? AND kind = "
                                 "'model' AND id IN (SELECT DISTINCT model FROM trials WHERE run_id = ?) ORDER BY id",
                                 [run["run_id"], run["run_id"]]):
                if p["id"] not in shipped:
                    f.write(json.dumps({"preset": {k: plain(v) for k, v in p.items()}}) + "\n")
            for t in store.query("SELECT * FROM trials WHERE run_id = ? AND (source = ? OR (? = 'measured' AND "
                                 "source = 'predicted' AND failure_kind IN ('memory', 'cannot-win'))) "
                                 "ORDER BY created_at", [run["run_id"], source, source]):
                f.write(json.dumps({"trial": {k: plain(t[k]) for k in TRIAL_COLUMNS}}) + "\n")
                n += 1
    return n


def _shipped_model_ids() -> set[str]:
    from engine.data.presets import load_presets

    return set(load_presets(include_user=False).models)


def _parse(cls, data: dict, time_fields: tuple[str, ...]):
    for k in time_fields:
        if data.get(k):
            data[k] = dt.datetime.fromisoformat(data[k])
    return cls(**data)


def import_jsonl(store: Store, path: Path, models=None) -> int:
    """Add the runs and trials of an exported file. Rows exported before the store kept their training run
    get their model's (from `models`, a mapping of id to Model, else the shipped presets)."""
    runs, trials, presets = [], [], []
    for line in Path(path).read_text().splitlines():
        if not line.strip():
            continue
        item = json.loads(line)
        if "run" in item:
            runs.append(_parse(Run, item["run"], ("started_at", "ended_at")))
        elif "preset" in item:
            p = item["preset"]
            presets.append((str(p["run_id"]), str(p["kind"]), str(p["id"]), str(p["content"]), p.get("file")))
        else:
            trials.append(_parse(Trial, item["trial"], ("created_at",)))
    for r in runs:
        store.add_run(r)
    store.insert("presets", ("run_id", "kind", "id", "content", "file"), presets)
    store.add_trials(trials)
    if any(t.training_run is None for t in trials):
        store.fill_training_runs(models)
    if any(r.source == "measured" and r.search is None for r in runs):
        store.fill_search_cost()
    if any(t.interconnect is None and t.num_gpus * t.num_nodes > 1 and t.source == "measured" for t in trials):
        store.fill_interconnect()
    return len(trials)


_SUPERSEDE_SQL = f"""
UPDATE trials AS t
SET feasible = false, failure_kind = 'superseded',
    failure_message = format('superseded by a later measurement of this combination (trial {{}}, {{}}: {{}}); '
                             'this one said {{}}', left(l.trial_id, 8), strftime(l.created_at, '%Y-%m-%d %H:%M'),
                             l.outcome, coalesce(printf('%.1f days', t.days), t.failure_kind))
FROM (SELECT key, training_run, arg_max(trial_id, created_at) AS trial_id, max(created_at) AS created_at,
             arg_max(coalesce(printf('%.1f days', days), failure_kind), created_at) AS outcome
      FROM trials WHERE source = 'measured' AND {final_outcome_sql()} GROUP BY key, training_run) AS l
WHERE t.source = 'measured' AND {final_outcome_sql("t.")} AND t.key = l.key
  AND t.training_run IS NOT DISTINCT FROM l.training_run AND t.created_at < l.created_at
"""


def mark_superseded(store: Store) -> int:
    """Where one combination of one cell (a trial key, on one training run) was measured more than once with
    a final outcome, keep the latest and mark the earlier ones 'superseded' (not feasible; the message names
    the later trial and says what each found); returns how many it marked. Results files from several
    machines and days meet in one database (the shipped one is built from data/measured/), and a
    re-measurement is made for a reason, usually an engine fix (timed passes that hold the gradients showed
    that Pythia-6.9B's free-lunch does not fit one H200): the later row is the one to believe, as findings
    already takes it. Marked, not deleted: the rows stay browsable, and nothing ranks, fits or calibrates
    on a row that is not feasible."""
    return store.con.execute(_SUPERSEDE_SQL).fetchone()[0]  # DuckDB answers an UPDATE with its row count
