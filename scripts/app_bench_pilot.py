#!/usr/bin/env python3
"""Drive the app's Benchmark screen headless, as a person would, and check what it shows (issue 38, item 4).

    python3 scripts/app_bench_pilot.py --db /tmp/app.duckdb --model pythia-160m --gpus 2 --time-limit 240 \\
        --out "$OUT/app-pilot"

The real app (tui_planner.app, Textual's run_test and its pilot, 80x24): 3 opens the Benchmark screen; tab
and the keys a person presses set the model, the GPUs, the methods, the device, compile, the search and the
database; r starts the sweep. Once the first result row has landed, p pauses it (the running trial finishes,
no new one starts); after a few seconds paused, r resumes it from the database; it then runs to its end, or
to --resumed-s after the resume or the time limit, where k (and y at its question) stops it; q quits.
Screenshots (SVG) at the start, the first row, paused, resumed and the end; the progress line sampled every
2 s; the engine's events as the screen received them; afterwards the database read back through the Store.

Writes OUT/pilot.json and OUT/[1-5]-*.svg. Exits 0 when every check passed, 1 when one failed (each said on
stderr and in pilot.json), 2 when the drive could not run (the screen refused the sweep, no GPU, a bad
argument). The checks:
  gpus          the sweep's trials and the database's runs and rows are on --gpus GPUs
  progress      the progress line's time moved while each trial ran (not pausing) and while the sweep started
                (the GPU probe, the predictions, DeepSpeed's import check), wherever sampled twice or more
  pause         p stopped the sweep after the running trial: no trial started after it, the sweep ended
                stopped, no time left was shown from p on, and the line stood still while paused
  resume        r started a sweep that took the rows landed from the database (resumed, counted on the
                progress line) and went on: it ran a trial, or nothing was left and it ended done
  database      read-only afterwards: every row that landed on the screen is in it, and no run of this drive
                is left running
  processes     nothing the app started (trials, torchrun, the GPU probe) is alive after it quit
On a machine without a GPU the screen offers the tiny CPU models (presets/cpu) and picks the CPU itself.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import re
import signal
import sys
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# Statuses whose row a resumed sweep takes from the database (a crash or a timeout is tried again, a stop
# and an unavailable stack wrote none): engine.data.store.Store.done_keys and sweep._unrun_keys.
RESUMED = {"measured", "oom", "dominated", "refused", "cannot-win", "memory"}
NO_ROW = {"stopped", "unavailable"}
SHOTS = ("start", "mid", "paused", "resumed", "end")
ELAPSED = re.compile(r"(\S+) in\b")
ETA = re.compile(r"~(\S+) left")


class DriveError(Exception):
    """The drive could not go on (the screen refused, a widget never took the keys): exit 2."""


def seconds(text: str) -> int | None:
    """45s, 2m10s, 1h05m (tui_planner.app.progress.short_time) back to seconds."""
    m = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", text)
    if m is None or not text:
        return None
    h, mi, s = (int(g or 0) for g in m.groups())
    return h * 3600 + mi * 60 + s


def event_dict(e: object) -> dict:
    return {"event": type(e).__name__, **{k: v for k, v in dataclasses.asdict(e).items()
                                          if k not in ("labels", "keys", "predicted")}}


class Drive:
    """One drive of the screen: what was pressed and seen, in order, with the time since the start."""

    def __init__(self, args: argparse.Namespace, out: Path) -> None:
        self.args, self.out = args, out
        self.t0 = time.monotonic()
        self.limit_at = self.t0 + args.time_limit
        self.timeline: list[dict] = []
        self.samples: list[dict] = []
        self.events: list[tuple[float, object]] = []  # (monotonic, event) as the sweep's worker posted them
        self.logs = 0  # trial output lines (Log events): counted, not kept
        self.shots: dict[str, str] = {}
        self.phase = "setup"
        self.last_sample = -1e9
        self.marks: dict[str, float] = {}  # what happened when (monotonic): r, p, resume, k...
        self.form: dict = {}
        self.tabs = 0
        self.app = self.screen = self.pilot = None

    # --- recording ---------------------------------------------------------------------------------------

    def at(self, t: float | None = None) -> float:
        return round((time.monotonic() if t is None else t) - self.t0, 2)

    def note(self, what: str, **kw: Any) -> None:
        self.timeline.append({"t": self.at(), "what": what, **kw})
        print(f"[{self.at():7.1f}s] {what}" + (f" {kw}" if kw else ""), file=sys.stderr, flush=True)

    def mark(self, name: str) -> None:
        self.marks[name] = time.monotonic()
        self.note(name)

    def spy(self, screen) -> None:
        """Keep each engine event the sweep's worker posts to the screen, with when it was posted."""
        from tui_planner.app.screens.bench import EngineEvent

        post = screen.post_message

        def posted(message):
            if isinstance(message, EngineEvent):
                if type(message.event).__name__ == "Log":
                    self.logs += 1
                else:
                    self.events.append((time.monotonic(), message.event))
            return post(message)

        screen.post_message = posted  # the worker's lambda looks it up on each event

    def line(self) -> str:
        from textual.widgets import Static

        return str(self.screen.query_one("#progress-label", Static).render())

    def sample(self, force: bool = False) -> None:
        if not force and time.monotonic() - self.last_sample < self.args.sample_s:
            return
        self.last_sample = time.monotonic()
        p = self.screen.progress
        text = self.line()
        elapsed, eta = ELAPSED.search(text), ETA.search(text)
        self.samples.append({
            "t": self.at(), "phase": self.phase, "text": text, "trial": p.current_label if p.current else None,
            "key": p.current, "pausing": p.pausing, "done": p.done, "total": p.total,
            "elapsed_s": seconds(elapsed[1]) if elapsed else None, "eta": eta[1] if eta else None,
            "sweep_running": self.app.sweep_running(), "search": self.text("#search")})

    def after(self, mark: str, kind: str | tuple[str, ...], until: str | None = None) -> list[tuple[float, object]]:
        """The events of a kind posted after a mark (and before another)."""
        kinds = (kind,) if isinstance(kind, str) else kind
        lo, hi = self.marks.get(mark, float("inf")), self.marks.get(until, float("inf")) if until else float("inf")
        return [(t, e) for t, e in self.events if lo <= t < hi and type(e).__name__ in kinds]

    # --- driving -----------------------------------------------------------------------------------------

    async def wait(self, what: str, cond: Callable[[], bool], timeout: float | None = None) -> bool:
        """Wait (sampling the progress line) until cond holds; False at the timeout or the time limit."""
        end = self.limit_at if timeout is None else min(self.limit_at, time.monotonic() + timeout)
        while True:
            if self.screen is not None and self.app.screen is self.screen:
                self.sample()
            if cond():
                return True
            if time.monotonic() > end:
                self.note(f"gave up waiting: {what}",
                          why="the time limit" if time.monotonic() > self.limit_at else f"{timeout:.0f} s")
                return False
            await self.pilot.pause(0.1)

    async def shot(self, name: str) -> None:
        await self.pilot.pause(0.3)  # the events handled, the screen drawn
        filename = f"{SHOTS.index(name) + 1}-{name}.svg"
        self.app.save_screenshot(filename=filename, path=str(self.out))
        self.shots[name] = filename
        self.sample(force=True)
        self.note(f"screenshot {filename}", line=self.samples[-1]["text"])

    async def focus(self, widget) -> None:
        """Tab to a widget, as a person would."""
        for _ in range(40):
            if self.app.focused is widget:
                return
            await self.pilot.press("tab")
            self.tabs += 1
        raise DriveError(f"tab never reached #{widget.id}")

    async def choose(self, select, value: str) -> None:
        """Open a drop-down and move to a value with the arrow keys, then enter."""
        values = [v for _, v in select._options]
        if value not in values:
            raise DriveError(f"#{select.id} offers {', '.join(map(str, values))}; not {value}")
        if select.value == value:
            return
        await self.focus(select)
        await self.pilot.press("enter")
        await self.pilot.pause(0.2)
        steps = values.index(value) - values.index(select.value)
        await self.pilot.press(*(["down"] * steps if steps > 0 else ["up"] * -steps), "enter")
        if not await self.wait(f"#{select.id} to read {value}", lambda: select.value == value, 10):
            raise DriveError(f"#{select.id} reads {select.value} after choosing {value}")

    async def type_into(self, box, text: str, paste: bool = False) -> None:
        """Clear a field (home, ctrl+k) and type into it, or paste (as a terminal's bracketed paste)."""
        from textual import events

        await self.focus(box)
        await self.pilot.press("home", "ctrl+k", *("" if paste else text))
        if paste:
            self.app.post_message(events.Paste(text))
        if not await self.wait(f"#{box.id} to read {text}", lambda: box.value == text, 10):
            raise DriveError(f"#{box.id} reads {box.value!r} after typing {text!r}")

    async def tick(self, box, on: bool) -> None:
        if box.value != on:
            await self.focus(box)
            await self.pilot.press("space")
            if box.value != on:
                raise DriveError(f"#{box.id} did not change on space")

    async def set_up(self) -> None:
        """3, then the form: model, GPUs, methods, device, compile, search, database."""
        from textual.widgets import Input, Select

        from tui_planner.app.screens.common import Check

        await self.pilot.press("3")
        screen = self.screen = self.app.screen
        if type(screen).__name__ != "BenchScreen":
            raise DriveError(f"3 opened {type(screen).__name__}, not the Benchmark screen")
        self.spy(screen)
        self.note("Benchmark screen")
        if not await self.wait("the GPU probe", lambda: screen.machine is not None, 180):
            raise DriveError("the screen's GPU probe did not answer in 180 s")
        m = screen.machine
        self.note("machine probed", gpus=list(m.gpus), torch=m.torch, line=self.text("#machine"))
        if not m.torch:
            raise DriveError(f"cannot benchmark here: {screen.hint(m)}")
        a = self.args
        if a.device:
            await self.choose(screen.query_one("#b-device", Select), a.device)
        device = str(screen.query_one("#b-device", Select).value)
        if device == "cuda" and not m.gpus:
            raise DriveError("no GPU here: leave --device out (the screen picks the CPU) or pass --device cpu")
        if device == "cuda" and len(m.gpus) < a.gpus:
            raise DriveError(f"--gpus {a.gpus}, but this machine has {len(m.gpus)}")
        models = screen.query_one("#b-model", Select)
        if a.model:
            await self.choose(models, a.model)
        # In the order tab goes through them: model, GPUs, methods, (device), compile, database, (retry), exhaustive.
        await self.type_into(screen.query_one("#b-gpus", Input), str(a.gpus))
        await self.choose(screen.query_one("#b-methods", Select), a.methods)
        await self.tick(screen.query_one("#b-compile", Check), not a.no_compile)
        await self.type_into(screen.query_one("#b-db", Input), str(a.db), paste=True)
        await self.tick(screen.query_one("#b-exhaustive", Check), a.exhaustive)
        req = screen.request()
        self.form = {"model": req.model, "gpus": req.num_gpus, "methods": req.methods, "device": req.device,
                     "compile": req.compile, "exhaustive": req.exhaustive, "db": str(req.db)}
        self.note("form filled", tabs=self.tabs, **self.form)
        want = {"gpus": a.gpus, "methods": a.methods, "db": str(a.db), "compile": not a.no_compile,
                "exhaustive": a.exhaustive, **({"model": a.model} if a.model else {})}
        wrong = {k: self.form[k] for k, v in want.items() if self.form[k] != v}
        if wrong:
            raise DriveError(f"the screen's request is not what was typed: {wrong}")

    def text(self, selector: str) -> str:
        from textual.widgets import Static

        return str(self.screen.query_one(selector, Static).render())

    def sweep_done(self) -> bool:
        """The sweep's worker returned and the screen has shown its end."""
        s = self.app.sweep
        return s is not None and s.done.is_set() and not self.app.sweep_running() and self.screen._ticker is None

    def landed(self, since: str = "r") -> list[object]:
        return [e for _, e in self.after(since, "TrialFinished") if e.status not in NO_ROW]

    async def stop(self, why: str) -> None:
        """k, and y at its question: the running trial is killed, the finished ones are kept."""
        self.note(f"stopping: {why}")
        self.phase = "stopping"
        self.mark("k")
        await self.pilot.press("k")
        if await self.wait("the stop question", lambda: type(self.app.screen).__name__ == "Confirm", 10):
            await self.pilot.press("y")
        end = self.limit_at + 120
        while not self.sweep_done() and time.monotonic() < end:
            await self.pilot.pause(0.1)

    async def run(self) -> None:
        """The drive: start, the first row, pause, resume, the end."""
        a = self.args
        await self.set_up()
        screen = self.screen
        self.phase = "starting"
        self.mark("r")  # before the key: on the CPU the sweep's first events come before the press returns
        await self.pilot.press("escape", "r")  # escape: off the field, onto the table; r runs
        started = await self.wait("the first trial to start", lambda: (
            any(self.after("r", ("TrialStarted", "SweepFinished"))) and screen.progress.started_at is not None)
            or (self.app.sweep is not None and self.app.sweep.done.is_set()))
        if not any(self.after("r", "SweepStarted")):
            why = self.text("#progress-label") if started else "the time limit"
            raise DriveError(f"the sweep did not start: {why}")
        self.phase = "running"
        await self.shot("start")
        if not await self.wait("the first row to land",
                               lambda: bool(self.landed()) and screen.progress.done >= 1 or self.sweep_done()):
            await self.finish("the time limit before the first row landed")
            return
        first = self.landed()[0] if self.landed() else None
        self.note("first row landed", key=first.key if first else None, status=first.status if first else None)
        await self.shot("mid")
        if self.sweep_done():
            self.note("the sweep ended before p: nothing left to pause")
            await self.finish("")
            return
        await self.pilot.press("p")
        self.mark("p")  # after the key: the pause is set (a trial started while it was pressed is not after it)
        if not self.app.sweep.pause.is_set():  # the pause check says what followed
            self.note("p did not set the sweep's pause")
        self.phase = "pausing"
        if not await self.wait("the pause to take effect (the running trial to finish)", self.sweep_done):
            await self.finish("the time limit while pausing")
            return
        self.mark("paused")
        self.phase = "paused"
        hold_from = time.monotonic()
        self.sample(force=True)
        await self.wait("the paused hold", lambda: time.monotonic() - hold_from >= a.paused_s and sum(
            1 for s in self.samples if s["phase"] == "paused") >= 2, a.paused_s + 3 * a.sample_s)
        await self.shot("paused")
        self.phase = "resuming"
        self.mark("resume")
        await self.pilot.press("r")
        resumed = await self.wait("the resumed sweep to run a trial or end", lambda: (
            any(self.after("resume", "TrialStarted")) and screen.progress.current is not None) or (
            any(self.after("resume", "SweepFinished")) and self.sweep_done()))
        if not resumed:
            await self.finish("the time limit while resuming")
            return
        self.phase = "resumed"
        await self.shot("resumed")
        if a.resumed_s is not None:
            run_until = time.monotonic() + a.resumed_s
            await self.wait(f"{a.resumed_s:.0f} s after the resume", lambda: self.sweep_done()
                            or time.monotonic() >= run_until)
            await self.finish("" if self.sweep_done() else f"--resumed-s {a.resumed_s:.0f}")
        else:
            await self.wait("the sweep to end", self.sweep_done)
            await self.finish("" if self.sweep_done() else "the time limit")

    async def finish(self, stop_why: str) -> None:
        """Stop a running sweep with k (why: the time limit, --resumed-s), the end's screenshot, then q."""
        if self.app.sweep_running():
            await self.stop(stop_why or "still running")
        self.phase = "end"
        await self.shot("end")
        self.mark("q")
        await self.pilot.press("q")
        await self.pilot.pause(0.3)
        if type(self.app.screen).__name__ == "Confirm":  # a sweep still running: stop and quit
            await self.pilot.press("y")
        for _ in range(600):
            if not self.app.is_running:
                break
            await self.pilot.pause(0.1)


