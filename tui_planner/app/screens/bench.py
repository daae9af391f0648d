"""Benchmark: measure a model on this machine's GPUs, live.

The search is guided by default (engine/bench/guide.py): every combination is predicted first, its
prediction shown in its row before it runs, the fastest predicted measured first, and one whose band's low
end cannot beat the best measured is left unrun ('cannot-win', dim, its reason in the line under the table
and the log); the exhaustive box measures them all. The sweep runs in a thread worker through the engine's one API (engine.bench.sweep.run_sweep); its typed
events arrive as messages, and each finished trial's row is read back from the database the sweep
writes, so what the table shows is what was stored. Torch is never imported here: the GPU probe and
the trials run in child processes.
"""

from __future__ import annotations

import re
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
from engine.data.space import EXTRAS
from tui_planner import format as fmt
from tui_planner.app.progress import SweepProgress, short_time
from tui_planner.app.screens.common import Check
from tui_planner.app.text import content

# The largest model a trial on the CPU may train (parameters): the tiny models, whose search takes minutes
# there; a real one (Pythia-1B: 1e9) would spend hours in its batch search.
CPU_MAX_PARAMS = 10e6


def params(model) -> float:
    """A model's parameters, from its training FLOPs (6·N per token or sample; presets.py writes them so for
    a preset that gives `params`, a little over N where they count attention too)."""
    units = model.training.batch_size * model.training.steps * (model.seq_len or 1)
    return model.training_flops / (6 * units)


def cpu_presets() -> Path:
    """The tiny models shipped for a machine without a GPU (presets/cpu/), not among the shipped presets."""
    from engine.data.paths import presets_dir

    return presets_dir() / "cpu"



IDLE = "[dim]r runs the search: the model, GPUs, methods and device above[/]"
GUIDED = "[b]guided[/]: [dim]fastest predicted first, what cannot win left unrun (exhaustive: all)[/]"
EXHAUSTIVE = "[b]exhaustive[/]: [dim]every combination measured, as in the paper (untick: guided)[/]"

STATE_STYLE = {"measured": "green", "dominated": "dim", "memory": "dim", "cannot-win": "dim", "oom": "yellow",
               "failed": "red", "timeout": "red", "refused": "bold red", "stopped": "yellow", "unavailable": "yellow",
               "resumed": "dim", "given up": "dim", "queued": "dim"}

# "predicted 41.3 days (37-64.3) at micro-batch 16" (engine/bench/guide.py Guess.text)
PREDICTED = re.compile(r"predicted (?P<days>[\d.]+) days(?: \((?P<low>[\d.]+)-(?P<high>[\d.]+)\))?")


def home_short(path: Path) -> str:
    """A path under the home folder as ~/...: the whole of it fits the field at 80 columns."""
    try:
        return "~/" + str(path.relative_to(Path.home()))
    except ValueError:
        return str(path)


def predicted_cell(text: str) -> str:
    """A prediction in its column, as markup: '41.3 (37-64)', 'no fit' where it is predicted not to run,
    '—' with none; the whole text is in the line under the table."""
    m = PREDICTED.match(text)
    if m is None:
        return "[dim]no fit[/]" if text.startswith("predicted not to run") else "[dim]—[/]"
    days = fmt.days(float(m["days"]))
    band = fmt.band(float(m["low"]), float(m["high"])) if m["low"] else ""
    return fmt.esc(f"{days} ({band})" if band else days)


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


# (label, key, width): 79 columns with the table's cell padding, at 80 the scrollbar beside; a time as 2m10s.
COLUMNS = (("combination", "label", 18), ("state", "state", 12), ("predicted", "predicted", 13),
           ("batch", "mb", 6), ("days", "days", 6), ("MFU", "mfu", 4), ("time", "time", 5))


