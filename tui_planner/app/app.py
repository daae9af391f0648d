"""The Textual app: Plan (what to buy, what-if by keyboard), Chart, Benchmark (live sweep) and Results.

One current results database (the shipped one, or --db / `o` to open another) feeds the ranking and
the Results screen. A run the database holds no rows of (another batch, sequence length, precision or
optimizer, or a model from its config.json) is ranked on predictions made for it when it is first asked for
(engine.plan.ranking.store_for), kept per model id while that database is open. Reads run in thread workers on their own DuckDB cursor, so the UI never waits on
a query; the Benchmark screen writes its own database through the engine (engine/bench/sweep.py).
"""

from __future__ import annotations

import datetime as dt
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable

from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.reactive import reactive
from textual.screen import Screen
from textual.worker import get_current_worker

from engine.data.errors import PlannerError
from engine.data.presets import Model, Presets
from engine.data.runs import RunFlags
from engine.data.store import Store
from tui_planner.app.screens.plan import PlanScreen
from tui_planner import format as fmt
from tui_planner.app import state as st
from tui_planner.app.state import PlanState, SweepHandle

DARK, LIGHT = "textual-dark", "textual-light"
SAVE_AFTER_S = 1.0  # the plan is kept once its changes pause
LAID_OUT_FOR = (80, 24)  # every screen shows all a decision needs at this size; smaller, some of it is cut


@dataclass(frozen=True)
class Ranking:
    """The ranking for one PlanState: its rows, GPUs with no data, or why it could not be computed; the
    model on the state's run and the presets holding it (what export builds from), and the store it was
    ranked on when that is not the app's (predictions made now for a run the database has no rows of)."""

    state: PlanState
    rows: tuple[dict[str, Any], ...] = ()
    missing: tuple[str, ...] = ()
    error: str | None = None
    model: Model | None = field(default=None, compare=False)
    presets: Presets | None = field(default=None, compare=False)
    store: Store | None = None  # compared (by identity): a ranking on a store made anew replaces the old one


def _cancelled() -> bool:
    """Whether the worker running this is cancelled (the app is leaving); False outside a worker."""
    from textual.worker import NoActiveWorker

    try:
        return get_current_worker().is_cancelled
    except NoActiveWorker:
        return False


def db_label(path: str | Path | None) -> str:
    """Which database the screens show, for the header: 'shipped database', or the file (under the home
    folder as ~/..., its start cut where it is long), as plain text."""
    from engine.data.paths import is_shipped

    if path is None:
        return "in memory"
    if is_shipped(Path(path)):
        return "shipped database"
    text = str(path)
    try:
        text = "~/" + str(Path(path).expanduser().resolve().relative_to(Path.home())) if Path(path).is_absolute() \
            else text
    except ValueError:
        pass
    text = fmt.visible(text)
    return text if len(text) <= 40 else "…" + text[-39:]


def _screen(module: str, name: str) -> Screen:
    import importlib

    return getattr(importlib.import_module(f"tui_planner.app.screens.{module}"), name)()