# --- the checks ----------------------------------------------------------------------------------------------


def check(name: str, passed: bool, detail: str, **data: Any) -> dict:
    return {"check": name, "passed": bool(passed), "detail": detail, **data}


def check_progress(d: Drive) -> dict:
    """While one trial runs (not pausing), and while the sweep starts, each sample's time is past the last's."""
    groups: list[tuple[str, list[dict]]] = []  # consecutive samples of one stretch
    last = None
    for s in d.samples:
        if s["phase"] == "starting" and s["key"] is None and s["sweep_running"]:
            name = "starting"
        elif s["key"] is not None and not s["pausing"] and s["phase"] in ("running", "resumed", "stopping"):
            name = s["key"]
        else:
            name = None
        if name is not None and last == name:
            groups[-1][1].append(s)
        elif name is not None:
            groups.append((name, [s]))
        last = name
    frozen, seen, stalled = [], [], []
    for name, group in groups:
        if len(group) < 2 or group[-1]["t"] - group[0]["t"] < d.args.sample_s:
            continue
        seen.append(name)
        moved = [b["text"] != a["text"] and (a["elapsed_s"] is None or b["elapsed_s"] is None
                                              or b["elapsed_s"] > a["elapsed_s"]) for a, b in zip(group, group[1:])]
        if not any(moved):
            frozen.append({"stretch": name, "samples": [{"t": s["t"], "text": s["text"]} for s in group]})
        stalled += [[a["t"], b["t"], b["text"]] for (a, b), m in zip(zip(group, group[1:]), moved) if not m]
    if not seen:
        return check("progress", False, f"no trial ran long enough to be sampled twice ({d.args.sample_s} s apart)")
    if frozen:
        return check("progress", False, "the progress line stood still during "
                     + ", ".join(f["stretch"] for f in frozen), frozen=frozen)
    trials = [name for name in seen if name != "starting"]
    return check("progress", True, f"the line's time moved during each of the {len(trials)} trial(s) sampled twice or "
                 "more" + (", and while the sweep started" if "starting" in seen else ""), stretches=seen,
                 stalled_pairs=stalled)  # a sample the same as the one before (a busy event loop): said, not failed


