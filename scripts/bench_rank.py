#!/usr/bin/env python3
"""How long a re-rank takes on a database of 100,000 trials (issue target: under 50 ms).

    python scripts/bench_rank.py [--trials 100000] [--repeat 30]

Fills a DuckDB file with synthetic trials over every model, priced GPU, count and method setting, then
times `engine.plan.ranking.rank` after each changed input (budget, deadline, price, sources), warm.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.data.presets import load_presets  # noqa: E402
from engine.plan.ranking import RankRequest, rank  # noqa: E402
from engine.data.store import Store, Trial  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=30)
    args = ap.parse_args()
    presets = load_presets(include_user=False)
    rng = random.Random(0)
    models, gpus = list(presets.models), list(presets.gpus)
    sources = ["measured", "paper-table1", "predicted"]
    with tempfile.TemporaryDirectory() as tmp, Store.open(Path(tmp) / "bench.duckdb") as store:
        rows = []
        for i in range(args.trials):
            feasible = rng.random() > 0.2
            rows.append(Trial(model=rng.choice(models), gpu=rng.choice(gpus), num_gpus=rng.choice([1, 2, 4, 8]),
                              feasible=feasible, source=rng.choice(sources), days=rng.uniform(1, 500) if feasible else None,
                              free_lunch=True, sharding=rng.choice(["none", "zero1", "fsdp3"]),
                              activation_checkpointing=rng.random() > 0.5, offloading=False,
                              micro_batch=8, grad_accum=4, key=f"k{i}"))
        store.add_trials(rows)
        times = []
        for i in range(args.repeat):
            req = RankRequest(model="pythia-1b", budget_usd=20_000 + 5_000 * i, deadline_days=30 + i,
                              price_overrides={"h100": 25_000 + 100 * i},
                              sources=("measured", "paper") if i % 2 else ("measured", "paper", "predicted"))
            t0 = time.perf_counter()
            out = rank(store, req, presets)
            times.append((time.perf_counter() - t0) * 1000)
        warm = times[1:]
        print(f"{args.trials:,} trials, {len(out)} options: re-rank median {statistics.median(warm):.1f} ms, "
              f"worst {max(warm):.1f} ms (first, cold: {times[0]:.1f} ms)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
