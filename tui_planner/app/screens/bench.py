"""Benchmark: measure a model on this machine's GPUs, live.

The sweep runs in a thread worker through the engine's one API (engine.bench.sweep.run_sweep); its typed
events arrive as messages, and each finished trial's row is read back from the database the sweep
writes, so what the table shows is what was stored. Torch is never imported here: the GPU probe and
the trials run in child processes.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Input, Label, ProgressBar, RichLog, Select, Static

from engine.data.errors import PlannerError
from tui_planner import format as fmt
from tui_planner.app.screens.common import Check
from tui_planner.app.text import content

# Where torch is missing: the bench extra, as installed from a clone (the README's set-up).
NO_TORCH = "torch is not installed: to benchmark, install the bench extra (from a clone: pip install '.[bench]')"

IDLE = "[dim]r runs the search: the model, GPUs, methods and device above[/]"

STATE_STYLE = {"measured": "green", "dominated": "dim", "oom": "yellow", "failed": "red", "timeout": "red",
               "refused": "bold red", "stopped": "yellow", "unavailable": "yellow", "resumed": "dim", "queued": "dim"}


class EngineEvent(Message):
    """One event from the engine's stream (engine/bench/events.py), carried to the UI thread."""

    def __init__(self, event: object) -> None:
        super().__init__()
        self.event = event


class SweepDone(Message):
    """The sweep's worker returned: close the database after every event before it has been shown."""

    def __init__(self, store, cursor) -> None:
        super().__init__()
        self.store, self.cursor = store, cursor