def check_pause(d: Drive) -> dict:
    if "p" not in d.marks:
        return check("pause", False, "p was never pressed (the sweep ended or the time limit came first)")
    started = d.after("p", "TrialStarted", "resume")
    ends = d.after("p", "SweepFinished", "resume")
    hi = d.marks.get("resume", float("inf"))
    after_p = [s for s in d.samples if d.marks["p"] - d.t0 <= s["t"] < hi - d.t0]
    etas = [s for s in after_p if s["eta"]]
    paused = [s for s in after_p if s["phase"] == "paused"]
    problems = []
    if started:
        problems.append(f"{len(started)} trial(s) started after p: {', '.join(e.label for _, e in started)}")
    if not ends:
        problems.append("the sweep did not end after p")
    elif not ends[-1][1].stopped:
        problems.append("the sweep ended done, not stopped, after p")
    if etas:
        problems.append(f"time left shown after p: {etas[0]['text']!r}")
    if len({s["text"] for s in paused}) > 1:
        problems.append(f"the line changed while paused: {sorted({s['text'] for s in paused})}")
    if len(paused) < 2:
        problems.append("fewer than 2 samples while paused")
    pausing = [s["text"] for s in after_p if s["phase"] == "pausing"]
    return check("pause", not problems, "; ".join(problems) or (
        f"no trial started after p, the sweep ended stopped, no time left shown, the line stood still over "
        f"{len(paused)} samples paused"), pausing_line=pausing[:1], paused_line=paused[0]["text"] if paused else None)


