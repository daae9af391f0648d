#!/usr/bin/env python3
"""Text captures of the app's four screens at 80x24: docs/screens/*.txt and the README's Plan screen.

    python3 scripts/capture_screens.py              # write docs/screens/{plan,chart,bench,results}.txt and the README's
    python3 scripts/capture_screens.py --check      # write nothing: exit 1, with a diff, where a capture has drifted

The real app (tui_planner.app, Textual's run_test and its pilot, headless at 80x24) on the shipped database,
the shipped presets only (not ~/.config/tui-planner's) and the defaults (not the last plan): 1 Plan, 2 Chart,
3 Benchmark, 4 Results, each kept once its work is done (the ranking, a prediction, the GPU probe, the rows)
and it stops changing, as the text a terminal shows it (trailing spaces cut; a path inside this repository
written relative to it, so a capture reads the same from any clone). Prices turn stale against a date: the
day of the capture, written in the README's marker and read back by --check, so a check on a later day
judges them as the capture did.

The README holds the Plan capture between its markers (<!-- screen plan ... --> and <!-- /screen plan -->),
rewritten here from docs/screens/plan.txt; tests/test_readme.py runs the check for the Plan screen, so a
capture that no longer matches the app fails the suite. The Benchmark screen shows the machine it runs on
(its GPUs, or the CPU's tiny models), so only this script's own runs keep it.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import difflib
import io
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SIZE = (80, 24)
SCREENS = {"plan": "1", "chart": "2", "bench": "3", "results": "4"}
OUT = ROOT / "docs" / "screens"
README = ROOT / "README.md"
BUSY = ("ranking…", "predicting…", "looking for GPUs…", "loading…")
# <!-- screen plan: ... prices judged on 2026-11-27 ... --> the capture <!-- /screen plan -->
MARKER = re.compile(r"<!-- screen (?P<name>\w+):[^>]*?(?P<day>\d{4}-\d{2}-\d{2})[^>]*-->\n(?P<body>.*?)"
                    r"<!-- /screen (?P=name) -->", re.S)


def screen_text(app) -> str:
    """What the terminal shows now, as plain text: Textual's export_screenshot, written as text, not SVG."""
    from rich.console import Console

    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), force_terminal=True, color_system="truecolor",
                      record=True, legacy_windows=False, safe_box=False)
    console.print(app.screen._compositor.render_update(full=True, screen_stack=app._background_screens))
    text = console.export_text()
    lines = [line.rstrip() for line in text.splitlines()][:height]
    return "\n".join(lines).replace(str(ROOT) + "/", "") + "\n"


async def _settled(pilot, last: str | None) -> str:
    """The screen once its work is done and it has stopped changing (and changed from the last one kept)."""
    app = pilot.app
    previous = None
    for _ in range(200):
        await app.workers.wait_for_complete()
        await pilot.pause(0.2)
        now = screen_text(app)
        if now == previous and now != last and not any(word in now for word in BUSY):
            return now
        previous = now
    raise RuntimeError(f"the screen never settled:\n{previous}")


async def _capture(names: list[str], today: dt.date, db: Path) -> dict[str, str]:
    from engine.data.presets import load_presets
    from tui_planner.app.app import PlannerApp

    app = PlannerApp(load_presets(include_user=False), db, today=today, remember=False)
    out: dict[str, str] = {}
    async with app.run_test(size=SIZE) as pilot:
        last = None
        for name in names:
            await pilot.press(SCREENS[name])
            out[name] = last = await _settled(pilot, last if name != "plan" else None)
    return out


def capture(names: list[str], today: dt.date, db: Path | None = None) -> dict[str, str]:
    """The screens named (plan, chart, bench, results), in that order, as text."""
    from engine.data.paths import shipped_db

    return asyncio.run(_capture(names, today, db or shipped_db()))


def readme_blocks(text: str | None = None) -> dict[str, tuple[dt.date, str]]:
    """Each capture the README holds: its name -> (the day its prices were judged on, the capture)."""
    text = README.read_text() if text is None else text
    out = {}
    for m in MARKER.finditer(text):
        body = m.group("body")
        fence = re.fullmatch(r"```text\n(?P<screen>.*)```\n", body, re.S)
        out[m.group("name")] = (dt.date.fromisoformat(m.group("day")), fence.group("screen") if fence else body)
    return out


def with_readme(text: str, name: str, screen: str, today: dt.date) -> str:
    """The README with capture `name` replaced (its marker dated `today`)."""
    block = (f"<!-- screen {name}: written by scripts/capture_screens.py from docs/screens/{name}.txt (the app at "
             f"80x24, prices judged on {today.isoformat()}) -->\n```text\n{screen}```\n<!-- /screen {name} -->")
    new, n = MARKER.subn(lambda m: block if m.group("name") == name else m.group(0), text)
    if not n or name not in readme_blocks(new):
        raise SystemExit(f"README.md has no capture markers for {name} (<!-- screen {name}: ... --> ... "
                         f"<!-- /screen {name} -->)")
    return new


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 where a capture has drifted")
    ap.add_argument("--screens", default=",".join(SCREENS), help="which screens, comma-separated (default: all)")
    ap.add_argument("--today", type=dt.date.fromisoformat,
                    help="the day prices are judged stale on (default: today; --check: the README's)")
    args = ap.parse_args(argv)
    names = [n for n in SCREENS if n in args.screens.split(",")]
    blocks = readme_blocks()
    today = args.today or (blocks["plan"][0] if args.check and "plan" in blocks else dt.date.today())
    shown = capture(names, today)
    if args.check:
        drift = []
        for name, now in shown.items():
            kept = (OUT / f"{name}.txt").read_text() if (OUT / f"{name}.txt").exists() else ""
            if now != kept:
                drift += difflib.unified_diff(kept.splitlines(True), now.splitlines(True),
                                              f"docs/screens/{name}.txt", f"the app now ({name})")
            if name in blocks and blocks[name][1] != kept:
                drift.append(f"README.md's {name} capture differs from docs/screens/{name}.txt\n")
        if drift:
            sys.stdout.writelines(drift)
            print("\ncaptures drifted: run python3 scripts/capture_screens.py", file=sys.stderr)
            return 1
        return 0
    OUT.mkdir(parents=True, exist_ok=True)
    readme = README.read_text()
    for name, now in shown.items():
        (OUT / f"{name}.txt").write_text(now)
        if name in blocks:
            readme = with_readme(readme, name, now, today)
    README.write_text(readme)
    print(f"wrote {', '.join(f'docs/screens/{n}.txt' for n in shown)}"
          + (" and README.md's Plan screen" if "plan" in blocks and "plan" in shown else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
