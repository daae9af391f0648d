"""How long `tui-planner predict` takes for a config.json that needs building (issue 40: under 3 s on the 2-core
machine), wall clock from the command's start to its answer, with nothing of that config cached. For
information (README, closing notes), not a test: tests never assert timings.

    python scripts/cold_build.py [--runs 5] [--first] [CONFIG.json ...]

Each run gets a cache directory of its own: the description is never cached. transformers' table of its modules
(engine/data/lean.py) is, as after any earlier build on the machine, unless --first (the first build ever).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ["tests/fixtures/configs/mpt.json", "tests/fixtures/configs/falcon.json",
           "examples/configs/olmoe-1b-7b-6l.json", "examples/configs/t5-base.json"]


def timed(config: str, cache: str) -> float:
    env = {**os.environ, "XDG_CACHE_HOME": cache}
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "tui_planner", "predict", "--model", config, "--gpu", "h100"], cwd=ROOT,
                   env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("configs", nargs="*", default=DEFAULT)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--first", action="store_true", help="no table of transformers' modules either")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as top:
        tables = Path(top) / "warm"
        if not args.first:  # one build leaves the table, as on any machine that built once
            timed(args.configs[0], str(tables))
            shutil.rmtree(tables / "tui-planner" / "described", ignore_errors=True)
        print(f"{'config':40s} {'median':>7s} {'min':>6s} {'max':>6s}  (s, {args.runs} runs, {os.cpu_count()} cores)")
        for config in args.configs:
            times = []
            for i in range(args.runs):
                cache = Path(top) / f"{Path(config).stem}-{i}"
                if not args.first:
                    shutil.copytree(tables, cache)
                times.append(timed(config, str(cache)))
            print(f"{config:40s} {statistics.median(times):7.2f} {min(times):6.2f} {max(times):6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