def check_resume(d: Drive) -> dict:
    if "resume" not in d.marks:
        return check("resume", False, "r was never pressed after the pause")
    landed = {e.key for t, e in d.events if t < d.marks["resume"] and type(e).__name__ == "TrialFinished"
              and e.status in RESUMED}
    starts = d.after("resume", "SweepStarted")
    skipped = {e.key for _, e in d.after("resume", "TrialSkipped") if "resumed" in e.reason}
    went_on = [e for _, e in d.after("resume", "TrialStarted") if e.key not in landed]
    ends = d.after("resume", "SweepFinished")
    problems = []
    if not starts:
        problems.append("no sweep started after r")
    if landed - skipped:
        problems.append(f"not taken from the database: {sorted(landed - skipped)}")
    said = [s for s in d.samples if s["phase"] in ("resuming", "resumed")
            and (f"({len(landed)} resumed)" in s["text"] or f"{len(landed)} resumed" in s["search"])]
    if landed and not said:
        problems.append(f"neither the progress line nor the search line said {len(landed)} resumed")
    if not went_on and not (ends and not ends[0][1].stopped):
        problems.append("no trial ran after r and the sweep did not end done")
    return check("resume", not problems, "; ".join(problems) or (
        f"{len(landed)} row(s) resumed from the database, then "
        + (f"{went_on[0].label} ran" if went_on else "nothing was left: it ended done")),
        resumed=sorted(skipped), said=said[0]["text"] if said else None)