class BenchScreen(Screen):
    BINDINGS = [
        Binding("r", "start", "Run", tooltip="start the sweep (a stopped one resumes)"),
        Binding("p", "pause", "Pause", tooltip="stop after the running trial"),
        Binding("x", "stop", "Stop", tooltip="kill the running trial and stop"),
        Binding("l", "toggle_log", "Log", tooltip="show or hide the trials' output"),
        Binding("v", "view", "View", tooltip="browse this database in Results"),
        Binding("escape", "focus_table", "Table", show=False),
    ]

    def compose(self) -> ComposeResult:
        from engine.data.paths import user_db

        p = self.app.presets
        yield Header()
        yield Static("[dim]looking for GPUs…[/]", id="machine")
        with Horizontal(classes="form-row"):
            yield Label("Model", classes="name")
            yield Select([(fmt.text(m), m) for m in p.models], allow_blank=False, compact=True, id="b-model",
                         value=self.app.initial.model)
            yield Label(" GPUs", classes="short")
            yield Input("1", restrict=r"[0-9]*", compact=True, id="b-gpus")
            yield Select([("all methods", "all"), ("free-lunch", "free-lunch"), ("naive", "naive")],
                         allow_blank=False, compact=True, id="b-methods", value="all")
            yield Select([("cuda", "cuda"), ("cpu", "cpu")], allow_blank=False, compact=True, id="b-device",
                         value="cuda")
            yield Check("compile", value=True, compact=True, id="b-compile",
                           tooltip="torch.compile in free-lunch (off: faster start, slower steps)")
        with Horizontal(classes="form-row"):
            yield Label("Save to", classes="name")
            yield Input(str(user_db()), compact=True, id="b-db")
            yield Check("retry failed", value=False, compact=True, id="b-retry",
                           tooltip="also run again what crashed or timed out twice (skipped on resume by default)")
        with Horizontal(id="progress-row"):
            # Hidden until a sweep starts: an empty bar would animate (15 frames a second) with nothing running.
            yield ProgressBar(id="progress", show_eta=True).set_styles("display: none;")
            yield Static(content(IDLE), id="progress-label")
        yield DataTable(id="trials", cursor_type="row")
        yield RichLog(id="log", max_lines=2000, wrap=False, markup=False)
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        t = self.query_one("#trials", DataTable)
        for label, key, width in (("combination", "label", 22), ("state", "state", 16), ("batch", "mb", 7),
                                  ("days", "days", 7), ("MFU", "mfu", 5), ("time", "time", 5)):
            t.add_column(label, key=key, width=width)
        self.machine = None
        self.started_at = 0.0
        self.current: str | None = None
        self.write_cursor = None
        self.probe_machine()
        t.focus()

    # --- the machine --------------------------------------------------------------------------------

    @work(thread=True, exclusive=True, group="probe")
    def probe_machine(self) -> None:
        from engine.bench.environment import probe

        m = probe()
        self.app.call_from_thread(self._show_machine, m)

    def _show_machine(self, m) -> None:
        self.machine = m
        label = self.query_one("#machine", Static)
        e = fmt.esc
        if m.gpus:
            names = {n: m.gpus.count(n) for n in m.gpus}
            gpus = ", ".join(f"{c} x {n} ({m.memory_gb[m.gpus.index(n)]:.0f} GiB)" for n, c in names.items())
            label.update(content(f"[b]{e(gpus)}[/b] · driver {e(m.driver)} · torch {e(m.torch)} · CUDA {e(m.cuda)}"))
        else:
            label.update(content(f"[yellow]{e(self.hint(m))}[/]" + ("" if m.torch else "; browse results offline (4)")))
            if m.torch:
                self.query_one("#b-device", Select).value = "cpu"

    @staticmethod
    def hint(m) -> str:
        """Why this machine cannot benchmark on a GPU, as plain text: ours where torch is missing."""
        return m.message if m.torch else NO_TORCH

    # --- the sweep ----------------------------------------------------------------------------------

    def request(self):
        from engine.bench.sweep import SweepRequest

        gpus = self.query_one("#b-gpus", Input).value or "1"
        db = self.query_one("#b-db", Input).value.strip()
        if not db:
            raise PlannerError("choose a database file to save results to")
        from engine.data.paths import is_shipped

        if is_shipped(Path(db).expanduser()):
            raise PlannerError("the shipped database is read-only: save to a file of your own")
        if int(gpus) < 1:
            raise PlannerError("GPUs must be at least 1")
        return SweepRequest(
            model=str(self.query_one("#b-model", Select).value), methods=str(self.query_one("#b-methods", Select).value),
            num_gpus=int(gpus), device=str(self.query_one("#b-device", Select).value), db=Path(db).expanduser(),
            presets=self.app.preset_paths, timeout_s=900.0,
            compile=self.query_one("#b-compile", Check).value, note="tui-planner app",
            retry_failed=self.query_one("#b-retry", Check).value,
        )

    def action_start(self) -> None:
        if self.app.sweep_running():
            self.notify("A sweep is already running", severity="warning")
            return
        if self.machine is not None and not self.machine.torch:
            self.notify(self.hint(self.machine), title="Cannot benchmark here", severity="error", timeout=8,
                        markup=False)
            return
        try:
            req = self.request()
            req.db.parent.mkdir(parents=True, exist_ok=True)
            self.app.release_database(req.db)  # browsing it read-only would block writing it
            from engine.data.store import Store

            store = Store.open(req.db, read_only=False)
        except (PlannerError, OSError) as e:
            self.notify(fmt.visible(e, newlines=True), title="Cannot start", severity="error", timeout=8,
                        markup=False)
            return
        from tui_planner.app.state import SweepHandle

        self.query_one("#trials", DataTable).clear()
        self.query_one("#log", RichLog).clear()
        bar = self.query_one("#progress", ProgressBar)
        bar.update(total=None, progress=0)  # animated while the sweep starts (it is running)
        bar.display = True
        self.started_at = time.monotonic()
        self.write_cursor = store.cursor()
        self.app.sweep = SweepHandle(stop=threading.Event(), pause=threading.Event(), store=store)
        self.app.sweep.worker = self.run_sweep(req, store, self.write_cursor, self.app.sweep)
        self._label("starting…")

    @work(thread=True, exclusive=True, group="sweep", exit_on_error=False)
    def run_sweep(self, req, store, cursor, handle) -> None:
        from engine.bench.sweep import run_sweep

        try:
            run_sweep(req, on_event=lambda e: self.post_message(EngineEvent(e)), stop=handle.stop,
                      pause=handle.pause, store=store)
        except PlannerError as e:
            self.app.call_from_thread(self.notify, fmt.visible(e, newlines=True), title="Sweep refused",
                                      severity="error", timeout=10, markup=False)
            self.app.call_from_thread(self._label, f"[red]{fmt.esc(e)}[/]")
        except Exception as e:  # a bug in the engine: say so, keep the app up
            self.app.call_from_thread(self.notify, fmt.visible(f"{type(e).__name__}: {e}", newlines=True),
                                      title="Sweep failed", severity="error", markup=False)
            raise
        finally:
            handle.done.set()
            # Events posted before this are still queued: the UI closes the store after showing them.
            self.post_message(SweepDone(store, cursor))

    def action_pause(self) -> None:
        if self.app.sweep_running():
            self.app.stop_sweep(now=False)
            self._label("pausing after the running trial… (r resumes later)")

    def action_stop(self) -> None:
        if self.app.sweep_running():
            self.app.stop_sweep(now=True)
            self._label("stopping: killing the running trial…")

    def action_toggle_log(self) -> None:
        log = self.query_one("#log", RichLog)
        log.display = not log.display

    def action_view(self) -> None:
        if self.app.sweep_running():
            self.notify("Wait for the sweep to finish (or pause it) to browse its database", severity="warning")
            return
        try:
            self.app.open_database(self.query_one("#b-db", Input).value.strip())
        except PlannerError as e:
            self.notify(fmt.visible(e, newlines=True), title="Cannot open", severity="error", timeout=8,
                        markup=False)
            return
        self.app.switch_mode("results")

    def action_focus_table(self) -> None:
        self.query_one("#trials", DataTable).focus()

    # --- events -> widgets --------------------------------------------------------------------------

    def _label(self, markup: str) -> None:
        """Rich markup of ours, values from outside in it through fmt.esc."""
        elapsed = time.monotonic() - self.started_at if self.started_at else 0
        self.query_one("#progress-label", Static).update(content(f"{markup} [dim]{elapsed:.0f}s[/]"))

    def _set(self, key: str, column: str, markup: str) -> None:
        """One cell, as rich markup of ours (values from outside in it through fmt.esc)."""
        t = self.query_one("#trials", DataTable)
        try:
            t.update_cell(key, column, fmt.cell(markup))
        except Exception:  # a row that is not in the table (should not happen): leave the table alone
            pass

    @on(EngineEvent)
    def _event(self, message: EngineEvent) -> None:
        from engine.bench import events as ev

        e = message.event
        t = self.query_one("#trials", DataTable)
        bar = self.query_one("#progress", ProgressBar)
        if isinstance(e, ev.SweepStarted):
            for key, label in zip(e.keys, e.labels):
                t.add_row(fmt.text(label), fmt.cell("[dim]queued[/]"), "", "", "", "", key=key)
            bar.update(total=max(1, e.total - e.skipped), progress=0)
            self._label(f"{e.total} trials" + (f", {e.skipped} already in the database" if e.skipped else "")
                        + (f"; ZeRO unavailable: {fmt.esc(e.unavailable_why)}" if e.unavailable_why else ""))
        elif isinstance(e, ev.TrialSkipped):
            self._fill(e.key)
            self._set(e.key, "state", "[dim]resumed[/]" if "resumed" in e.reason else f"[dim]{fmt.esc(e.reason)}[/]")
        elif isinstance(e, ev.TrialStarted):
            self.current = e.key
            self._set(e.key, "state", "[b]searching batch[/]")
            self._label(f"{e.index}/{e.total} {fmt.esc(e.label)}")
        elif isinstance(e, ev.BatchTried):
            self._set(e.key, "state", f"batch {e.micro_batch} {'fits' if e.fits else '[yellow]OOM[/]'}")
            if e.fits:
                self._set(e.key, "mb", str(e.micro_batch))
        elif isinstance(e, ev.Measuring):
            self._set(e.key, "state", f"[b cyan]measuring[/] @{e.micro_batch}")
            self._set(e.key, "mb", str(e.micro_batch))
        elif isinstance(e, ev.TrialFinished):
            bar.advance(1)
            self._finished(e)
        elif isinstance(e, ev.Log):
            self.query_one("#log", RichLog).write(fmt.visible(e.line))  # markup=False: shown as it came
        elif isinstance(e, ev.SweepFinished):
            counts = ", ".join(f"{v} {k}" for k, v in sorted(e.counts.items())) or "nothing to run"
            took = f" in {fmt.duration(e.elapsed_s)}"
            best = f" · fastest: {fmt.esc(e.best)}" if e.best else ""
            self._label(("[yellow]stopped[/]: " if e.stopped else "[green]done[/]: ") + fmt.esc(counts) + took + best
                        + (" · r resumes" if e.stopped else " · v browses them"))

    @on(SweepDone)
    def _done(self, message: SweepDone) -> None:
        bar = self.query_one("#progress", ProgressBar)
        if bar.total is None:  # refused or failed before its first trial: no bar left animating
            bar.display = False
        message.cursor.close()
        if self.write_cursor is message.cursor:
            self.write_cursor = None
        message.store.close()

    def _finished(self, e) -> None:
        style = STATE_STYLE.get(e.status, "")
        self._set(e.key, "state", f"[{style}]{fmt.esc(e.status)}[/]" if style else fmt.esc(e.status))
        self._set(e.key, "time", f"{e.duration_s:.0f}s")
        if e.status not in ("stopped", "unavailable"):  # neither wrote a row
            self._fill(e.key)
        if e.message and e.status not in ("measured", "dominated"):
            self.query_one("#log", RichLog).write(fmt.visible(f"[{e.status}] {e.key}: {e.message}"))

    def _fill(self, key: str) -> None:
        """Fill a row from what the sweep stored (the table shows the database, not the event)."""
        if self.write_cursor is None:
            return
        rows = self.write_cursor.query("SELECT * FROM trials WHERE key = ? ORDER BY created_at DESC LIMIT 1", [key])
        if rows:
            row = rows[0]
            if row.get("micro_batch"):
                self._set(key, "mb", fmt.esc(f"{row['micro_batch']}x{row['grad_accum']}" if row.get("grad_accum")
                                             else row["micro_batch"]))
            self._set(key, "days", fmt.days(row.get("days")) if row.get("days") is not None else "—")
            self._set(key, "mfu", fmt.mfu(row.get("mfu"), row.get("plausibility")))
