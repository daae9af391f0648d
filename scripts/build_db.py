#!/usr/bin/env python3
"""Rebuild db/tui-planner.duckdb from committed data: the paper's tables (data/paper/) and the measured
runs exported from the device (data/measured/*.jsonl, if any). Deterministic; run from the repo root:

    python scripts/build_db.py            # writes db/tui-planner.duckdb
    python scripts/build_db.py --out X    # writes X instead
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.plan.shipped import build  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=ROOT / "db" / "tui-planner.duckdb")
    args = ap.parse_args()
    tmp = args.out.with_suffix(".building")
    tmp.unlink(missing_ok=True)
    summary = build(tmp, ROOT / "data")
    os.replace(tmp, args.out)  # never leave a half-written database in place
    for row in summary:
        print(f"{row['source']:>14}: {row['trials']:4d} trials, {row['feasible']:4d} feasible, {row['flagged']:3d} flagged")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