def read_database(d: Drive, presets) -> tuple[dict, list[dict], list[dict]]:
    from engine.data.store import Store

    try:
        with Store.open(d.args.db, read_only=True, presets=presets) as s:
            rows = s.trials(order="created_at")
            runs = s.runs()
    except Exception as e:  # noqa: BLE001 - said as the check's failure
        return check("database", False, f"cannot read {d.args.db} afterwards: {e}"), [], []
    keys = {r["key"] for r in rows}
    landed = {e.key for e in d.landed()}
    mine = [r for r in runs if r.get("note") == "tui-planner app" and r.get("source") == "measured"]
    problems = []
    if landed - keys:
        problems.append(f"landed on screen but not in the database: {sorted(landed - keys)}")
    open_runs = [r["run_id"] for r in mine if r["status"] not in ("done", "stopped")]
    if open_runs:
        problems.append(f"run(s) not finished: {open_runs} ({[r['status'] for r in mine]})")
    if not rows:
        problems.append("no rows")
    result = check("database", not problems, "; ".join(problems) or (
        f"{len(rows)} row(s), every one of the {len(landed)} that landed on screen; runs "
        + ", ".join(r["status"] for r in mine)))
    return result, rows, runs


def check_gpus(d: Drive, rows: list[dict], runs: list[dict]) -> dict:
    n = d.args.gpus
    keys = [k for _, e in d.after("r", "SweepStarted") for k in e.keys]
    problems = []
    if d.form.get("gpus") != n:
        problems.append(f"the screen asked for {d.form.get('gpus')}")
    bad_keys = [k for k in keys if k.split("|")[2] != str(n)]
    if bad_keys:
        problems.append(f"trials not on {n}: {bad_keys[:3]}")
    measured = [r for r in rows if r.get("source") == "measured"]
    if any(r["num_gpus"] != n for r in measured):
        problems.append(f"rows on {sorted({r['num_gpus'] for r in measured})} GPUs")
    mine = [r for r in runs if r.get("source") == "measured"]
    if any(r["gpu_count"] != n for r in mine):
        problems.append(f"runs on {sorted({r['gpu_count'] for r in mine})} GPUs")
    return check("gpus", not problems and bool(keys), "; ".join(problems) or (
        f"{len(set(keys))} combinations, {len(measured)} measured row(s) and {len(mine)} run(s), all on {n}"))