class BenchScreen(Screen):
    BINDINGS = [
        Binding("r", "start", "Run", tooltip="start the sweep (a stopped one resumes)"),
        Binding("p", "pause", "Pause", tooltip="stop after the running trial"),
        # k, not x: x exports on every other screen (the plan's report, a trial's settings), and this one kills.
        Binding("k", "stop", "Stop", tooltip="kill the running trial and stop (asks first; p pauses after it)"),
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
            # The methods beyond the paper's (fused: liger-kernel; fp8: torchao), opt-in as `bench --extras`.
            yield Select([("all methods", "all"), ("all + fused, fp8", "all+extras"), ("free-lunch", "free-lunch"),
                          ("free-lunch + fused, fp8", "free-lunch+extras"), ("naive", "naive")],
                         allow_blank=False, compact=True, id="b-methods", value="all")
            yield Select([("cuda", "cuda"), ("cpu", "cpu")], allow_blank=False, compact=True, id="b-device",
                         value="cuda")
            yield Check("compile", value=True, compact=True, id="b-compile",
                           tooltip="torch.compile in free-lunch (off: faster start, slower steps)")
        with Horizontal(classes="form-row"):
            yield Label("Save to", classes="name")
            yield Input(home_short(user_db()), compact=True, id="b-db")
            yield Check("retry", value=False, compact=True, id="b-retry",
                        tooltip="retry failed: also run again what crashed or timed out twice (skipped on resume "
                                "by default)")
            yield Check("exhaustive", value=False, compact=True, id="b-exhaustive",
                        tooltip="measure every combination, also those the guided search would leave unrun "
                                "(bench --exhaustive)")
            yield Check("step-up", value=False, compact=True, id="b-step-up",
                        tooltip="after each compiled setting's micro-batch search (uncompiled, as the paper's), "
                                "measure twice that micro-batch compiled where its memory leaves room, and keep "
                                "the faster (one GPU; bench --step-up)")
        yield Static(content(GUIDED), id="search")
        with Horizontal(id="progress-row"):
            # Hidden until a sweep starts: an empty bar would animate (15 frames a second) with nothing running.
            # Its own time left: Textual's ETA is a rate of the bar, which jumps with each trial and runs on
            # while paused (app/progress.py says how ours is made).
            yield ProgressBar(id="progress", show_eta=False).set_styles("display: none;")
            yield Static(content(IDLE), id="progress-label")
        yield DataTable(id="trials", cursor_type="row")
        yield Static("", id="trial-line")
        yield RichLog(id="log", max_lines=2000, wrap=False, markup=False)
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        t = self.query_one("#trials", DataTable)
        for label, key, width in COLUMNS:
            t.add_column(label, key=key, width=width)
        self.labels: dict[str, str] = {}  # key -> combination
        self.predicted: dict[str, str] = {}  # key -> its prediction in words (a guided search's)
        self.outcomes: dict[str, str] = {}  # key -> why it ended as it did (cannot win, failed...)
        self.exhaustive = False  # the running (or last) sweep's
        self.machine = None
        self.cpu_models: dict[str, str] = {}  # what the CPU may train (id: name), once the machine is probed
        self.started_at = 0.0
        self.clock = time.monotonic  # the progress's clock (a test sets its own)
        self.progress = SweepProgress()
        self._ticker = None  # each second while a sweep runs: its time and the running trial's
        self._starting = False  # r was pressed, the sweep's first event has not come (probe, predictions)
        self.current: str | None = None
        self._stopping = False  # x was confirmed: the killed trial's output is left out of the log
        self.write_cursor = None
        self._models_listed = tuple(self.app.presets.models)
        self.watch(self.app, "state", self._plan_changed, init=False)
        self.probe_machine()
        t.focus()

    def _plan_changed(self, s) -> None:
        """A model added on the Plan screen (`a`: app.load_model, from a config.json) is one to benchmark too:
        listed here as it comes (on the CPU if it is as small as the tiny ones), and chosen, being the plan's."""
        listed = tuple(self.app.presets.models)
        if s is None or listed == self._models_listed:
            return
        added = set(listed) - set(self._models_listed)
        self._models_listed = listed
        if self.cpu_models:  # probed: the CPU's list is known, and takes the small ones
            self.cpu_models.update({mid: self.app.presets.model(mid).name for mid in listed if mid in added
                                    and params(self.app.presets.model(mid)) <= CPU_MAX_PARAMS})
        self._offer_models(str(self.query_one("#b-device", Select).value), s.model if s.model in added else None)

    # --- the machine --------------------------------------------------------------------------------

    @work(thread=True, exclusive=True, group="probe")
    def probe_machine(self) -> None:
        from engine.bench.environment import probe

        m = probe()
        cpu = self._cpu_models()
        self.app.call_from_thread(self._show_machine, m, cpu)

    def _cpu_models(self) -> dict[str, str]:
        """The models the CPU may train (id: name): the shipped tiny ones and any as small of the app's."""
        from engine.data.presets import load_presets

        try:
            shipped = load_presets(extra=(cpu_presets(),), include_user=False).models
        except PlannerError:  # a broken install: the app's own small models, if any
            shipped = {}
        models = {**shipped, **self.app.presets.models}
        return {m.id: m.name for m in models.values() if params(m) <= CPU_MAX_PARAMS}

    def _show_machine(self, m, cpu_models: dict[str, str] | None = None) -> None:
        self.machine = m
        self.cpu_models = cpu_models or {}
        label = self.query_one("#machine", Static)
        e = fmt.esc
        if m.gpus:
            names = {n: m.gpus.count(n) for n in m.gpus}
            gpus = ", ".join(f"{c} x {n} ({m.memory_gb[m.gpus.index(n)]:.0f} GiB)" for n, c in names.items())
            label.update(content(f"[b]{e(gpus)}[/b] · driver {e(m.driver)} · torch {e(m.torch)} · CUDA {e(m.cuda)}"
                                 if m.torch else f"[b]{e(gpus)}[/b] · [yellow]{e(self.hint(m))}[/]"))
        else:
            if m.torch:
                label.update(content("[yellow]no GPU here:[/] the CPU runs the tiny models only [dim](Model), to "
                                     "try the engine[/]" if self.cpu_models else
                                     "[yellow]no GPU here, and no tiny CPU models: presets/cpu is missing[/]"))
                with self.query_one("#b-device", Select).prevent(Select.Changed):
                    self.query_one("#b-device", Select).value = "cpu"
                self._offer_models("cpu")
            else:
                label.update(content(f"[yellow]{e(self.hint(m))}[/]; browse results offline (4)"))

    @staticmethod
    def hint(m) -> str:
        """Why this machine cannot benchmark on a GPU, as plain text; where torch is missing, how to install it
        (its CPU build first where no GPU is found: pip's default is CUDA's, several GB)."""
        from engine.bench.environment import torch_missing

        return m.message if m.torch else torch_missing(bool(m.gpus))

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
        device = str(self.query_one("#b-device", Select).value)
        methods = str(self.query_one("#b-methods", Select).value)
        # On the CPU the shipped tiny models first: the app's own presets (--presets) win over them.
        presets = (str(cpu_presets()), *self.app.preset_paths) if device == "cpu" else self.app.preset_paths
        return SweepRequest(
            model=self.app.model_source(str(self.query_one("#b-model", Select).value)), methods=methods.removesuffix("+extras"),
            extras=EXTRAS if methods.endswith("+extras") else (),
            num_gpus=int(gpus), device=device, db=Path(db).expanduser(),
            presets=presets, timeout_s=900.0,
            compile=self.query_one("#b-compile", Check).value, note="tui-planner app",
            retry_failed=self.query_one("#b-retry", Check).value,
            exhaustive=self.query_one("#b-exhaustive", Check).value,
            step_up=self.query_one("#b-step-up", Check).value,
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
        self.labels, self.predicted, self.outcomes = {}, {}, {}
        self.query_one("#trial-line", Static).update("")
        self.exhaustive = req.exhaustive
        bar = self.query_one("#progress", ProgressBar)
        bar.update(total=None, progress=0)  # animated while the sweep starts (it is running)
        bar.display = True
        self.started_at = self.clock()
        self.write_cursor = store.cursor()
        self.app.sweep = SweepHandle(stop=threading.Event(), pause=threading.Event(), store=store)
        self.app.sweep.worker = self.run_sweep(req, store, self.write_cursor, self.app.sweep)
        # Before its first event the sweep probes the GPUs, predicts every combination and checks that DeepSpeed
        # imports: on a GPU machine tens of seconds, so the time since r moves each second from here.
        self._starting = True
        self._label("starting…")
        self._ticking(True)

    @work(thread=True, exclusive=True, group="sweep", exit_on_error=False)
    def run_sweep(self, req, store, cursor, handle) -> None:
        from engine.bench.sweep import run_sweep

        try:
            run_sweep(req, on_event=lambda e: self.post_message(EngineEvent(e)), stop=handle.stop,
                      pause=handle.pause, store=store)
        except PlannerError as e:
            self.app.call_from_thread(self.notify, fmt.visible(e, newlines=True), title="Sweep refused",
                                      severity="error", timeout=10, markup=False)
            self.app.call_from_thread(self._not_started, f"[red]{fmt.esc(e)}[/]")
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
            self.progress.pausing = True
            self._tick()

    def action_stop(self) -> None:
        """Ask, then kill the running trial and end the sweep: the trial is not saved, and a resume runs it
        again from its start (said here, in the log and on the progress line)."""
        if not self.app.sweep_running():
            return
        from tui_planner.app.screens.dialogs import Confirm

        p = self.progress
        trial = p.trial_s(self.clock())
        running = (f"the running trial, {fmt.esc(p.current_label)} ({short_time(trial)} in), is killed and not "
                   "saved; r resumes the search later and runs it again from its start" if trial is not None
                   else "no trial is running yet; r resumes the search later")

        def answer(yes: bool | None) -> None:
            if yes and self.app.sweep_running():
                self._stopping = True
                self.app.stop_sweep(now=True)
                self._label("stopping: killing the running trial…")

        self.app.push_screen(Confirm(f"Stop the sweep now? {running}.\nFinished trials are saved. (p instead "
                                     "pauses after the running trial.)", "Stop now"), answer)

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

    @on(Select.Changed, "#b-device")
    def _device(self, event: Select.Changed) -> None:
        self._offer_models(str(event.value))

    def _offer_models(self, device: str, choose: str | None = None) -> None:
        """The models the device can train: on the CPU only the tiny ones (a real model would spend hours in
        its batch search); on a GPU every model. `choose`: the one to show chosen, if the device can train it."""
        box = self.query_one("#b-model", Select)
        if device == "cpu":
            if not self.cpu_models:  # the machine not probed yet: its models come with it
                return
            options = [(fmt.text(mid), mid) for mid in self.cpu_models]
        else:
            options = [(fmt.text(mid), mid) for mid in self.app.presets.models]
        ids = {v for _, v in options}
        keep = choose if choose in ids else box.value if box.value in ids else options[0][1]
        with box.prevent(Select.Changed):
            box.set_options(options)
            box.value = keep

    @on(Check.Changed, "#b-exhaustive")
    def _search_mode(self, event: Check.Changed) -> None:
        if not self.app.sweep_running():  # a running sweep's line stays its own
            self.query_one("#search", Static).update(content(EXHAUSTIVE if event.value else GUIDED))

    @on(DataTable.RowHighlighted, "#trials")
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_row(str(event.row_key.value) if event.row_key is not None else None)

    def _show_row(self, key: str | None) -> None:
        """The highlighted combination in words under the table: its prediction and why it ended as it did."""
        line = self.query_one("#trial-line", Static)
        if key is None or key not in self.labels:
            line.update("")
            return
        parts = [f"[b]{fmt.esc(self.labels[key])}[/b]"]
        outcome = self.outcomes.get(key, "")
        if outcome.startswith("cannot win: "):  # its reason holds its prediction: said once
            parts.append(f"[dim]cannot win:[/] {fmt.esc(outcome.removeprefix('cannot win: '))}")
        else:
            if key in self.predicted:
                parts.append(fmt.esc(self.predicted[key]))
            if outcome:
                parts.append(f"[dim]{fmt.esc(outcome)}[/]")
        line.update(content(": ".join(parts[:2]) + "".join(f" · {p}" for p in parts[2:])))

    def _refresh_row(self, key: str) -> None:
        t = self.query_one("#trials", DataTable)
        try:
            highlighted = t.coordinate_to_cell_key(t.cursor_coordinate).row_key.value
        except Exception:  # an empty table: no row highlighted
            return
        if highlighted == key:
            self._show_row(key)

    # --- events -> widgets --------------------------------------------------------------------------

    def _label(self, markup: str, elapsed: bool = True) -> None:
        """Rich markup of ours, values from outside in it through fmt.esc; with the time since the start."""
        took = self.clock() - self.started_at if self.started_at else 0
        self.query_one("#progress-label", Static).update(content(f"{markup} [dim]{short_time(took)}[/]" if elapsed
                                                                 else markup))

    def _not_started(self, markup: str) -> None:
        """The sweep ended before its first event (refused, or failed): the time stops, the line says why."""
        self._starting = False
        self._ticking(False)
        self._label(markup)

    def _tick(self) -> None:
        """The progress line and the running trial's time in its row (each second while a sweep runs, and on
        each event); the time since r while the sweep starts."""
        if self._starting:
            self._label("starting…")
            return
        now = self.clock()
        p = self.progress
        self.query_one("#progress-label", Static).update(content(p.line(now)))
        if p.current is not None and p.trial_s(now) is not None:
            self._set(p.current, "time", short_time(p.trial_s(now)))
        self.query_one("#progress", ProgressBar).update(total=max(1, p.total), progress=p.done)

    def _ticking(self, on: bool) -> None:
        if self._ticker is not None:
            self._ticker.stop()
            self._ticker = None
        if on:
            self._ticker = self.set_interval(1.0, self._tick)

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
            self._stopping = self._starting = False
            self.labels = dict(zip(e.keys, e.labels))
            for key, label in zip(e.keys, e.labels):
                t.add_row(fmt.text(label), fmt.cell("[dim]queued[/]"), "", "", "", "", "", key=key)
            self.query_one("#search", Static).update(content(
                EXHAUSTIVE if self.exhaustive else
                "[b]not guided[/]: [dim]no predictions for this model here: every combination measured in order[/]"))
            self.progress.start(e.keys, e.total, self.clock())
            if e.unavailable_why:
                self.query_one("#log", RichLog).write(fmt.visible(f"ZeRO unavailable: {e.unavailable_why}"))
            self._ticking(True)
            self._tick()
        elif isinstance(e, ev.SearchGuided):
            keys = {label: key for key, label in self.labels.items()}
            low = {}
            for label, words in e.predicted:
                if label in keys:
                    self.predicted[keys[label]] = words
                    self._set(keys[label], "predicted", predicted_cell(words))
                    m = PREDICTED.match(words)
                    if m is not None:
                        low[keys[label]] = float(m["low"] or m["days"])
            self.progress.predicted(low)
            self.query_one("#search", Static).update(content(
                f"[b]guided[/]: [dim]{len(e.predicted)} predicted, the fastest measured first; what cannot win "
                "is left unrun[/]"))
            if e.basis:
                self.query_one("#log", RichLog).write(fmt.visible(f"guided search: predictions from {e.basis}"))
            if t.row_count:
                self._show_row(str(t.coordinate_to_cell_key(t.cursor_coordinate).row_key.value))
        elif isinstance(e, ev.TrialSkipped):
            row = self._fill(e.key)
            resumed = "resumed" in e.reason
            measured = row is not None and row.get("source") == "measured" and row.get("feasible")
            self.progress.settled(e.key, row.get("days") if measured else None, resumed=resumed)
            self._tick()
            self._set(e.key, "state", "[dim]resumed[/]" if resumed else "[dim]given up[/]")
            if not resumed:
                self.outcomes[e.key] = e.reason
                self.query_one("#log", RichLog).write(fmt.visible(f"[skipped] {e.label}: {e.reason}"))
                self._refresh_row(e.key)
        elif isinstance(e, ev.TrialStarted):
            self.current = e.key
            self._set(e.key, "state", "[b]batch search[/]")
            self.progress.trial_started(e.key, e.label, self.clock())
            self._tick()
        elif isinstance(e, ev.BatchTried):
            self._set(e.key, "state", f"{e.micro_batch} {'fits' if e.fits else '[yellow]OOM[/]'}")
            if e.fits:
                self._set(e.key, "mb", str(e.micro_batch))
        elif isinstance(e, ev.Measuring):
            self._set(e.key, "state", f"[b cyan]timing[/] @{e.micro_batch}")
            self._set(e.key, "mb", str(e.micro_batch))
        elif isinstance(e, ev.TrialFinished):
            self.progress.finished(e.key, e.status, e.days, e.duration_s)
            self._finished(e)
            self._tick()
        elif isinstance(e, ev.Log):
            if self._stopping and e.key and e.key == self.progress.current:
                return  # the killed trial's dying words (torchrun's SignalException): one line says it below
            self.query_one("#log", RichLog).write(fmt.visible(e.line))  # markup=False: shown as it came
        elif isinstance(e, ev.SweepFinished):
            self._ticking(False)
            self.progress.end(self.clock())
            bar.update(total=max(1, self.progress.total), progress=self.progress.done)
            took = f" in {fmt.duration(e.elapsed_s)}"
            best = f" · fastest: {fmt.esc(e.best)}" if e.best else ""
            left = len(self.progress.queued)  # not run yet: the stopped trial among them
            self._label(("[yellow]stopped[/]" if e.stopped else "[green]done[/]") + took + best
                        + (f" · r resumes the {left} left" if e.stopped and left else ""),
                        elapsed=False)  # v browses them: the footer
            # The counts, on the search's line: what ran, what the guided search left unrun and why.
            mode = "exhaustive" if self.exhaustive else "guided" if self.predicted else "not guided"
            counts = [f"[b]{v}[/] {fmt.esc(k)}" + (" [dim](left unrun: exhaustive runs them)[/]"
                                                   if k == "cannot win" else "")
                      for k, v in sorted(e.counts.items(), key=lambda kv: (kv[0] == "cannot win", kv[0]))]
            if left:
                counts.append(f"[b]{left}[/] not run yet")
            self.query_one("#search", Static).update(content(
                f"[b]{mode}[/]: " + (", ".join(counts) or "nothing to run") + f" [dim]of {len(self.labels)}[/]"))

    @on(SweepDone)
    def _done(self, message: SweepDone) -> None:
        self._ticking(False)  # ended without its SweepFinished (refused, or a bug): the time stops too
        if self._starting:  # failed before its first event (a bug in the engine: its notification says what)
            self._not_started("[red]the sweep failed before it started[/]")
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
        self._set(e.key, "time", short_time(e.duration_s) if e.duration_s or e.status != "cannot-win" else "—")
        if e.status == "cannot-win":  # the whole row dim: decided on its prediction, nothing ran
            label = self.labels.get(e.key, e.label)
            self._set(e.key, "label", f"[dim]{fmt.esc(label)}[/]")
            self._set(e.key, "predicted", f"[dim]{predicted_cell(self.predicted.get(e.key, ''))}[/]")
        if e.status not in ("stopped", "unavailable"):  # neither wrote a row
            self._fill(e.key)
        if e.status == "stopped":  # one plain line for what the person did
            why = f"stopped by you after {short_time(e.duration_s)}: not saved, r runs it again from its start"
            self.outcomes[e.key] = why
            self.query_one("#log", RichLog).write(fmt.visible(f"[stopped] {e.label}: {why}"))
            self._refresh_row(e.key)
        elif e.message and e.status not in ("measured", "dominated"):
            self.outcomes[e.key] = e.message
            self.query_one("#log", RichLog).write(fmt.visible(f"[{e.status}] {e.label}: {e.message}"))
            self._refresh_row(e.key)

    def _fill(self, key: str) -> dict | None:
        """Fill a row from what the sweep stored (the table shows the database, not the event); that row."""
        if self.write_cursor is None:
            return None
        rows = self.write_cursor.query("SELECT * FROM trials WHERE key = ? ORDER BY created_at DESC LIMIT 1", [key])
        if not rows:
            return None
        row = rows[0]
        if row.get("micro_batch"):
            self._set(key, "mb", fmt.esc(f"{row['micro_batch']}x{row['grad_accum']}" if row.get("grad_accum")
                                         else row["micro_batch"]))
        self._set(key, "days", fmt.days(row.get("days")) if row.get("days") is not None else "—")
        self._set(key, "mfu", fmt.mfu(row.get("mfu"), row.get("plausibility")))
        return row
