#!/usr/bin/env python3
"""Export the measured runs of a results database (e.g. one a device sweep returned) to JSON lines under
data/measured/, from which scripts/build_db.py rebuilds the shipped database.

    python scripts/export_measured.py RESULTS.duckdb data/measured/NAME.jsonl [--kernel-unrecorded-before TS]
        [--since TS] [--predicted data/predicted-before/NAME.jsonl]

Runs a killed command left 'running' are exported as 'interrupted'. --since keeps only the runs started at or
after a UTC timestamp (a database carried from call to call holds the earlier sessions' runs, already
exported); --predicted also writes the predictions the guided searches stored before measuring. --kernel-unrecorded-before clears
the kernel column of trials measured before a timestamp (use when a fixed kernel probe postdates them).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.data.jsonl import export_jsonl  # noqa: E402
from engine.bench.launcher import _why_no_result  # noqa: E402
from engine.data.store import Store  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("db", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--kernel-unrecorded-before")
    ap.add_argument("--since", help="only runs started at or after this UTC time, e.g. 2026-11-27T13:00")
    ap.add_argument("--predicted", type=Path, help="also write the stored predictions (source 'predicted') here")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / args.db.name
        shutil.copy(args.db, copy)
        wal = args.db.with_name(args.db.name + ".wal")
        if wal.exists():
            shutil.copy(wal, Path(tmp) / wal.name)
        with Store.open(copy, read_only=False) as store:
            if args.since:
                old = "SELECT run_id FROM runs WHERE started_at < CAST(? AS TIMESTAMP)"
                store.con.execute(f"DELETE FROM trials WHERE run_id IN ({old})", [args.since])
                store.con.execute(f"DELETE FROM runs WHERE run_id IN ({old})", [args.since])
            store.con.execute("UPDATE runs SET status = 'interrupted' WHERE status = 'running'")
            if args.kernel_unrecorded_before:
                store.con.execute(
                    "UPDATE trials SET kernel = 'sdpa (backend not recorded: early probe ran without autocast)' "
                    "WHERE created_at < ? AND kernel LIKE 'sdpa-%'", [args.kernel_unrecorded_before])
            # Failures recorded before the launcher read torchrun's report: say why again, from the log.
            for row in store.query("SELECT trial_id, provenance FROM trials WHERE failure_kind = 'failed'"):
                tail = json.loads(row["provenance"] or "{}").get("log_tail")
                if tail:
                    store.con.execute("UPDATE trials SET failure_message = ? WHERE trial_id = ?",
                                      [_why_no_result(1, tail), row["trial_id"]])
            n = export_jsonl(store, args.out)
            if args.predicted:
                print(f"{export_jsonl(store, args.predicted, source='predicted')} predictions -> {args.predicted}")
    print(f"{n} trials -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