def check_processes(before: set[int]) -> dict:
    """Nothing the app started alive once it has quit (a few seconds for the killed to go); any left is killed."""
    from engine.bench.launcher import descendants

    left: list[int] = []
    for _ in range(100):
        left = [p for p in descendants(os.getpid()) if p not in before and not zombie(p)]
        if not left:
            break
        time.sleep(0.1)
    if not left:
        return check("processes", True, "no process of the app's left after it quit")
    named = {p: cmdline(p)[:200] for p in left}
    for p in left:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return check("processes", False, f"{len(left)} process(es) left after the app quit (killed now)", left=named)


def zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True  # gone


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


# --- the command ---------------------------------------------------------------------------------------------


def default_out() -> Path:
    return Path(os.environ["OUT"]) / "app-pilot" if os.environ.get("OUT") else Path("out") / "app-pilot"


def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--db", type=Path, default=None,
                    help="the results file the sweep writes; a new file (default: OUT/app.duckdb)")
    ap.add_argument("--model", help="a model the screen offers (default: its first; on the CPU the tiny ones)")
    ap.add_argument("--gpus", type=int, default=1, help="GPUs a trial runs on (the screen's GPUs field)")
    ap.add_argument("--methods", choices=["all", "free-lunch", "naive"], default="all",
                    help="the screen's methods: all (default), or free-lunch (naive + free-lunch); naive alone "
                         "leaves nothing to pause")
    ap.add_argument("--device", choices=["cuda", "cpu"], help="default: the screen's own choice (cpu without a GPU)")
    ap.add_argument("--no-compile", action="store_true", help="untick compile (free-lunch without torch.compile)")
    ap.add_argument("--exhaustive", action="store_true", help="tick exhaustive (default: the guided search)")
    ap.add_argument("--time-limit", type=float, default=480.0,
                    help="seconds for the whole drive; a sweep still running then is stopped with k, which with "
                         "quitting takes a few seconds more (default 480: a device command has 600)")
    ap.add_argument("--resumed-s", type=float, default=None,
                    help="stop the resumed sweep with k this long after it started a trial (default: its end "
                         "or the time limit)")
    ap.add_argument("--paused-s", type=float, default=5.0, help="how long to stay paused before r (default 5)")
    ap.add_argument("--sample-s", type=float, default=2.0, help="how often to read the progress line (default 2)")
    ap.add_argument("--out", type=Path, default=None, help="folder for pilot.json and the SVGs "
                                                           "(default $OUT/app-pilot, else ./out/app-pilot)")
    ap.add_argument("--size", default="80x24", help="the terminal, columns x lines (default 80x24)")
    ap.add_argument("--presets", action="append", default=[], help="more preset files or folders (as the app's)")
    ap.add_argument("--browse-db", help="the database the app browses (default: the shipped one)")
    a = ap.parse_args(argv)
    a.out = a.out or default_out()
    a.db = (a.db or a.out / "app.duckdb").expanduser().resolve()
    m = re.fullmatch(r"(\d+)x(\d+)", a.size)
    if m is None:
        ap.error(f"--size is COLUMNSxLINES, e.g. 80x24; not {a.size}")
    a.size = (int(m[1]), int(m[2]))
    if a.gpus < 1:
        ap.error("--gpus is at least 1")
    if a.methods == "naive":
        ap.error("pausing after the first row needs a second combination: --methods all or free-lunch")
    if a.db.exists():
        ap.error(f"{a.db} exists: the checks need a new file (a sweep would resume what it holds); remove it "
                 "or name another with --db")
    return a


