"""How long the app takes to start on the shipped database: a fresh interpreter, from its first line to
the Plan screen showing a ranking. For information (README), not a test: tests never assert timings.

    python scripts/cold_start.py [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

CHILD = r"""
import time
t0 = time.perf_counter()
from engine.data.paths import shipped_db
from engine.data.presets import load_presets
from tui_planner.app.app import PlannerApp
t_import = time.perf_counter() - t0

class Timed(PlannerApp):
    def watch_ranking(self, ranking):
        if ranking is not None and not ranking.error:
            self.exit(time.time())

app = Timed(load_presets(), shipped_db())
ready = app.run(headless=True, size=(80, 24))
import sys
print(f"{t_import:.3f} {ready:.6f} {'torch' in sys.modules}")
"""


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=5)
    args = p.parse_args()
    imports, ready = [], []
    for _ in range(args.runs):
        start = time.time()
        out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True)
        if out.returncode:
            print(out.stderr[-3000:], file=sys.stderr)
            return 1
        a, b, torch = out.stdout.split()[-3:]
        imports.append(float(a))
        ready.append(float(b) - start)
        if torch != "False":
            print("torch was imported at start-up: it must load only for the benchmark", file=sys.stderr)
            return 1
    print(f"imports (in-process): median {statistics.median(imports) * 1000:.0f} ms; process start to ranking on screen: median "
          f"{statistics.median(ready) * 1000:.0f} ms, worst {max(ready) * 1000:.0f} ms ({args.runs} runs)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