class PlannerApp(App):
    CSS_PATH = Path(__file__).with_name("app.tcss")  # absolute: subclasses elsewhere find it too
    TITLE = "tui-planner"
    # The screens not shown first are imported when first opened (start-up: scripts/cold_start.py).
    MODES = {"plan": PlanScreen, "chart": lambda: _screen("chart", "ChartScreen"),
             "bench": lambda: _screen("bench", "BenchScreen"), "results": lambda: _screen("results", "ResultsScreen")}
    DEFAULT_MODE = "plan"
    BINDINGS = [
        Binding("1", "switch_mode('plan')", "Plan", tooltip="what to buy, what-if by keyboard"),
        Binding("2", "switch_mode('chart')", "Chart", tooltip="days against cost, the Pareto frontier"),
        Binding("3", "switch_mode('bench')", "Bench", tooltip="benchmark this machine's GPUs"),
        Binding("4", "switch_mode('results')", "Results", tooltip="browse every trial in the database"),
        Binding("question_mark,f1", "help", "Help", key_display="?"),
        Binding("ctrl+t", "toggle_theme", "Theme", show=False),
        Binding("o", "open_db", "Open DB", show=False,
                tooltip="browse another results file; with one open, enter goes back to the shipped database"),
        Binding("q", "quit", "Quit"),
    ]

    state: reactive[PlanState | None] = reactive(None, init=False)
    ranking: reactive[Ranking | None] = reactive(None, init=False)
    db_path: reactive[str] = reactive("", init=False)

    def __init__(self, presets: Presets, db: str | Path, model: str | None = None, preset_paths: tuple[str, ...] = (),
                 light: bool = False, today: dt.date | None = None, run: RunFlags | None = None,
                 budget: float | None = None, deadline: float | None = None, remember: bool = False) -> None:
        """`model`: a preset id or the path of a Hugging Face config.json (then the app's presets hold the
        model read from it); `run`: the command line's run flags; `budget`, `deadline`: the command line's.
        `remember`: open on the last plan (app/saved.py; the flags given win over it) and keep this one.
        Raises PlannerError for a model or run given that cannot be."""
        from engine.data.runs import config_path, is_config_path, model_for

        super().__init__()
        self.remember = remember
        self.notes: list[str] = []  # said once the app is up (plain text)
        saved: dict[str, Any] = {}
        if remember:
            from tui_planner.app import saved as saved_plan

            saved, note = saved_plan.load(presets)
            if note:
                self.notes.append(note)
        same_model = model is None or model == saved.get("model")
        if model is None and saved.get("model_config"):  # a config.json's model, read again
            model = self._saved_config(presets, saved["model_config"])
            same_model = model is not None
        self.model_config: str | None = None  # the config.json the model was read from (saved with the plan)
        self.model_config_id: str | None = None  # the id it has here (the config's own name)
        self.config_models: dict[str, str] = {}  # models added from a config.json (`a`): id -> its path
        if model and is_config_path(model):
            presets, read = model_for(presets, model)  # the config's model on its own run, under its id
            self.model_config = str(config_path(model).resolve())
            model = self.model_config_id = read.id
        self.default_model = "pythia-1b" if "pythia-1b" in presets.models else next(iter(presets.models))
        first = model or saved.get("model") or self.default_model
        presets.model(first)
        if run is None and same_model and saved.get("run") is not None:  # the saved run, for the saved model
            try:
                run = st.plain_run(presets, first, saved["run"])
            except PlannerError as e:
                self.notes.append(f"The saved plan's run did not apply here: {e}")
        flags = st.plain_run(presets, first, run)  # a run the model cannot have: said before the app opens
        self.presets = presets
        self.preset_paths = tuple(preset_paths)
        self.store: Store = Store.open(db, read_only=True, create=False, presets=presets)
        self.sweep: SweepHandle | None = None
        self._watchdog = None
        self.theme = LIGHT if light else DARK
        # today: when prices turn stale (tests fix it)
        self.initial = PlanState(model=first, today=today, run=flags)
        if saved:
            from tui_planner.app import saved as saved_plan

            self.initial = saved_plan.apply(self.initial, saved)
        flagged = {k: v for k, v in (("budget_usd", budget), ("deadline_days", deadline)) if v is not None}
        self.initial = replace(self.initial, **flagged)  # the command line wins
        self._save_timer = None
        # The stores with predictions made now, per model on a run the database has no rows of (store_for).
        self.run_stores: dict[str, Store] = {}
        self._run_stores_lock = threading.Lock()
        self._rank_busy = False  # a ranking thread runs (rank_in_background)
        self._rank_next: PlanState | None = None
        self._first_ranking: tuple[PlanState, Any] | None = None  # (state, Future): _rank_first
        self.set_reactive(PlannerApp.db_path, str(self.store.path))
        self.sub_title = db_label(self.store.path)  # in the header of every screen

    def _saved_config(self, presets: Presets, config: str) -> str | None:
        """The saved plan's config.json, if it is still one the model can be read from."""
        from engine.data.runs import model_for

        try:
            model_for(presets, config)
        except (PlannerError, OSError) as e:
            self.notes.append(f"The saved plan's model did not apply here: {e}")
            return None
        return config

    # --- life cycle ----------------------------------------------------------------------------------

    def run(self, *args: Any, **kwargs: Any) -> Any:
        """App.run, with SIGHUP and SIGTERM taken by a watchdog thread first (app/hangup.py): a dropped SSH
        session or a killed tmux leaves no process behind, even where Textual's shutdown blocks on a
        terminal that is gone."""
        from tui_planner.app.hangup import ExitGuard

        guard = None
        if threading.current_thread() is threading.main_thread():
            guard = ExitGuard(self._stop_from_thread, lambda: self.sweep)
            guard.install()
        self._rank_first()
        try:
            return super().run(*args, **kwargs)
        finally:
            if guard is not None:
                guard.uninstall()

    def _rank_first(self) -> None:
        """Rank the first state in a thread now, while Textual starts and draws the screen (start-up:
        scripts/cold_start.py); rank_in_background takes the result when the state is that one."""
        from concurrent.futures import Future

        state, future = self.initial, Future()

        def first() -> None:
            try:
                future.set_result(self._rank_one(state))
            except BaseException as e:  # noqa: BLE001 - handed to whoever waits on it
                future.set_exception(e)

        self._first_ranking = (state, future)
        threading.Thread(target=first, name="tui-planner-first-ranking", daemon=True).start()

    def on_mount(self) -> None:
        import asyncio

        self._loop_running = asyncio.get_running_loop()
        self.state = self.initial
        for note in self.notes:
            self.notify(fmt.visible(note, newlines=True), title="Saved plan", severity="warning", timeout=8,
                        markup=False)
        self._small_said = False
        self._say_if_small()

    def on_resize(self, event: Any) -> None:
        self._say_if_small(event.size)  # before App's own handler has taken the new size

    def _say_if_small(self, size: Any = None) -> None:
        """Below 80x24 some columns, lines and footer keys are cut: said once each time the terminal gets
        that small, so nothing goes missing unannounced."""
        w, h = size or self.size
        small = w < LAID_OUT_FOR[0] or h < LAID_OUT_FOR[1]
        if small and not getattr(self, "_small_said", True):
            self.notify(f"The terminal is {w}x{h}: the screens are laid out for {LAID_OUT_FOR[0]}x{LAID_OUT_FOR[1]}, "
                        "so some columns, lines and footer keys are cut here (? lists every key).",
                        title="Small terminal", severity="warning", timeout=8, markup=False)
        if hasattr(self, "_small_said"):
            self._small_said = small

    def _stop_from_thread(self) -> None:
        """The watchdog thread asks the event loop (if it still turns) to stop the sweep and leave."""
        loop = getattr(self, "_loop_running", None)
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._terminate)

    def _terminate(self) -> None:
        """Stop the sweep and leave (quitting during a sweep, or a signal): trials are killed with their
        process group, the database keeps every finished trial."""
        self.stop_sweep(now=True)
        self.run_worker(self._exit_after_sweep(), exclusive=True, group="exit")
        # If the UI cannot get there (a busy loop), leave anyway: trial processes die with us
        # (PR_SET_PDEATHSIG), and the database keeps every committed trial (DuckDB's WAL).
        import os

        if self._watchdog is None:
            self._watchdog = threading.Timer(30.0, os._exit, args=(143,))
            self._watchdog.daemon = True
            self._watchdog.start()

    async def _exit_after_sweep(self) -> None:
        if self.sweep is not None and self.sweep.worker is not None:
            try:
                await self.sweep.worker.wait()
            except Exception:  # noqa: BLE001 - a failed sweep was already reported; leave anyway
                pass
        self.exit()

    def on_unmount(self) -> None:
        self.save_plan()
        self.stop_sweep(now=True)
        self._drop_run_stores(now=True)
        try:
            self.store.close()
        except Exception:  # noqa: BLE001 - a ranking mid-query (duckdb: busy): read-only, it goes with the process
            pass
        if self._watchdog is not None:  # we got out in time
            self._watchdog.cancel()

    # --- shared state --------------------------------------------------------------------------------

    def watch_state(self, state: PlanState | None) -> None:
        if state is not None:
            self.rank_in_background(state)
            if self.remember:  # kept when the changes pause (and on leaving)
                if self._save_timer is not None:
                    self._save_timer.stop()
                self._save_timer = self.set_timer(SAVE_AFTER_S, self.save_plan)

    def save_plan(self) -> None:
        """Keep the plan for the next start (app/saved.py); said once if the config folder cannot be written."""
        if not self.remember or self.state is None:
            return
        from tui_planner.app import saved as saved_plan

        config = self.model_config if self.state.model == self.initial.model else None
        config = self.config_models.get(self.state.model, config)
        try:
            saved_plan.save(self.state, config)
        except OSError as e:
            if not getattr(self, "_save_failed", False):
                self._save_failed = True
                self.notify(fmt.visible(f"Cannot keep the plan for next time: {e}", newlines=True),
                            severity="warning", timeout=8, markup=False)

    def reset_plan(self) -> None:
        """Back to the defaults: the default model on its own run, the default budget, deadline, sources, GPU
        types and prices (the saved plan follows)."""
        if self.state is not None:
            self.state = PlanState(model=self.default_model, today=self.state.today)

    def update_state(self, **changes: Any) -> None:
        if self.state is not None:
            self.state = replace(self.state, **changes)

    def rank_in_background(self, state: PlanState) -> None:
        """Rank `state` in a thread. One ranking runs at a time: states that come while it runs (a burst of
        typing, a held key) wait, and only the newest of them is ranked next, so a fast typist starts one
        ranking, not one per key, and the event loop never waits on a query."""
        self._rank_next = state
        if not self._rank_busy:
            self._rank_now()

    def _rank_now(self) -> None:
        state, self._rank_next = self._rank_next, None
        if state is None:
            return
        self._rank_busy = True
        first, self._first_ranking = self._first_ranking, None
        if first is not None and first[0] == state:  # being ranked since run() began: wait for that one
            self.run_worker(lambda: self._rank(state, first[1]), thread=True, group="rank", exit_on_error=False)
            return
        self.run_worker(lambda: self._rank(state), thread=True, group="rank", exit_on_error=False)

    def _ranked(self, result: Ranking | None) -> None:
        """A ranking is done (None: it was given up): show it unless a newer state waits, then rank that."""
        self._rank_busy = False
        if self._rank_next is not None:
            self._rank_now()
            if result is None or result.state != self.state:
                return  # replaced before it could be read: drawing it would only cost the typist
        if result is not None:
            self.ranking = result

    def _rank(self, state: PlanState, started: Any = None) -> None:
        result = None
        try:
            result = started.result() if started is not None else self._rank_one(state)
        finally:
            if not get_current_worker().is_cancelled:  # cancelled: the app is leaving
                try:
                    self.call_from_thread(self._ranked, result)
                except RuntimeError:  # the app stopped meanwhile
                    pass

    def _rank_one(self, state: PlanState) -> Ranking | None:
        from engine.plan.ranking import no_data_gpus, rank

        cur = self.store.cursor()
        on = None
        try:
            presets, model = st.run_model(self.presets, state)
            ranked_on = self._store_for(cur, presets, model.id)
            if ranked_on is None:  # the app is leaving
                return None
            on = ranked_on.cursor() if ranked_on is not cur else cur
            req = state.request(model)
            rows = rank(on, req, presets)
            return Ranking(state, tuple(rows), tuple(no_data_gpus(on, req, presets)), model=model, presets=presets,
                           store=None if ranked_on is cur else ranked_on)
        except PlannerError as e:
            return Ranking(state, error=str(e))
        except Exception as e:  # noqa: BLE001 - e.g. a database that is not ours: say so on screen
            return Ranking(state, error=f"cannot rank: {type(e).__name__}: {e}")
        finally:
            if on is not None and on is not cur:
                on.close()
            cur.close()

    def _store_for(self, cur: Store, presets: Presets, model_id: str) -> Store | None:
        """The store to rank a model on a run on (engine.plan.ranking.store_for): the database (through `cur`)
        where it holds the model on that run, else one with predictions made now (about a second), kept per
        model id while this database is open. None when the app is leaving (its worker cancelled)."""
        from engine.plan.ranking import store_for

        with self._run_stores_lock:  # one prediction at a time; a state left behind meanwhile skips its own
            if model_id in self.run_stores:
                return self.run_stores[model_id]
            if _cancelled():
                return None
            store = store_for(cur, presets, model_id)
            if store is not cur:
                self.run_stores[model_id] = store
            return store

    def predicting(self, model_id: str) -> bool:
        """Whether ranking this model id may first make predictions (a run the database may not hold)."""
        return model_id not in self.presets.models and model_id not in self.run_stores

    def _drop_run_stores(self, now: bool = False) -> None:
        with self._run_stores_lock:
            stores, self.run_stores = list(self.run_stores.values()), {}
        for store in stores:
            if not now:
                self._close_when_idle(store)
                continue
            try:
                store.close()
            except Exception:  # noqa: BLE001 - leaving: an in-memory database goes with the process
                pass

    def open_database(self, path: str | Path) -> None:
        """Make another results file the current one (read-only). Raises PlannerError with the reason."""
        new = Store.open(Path(path).expanduser(), read_only=True, create=False, presets=self.presets)
        old, self.store = self.store, new
        self.db_path = str(new.path)
        self.sub_title = db_label(new.path)
        self._drop_run_stores()  # their measured and paper rows were the old file's
        self._close_when_idle(old)
        if self.state is not None:
            self.rank_in_background(self.state)
        self.notify(f"Opened {fmt.visible(new.path)}", title="Database", markup=False)

    def _close_when_idle(self, store: Store, tries: int = 20) -> None:
        """Close a store a worker may still be reading through a cursor; DuckDB refuses while a query
        runs, so try again a little later."""
        try:
            store.close()
        except Exception:  # noqa: BLE001 - duckdb's "resource in use": a cursor is mid-query
            if tries:
                self.set_timer(0.5, lambda: self._close_when_idle(store, tries - 1))

    def release_database(self, path: str | Path) -> None:
        """Stop browsing `path` (a sweep is about to write it: DuckDB will not open one file both ways in
        one process); browse the shipped database meanwhile."""
        from engine.data.paths import shipped_db

        if self.store.path is not None and Path(self.store.path).resolve() == Path(path).resolve():
            self.open_database(shipped_db())

    # --- actions -------------------------------------------------------------------------------------

    def action_toggle_theme(self) -> None:
        self.theme = LIGHT if self.theme == DARK else DARK

    def action_help(self) -> None:
        from tui_planner.app.screens.dialogs import HelpScreen

        self.push_screen(HelpScreen())

    def action_glossary(self) -> None:
        from tui_planner.app.screens.dialogs import GlossaryScreen

        self.push_screen(GlossaryScreen())

    def action_report(self) -> None:
        """x on Plan and Chart: the plan as a report to take to a department, Markdown and CSV
        (tui_planner/report.py) and an SVG of the screen as it is now, written to a folder asked for (made if
        missing); says where they went."""
        result = self.ranking
        if result is None or result.state != self.state or result.model is None:
            why = result.error if result is not None and result.state == self.state and result.error else None
            self.notify(fmt.visible(f"No report: {why}" if why else "The plan is still being ranked: x again in "
                                    "a moment", newlines=True), title="Report", severity="warning", timeout=6,
                        markup=False)
            return
        svg = self.export_screenshot()  # the screen now, before the question covers it
        from tui_planner.app.screens.dialogs import AskPath

        def chosen(path: str | None) -> None:
            if path:
                self.write_report(Path(path).expanduser(), result, svg)

        self.push_screen(AskPath("Write the plan as a report (Markdown, CSV and an SVG of this screen) to folder",
                                 str(Path.cwd() / "tui-planner-reports")), chosen)

    def write_report(self, folder: Path, result: Ranking, svg: str, when: dt.datetime | None = None) -> list[Path]:
        """Write `result` as a report in `folder` (made if missing), its files named for the model and the
        time; says where they went, or why not (then returns [])."""
        from tui_planner import report

        when = when or dt.datetime.now()
        db = str(self.store.path) + (f" (with predictions made now for {result.model.id})" if result.store else "")
        try:
            texts = {"md": report.markdown(result.rows, result.state, result.presets, result.model, db, when),
                     "csv": report.options_csv(result.rows, result.model), "svg": svg}
            written = report.write(folder, report.stem(result.model.id, when), texts)
        except (OSError, PlannerError) as e:
            self.notify(fmt.visible(f"Cannot write the report to {folder}: {e}", newlines=True), title="Report",
                        severity="error", timeout=10, markup=False)
            return []
        self.notify(fmt.visible(f"Wrote the plan to {folder.resolve()}: " + ", ".join(p.name for p in written)),
                    title="Report", timeout=12, markup=False)
        return written

    def deliver_screenshot(self, filename: str | None = None, path: str | None = None,
                           time_format: str | None = None) -> str | None:
        """Textual's screenshot (the palette's "Screenshot"): into ~/Downloads, made if missing (Textual's own
        fails without it), or the folder given; says where it went or why not."""
        from platformdirs import user_downloads_path

        folder = Path(path).expanduser() if path else user_downloads_path()
        try:
            folder.mkdir(parents=True, exist_ok=True)
            written = self.save_screenshot(filename, str(folder), time_format)
        except OSError as e:
            self.notify(fmt.visible(f"Cannot save a screenshot in {folder}: {e}", newlines=True),
                        title="Screenshot", severity="error", timeout=10, markup=False)
            return None
        self.notify(fmt.visible(f"Saved a screenshot of this screen to {written}"), title="Screenshot", timeout=10,
                    markup=False)
        return None

    def load_model(self, text: str) -> None:
        """Read a model from a config.json's path or a Hugging Face cache id (offline) in a thread: a model
        the hand-written describer does not know is built on the meta device first (seconds, once: its
        description is cached). The Plan screen then shows it; a config that cannot be read is a message."""
        self.notify(fmt.visible(f"Reading {text}…"), timeout=3, markup=False)
        self.run_worker(lambda: self._load_model(text), thread=True, group="load-model", exit_on_error=False)

    def _load_model(self, text: str) -> None:
        from engine.data.runs import config_path, model_for

        try:
            presets, model = model_for(self.presets, text)
            path = str(config_path(text).resolve())
        except (PlannerError, OSError) as e:
            self.call_from_thread(self.notify, fmt.visible(e, newlines=True), title="Cannot load the model",
                                  severity="error", timeout=10, markup=False)
            return
        self.call_from_thread(self._model_loaded, presets, model.id, path)

    def model_source(self, model_id: str) -> str:
        """What names a model to another process (a sweep's --model): the config.json it was read from (by
        --model or `a`), else its id, which the presets hold."""
        if model_id == self.model_config_id and self.model_config:
            return self.model_config
        return self.config_models.get(model_id, model_id)

    def _model_loaded(self, presets: Presets, model_id: str, path: str) -> None:
        self.presets = presets
        self.config_models[model_id] = path
        self.update_state(model=model_id)  # the Plan screen lists it as it shows the state
        self.notify(fmt.visible(f"{model_id}: {presets.model(model_id).name}"), title="Model loaded", timeout=5,
                    markup=False)

    def action_open_db(self) -> None:
        from tui_planner.app.screens.dialogs import AskPath

        def chosen(path: str | None) -> None:
            if path:
                try:
                    self.open_database(path)
                except PlannerError as e:
                    self.notify(fmt.visible(e, newlines=True), title="Cannot open", severity="error", timeout=8,
                                markup=False)

        from engine.data.paths import is_shipped, shipped_db

        if self.store.path is not None and not is_shipped(Path(self.store.path)):  # o, enter: back to the shipped one
            self.push_screen(AskPath("Open a results database (DuckDB file)", str(shipped_db()),
                                     "enter: back to the shipped database, or type another file · escape cancels"),
                             chosen)
            return
        self.push_screen(AskPath("Open a results database (DuckDB file)", str(self.store.path)), chosen)

    def sweep_running(self) -> bool:
        return self.sweep is not None and self.sweep.worker is not None and self.sweep.worker.is_running

    def stop_sweep(self, now: bool) -> None:
        if self.sweep is not None:
            (self.sweep.stop if now else self.sweep.pause).set()

    async def action_quit(self) -> None:
        if not self.sweep_running():
            self.exit()
            return
        from tui_planner.app.screens.dialogs import Confirm

        def answer(yes: bool | None) -> None:
            if yes:
                self.notify("Stopping the running trial…", title="Quitting")
                self._terminate()

        self.push_screen(Confirm("A benchmark is running. Stop it and quit?\n"
                                 "Finished trials are saved; run it again later to resume.", "Stop and quit"), answer)

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        from tui_planner.app.screens.dialogs import KEY_NAMES

        yield from super().get_system_commands(screen)
        yield SystemCommand("Plan", "What to buy for a budget and a deadline (1)", lambda: self.switch_mode("plan"))
        yield SystemCommand("Chart", "Training days against cost, Pareto frontier (2)", lambda: self.switch_mode("chart"))
        yield SystemCommand("Benchmark", "Measure a model on this machine's GPUs (3)", lambda: self.switch_mode("bench"))
        yield SystemCommand("Results", "Browse and filter every trial (4)", lambda: self.switch_mode("results"))
        yield SystemCommand("Open database", "Browse another results file, or back to the shipped one (o)",
                            self.action_open_db)
        yield SystemCommand("Toggle light/dark", "Switch between the light and dark theme (ctrl+t)",
                            self.action_toggle_theme)
        yield SystemCommand("Help", "Every key on every screen (?)", self.action_help)
        yield SystemCommand("Glossary", "What FL, ckpt, ZeRO, MFU, band, Pareto… mean, and why they matter (? then g)",
                            self.action_glossary)
        for binding in getattr(screen, "BINDINGS", []):
            if isinstance(binding, Binding) and binding.description:
                action = binding.action

                def run(action: str = action, screen: Screen = screen) -> None:
                    self.call_later(screen.run_action, action)

                # One voice: the screen, then what the key does in words (the footer's short label is for
                # the footer), and the key to press.
                what = binding.tooltip or binding.description
                keys = binding.key_display or ", ".join(KEY_NAMES.get(k, k) for k in binding.key.split(","))
                yield SystemCommand(f"{type(screen).__name__.removesuffix('Screen')}: {what[:1].upper()}{what[1:]}",
                                    f"key {keys}", run)