async def drive(d: Drive, app) -> None:
    async with app.run_test(size=d.args.size) as pilot:
        d.app, d.pilot = app, pilot
        try:
            await d.run()
        except DriveError:
            if app.is_running:  # leave as a person would: q, and y where a sweep still runs
                await pilot.press("q")
                await pilot.pause(0.3)
                if type(app.screen).__name__ == "Confirm":
                    await pilot.press("y")
                for _ in range(300):
                    if not app.is_running:
                        break
                    await pilot.pause(0.1)
            raise


def main(argv: list[str] | None = None) -> int:
    a = parse(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    from engine.bench.launcher import descendants
    from engine.data.paths import shipped_db
    from engine.data.presets import load_presets
    from tui_planner.app.app import PlannerApp

    before = set(descendants(os.getpid()))
    presets = load_presets(tuple(a.presets))
    app = PlannerApp(presets, a.browse_db or shipped_db(), preset_paths=tuple(a.presets), remember=False)
    d = Drive(a, a.out)
    error = None
    try:
        asyncio.run(drive(d, app))
    except DriveError as e:
        error = str(e)
        d.note(f"drive stopped: {error}")
    except Exception as e:  # noqa: BLE001 - a bug here or in the app: said in pilot.json, exit 2
        import traceback

        error = f"the drive failed: {type(e).__name__}: {e}"
        d.note(error, traceback=traceback.format_exc()[-4000:])
    checks = [check_processes(before)]
    if error is None:
        db, rows, runs = read_database(d, presets)
        checks = [check_gpus(d, rows, runs), check_progress(d), check_pause(d), check_resume(d), db, *checks]
    else:
        rows, runs = [], []
    report = {
        "command": [sys.argv[0], *(argv if argv is not None else sys.argv[1:])],
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(a).items()},
        "form": d.form, "error": error, "passed": error is None and all(c["passed"] for c in checks),
        "checks": checks, "screenshots": d.shots, "timeline": d.timeline, "marks": {k: d.at(v) for k, v in d.marks.items()},
        "events": [{"t": d.at(t), **event_dict(e)} for t, e in d.events], "log_lines": d.logs,
        "samples": d.samples,
        "rows": [{k: r.get(k) for k in ("key", "source", "feasible", "failure_kind", "micro_batch", "grad_accum",
                                        "days", "mfu", "num_gpus", "duration_s", "created_at")} for r in rows],
        "runs": [{k: r.get(k) for k in ("run_id", "source", "status", "gpu_count", "search", "trials_run",
                                        "trials_skipped", "wall_s", "note", "command")} for r in runs],
        "wall_s": d.at(),
    }
    (a.out / "pilot.json").write_text(json.dumps(report, indent=1, default=str) + "\n")
    for c in checks:
        print(f"{'PASS' if c['passed'] else 'FAIL'} {c['check']}: {c['detail']}", file=sys.stderr)
    print(f"wrote {a.out / 'pilot.json'} and {len(d.shots)} screenshot(s) in {d.at():.0f} s", file=sys.stderr)
    if error is not None:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0 if report["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
