"""Modal screens: help (every key on every screen), a yes/no question, a path prompt, a trial's details."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static

from tui_planner import format as fmt
from tui_planner.app.text import content

SCREENS = (
    ("Everywhere", "tui_planner.app.app", "PlannerApp"),
    ("Plan (1)", "tui_planner.app.screens.plan", "PlanScreen"),
    ("Chart (2)", "tui_planner.app.screens.chart", "ChartScreen"),
    ("Benchmark (3)", "tui_planner.app.screens.bench", "BenchScreen"),
    ("Results (4)", "tui_planner.app.screens.results", "ResultsScreen"),
)

HELP_INTRO = (
    "[b]tui-planner[/b]: how long pre-training takes on which GPUs, with which settings, and what to buy. "
    "Numbers come from the current database: [b]measured[/b] (synchronized timings), [b]predicted[/b] (with "
    "its low-high band), or the [b]paper[/b]'s tables (T1, T4; MFU marked [b]![/b] above its generation's "
    "plausible line, [b]!![/b] above 100%: its timer did not synchronize; an implausible one is shown beside, "
    "never ranked on, except in the paper's own view). Options are GPUs in systems that are sold to hold "
    "them; each price is dated ([b]°[/b]: older than 12 months, [b]p[/b] lists them). A [b]†[/b] marks a time measured with a dense causal mask (the engine "
    "before its 2026-11-23 fix: today's is faster). [b]ctrl+p[/b] opens the command palette: every action, by name.\n"
)


KEY_NAMES = {"right_square_bracket": "]", "left_square_bracket": "[", "full_stop": ".", "comma": ",",
             "question_mark": "?"}


def binding_rows() -> list[tuple[str, str, str]]:
    """(screen, keys, what) for every binding, read from the classes so the help is never stale."""
    import importlib

    out = []
    for title, module, cls in SCREENS:
        klass = getattr(importlib.import_module(module), cls)
        for b in klass.BINDINGS:
            if isinstance(b, tuple):
                continue
            keys = ", ".join(KEY_NAMES.get(k, k) for k in b.key.split(","))
            out.append((title, keys, b.tooltip or b.description))
    return out


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark,f1", "dismiss", "Close")]

    def compose(self) -> ComposeResult:
        lines = [HELP_INTRO]
        current = None
        for title, keys, what in binding_rows():  # a key may be "[" itself: escaped like any value
            if title != current:
                lines.append(f"\n[b u]{fmt.esc(title)}[/]")
                current = title
            lines.append(f"  [b]{fmt.esc(f'{keys:<10}')}[/] {fmt.esc(what)}")
        with VerticalScroll(id="help"):
            yield Static(content("\n".join(lines)))
            yield Label("[dim]escape closes[/]")


class PricesScreen(ModalScreen[None]):
    """Every price the planner uses, with its date and source; a stale one (older than 12 months) marked,
    and how to give today's."""

    BINDINGS = [Binding("escape,q,p", "dismiss", "Close")]

    def __init__(self, today: Any = None) -> None:
        super().__init__()
        self.today = today

    def compose(self) -> ComposeResult:
        import datetime as dt

        from engine.data.presets import is_stale

        presets = self.app.presets
        today = self.today or dt.date.today()
        e = fmt.esc

        def line(what: str, usd: str, when: Any, source: str) -> str:
            stale = f" [yellow]{fmt.STALE_MARK} stale[/]" if when is not None and is_stale(when, today) else ""
            return f"  [b]{e(what)}[/b] {usd}, {fmt.date(when)}{stale}: [dim]{e(source)}[/]"

        lines = ["[b]Prices[/b], each with its date and source. One older than 12 months is stale "
                 f"({fmt.STALE_MARK} in the ranking): give today's in the Prices field (e: [b]h100=25000 "
                 "ws4=14000[/b]), with [b]rank --price ID=USD[/b], or in a presets file "
                 f"([b]{e('[gpus.ID.price]')}[/b], [b]{e('[systems.ID.price]')}[/b] in "
                 "~/.config/tui-planner/presets/).",
                 "", "[b u]GPUs[/] (per GPU)"]
        lines += [line(g.id, fmt.usd(g.price.usd), g.price.date, g.price.source)
                  for g in presets.gpus.values() if g.price]
        lines += ["", "[b u]Systems[/] (without their GPUs; an HGX server: its quoted price less its GPUs)"]
        lines += [line(f"{sy.id} {sy.name}", fmt.usd(sy.price.usd), sy.price.date, sy.price.source)
                  for sy in presets.systems.values()]
        if presets.electricity is not None:
            el = presets.electricity
            lines += ["", "[b u]Electricity[/] (the $/kWh field overrides it; 0: no energy cost)",
                      line("default", f"${el.usd_per_kwh:g}/kWh", el.date, el.source)]
        if presets.cloud:
            lines += ["", "[b u]Cloud[/] (on demand; the cheapest per GPU is what renting costs)"]
            lines += [line(f"{c.gpu} {c.provider}", f"${c.usd_per_gpu_hour:.2f}/GPU-h", c.date, c.source)
                      for c in presets.cloud]
        with VerticalScroll(id="price-list"):
            yield Static(content("\n".join(lines)))
            yield Label("[dim]escape closes[/]")


class Confirm(ModalScreen[bool]):
    BINDINGS = [Binding("escape,n", "dismiss(False)", "No"), Binding("y", "dismiss(True)", "Yes")]

    def __init__(self, question: str, yes: str = "Yes") -> None:
        super().__init__()
        self.question, self.yes = question, yes

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(self.question)
            with Horizontal(classes="buttons"):
                yield Button(f"{self.yes} (y)", variant="error", id="yes")
                yield Button("Cancel (n)", id="no")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")


class AskPath(ModalScreen[str | None]):
    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel")]

    def __init__(self, title: str, value: str = "") -> None:
        super().__init__()
        self.title_text, self.value = title, value

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self.title_text)
            yield Input(self.value, id="path")
            yield Label("[dim]enter opens, escape cancels[/]")

    def on_mount(self) -> None:
        self.query_one("#path", Input).focus()

    @on(Input.Submitted)
    def _done(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip() or None)


DETAIL_FIELDS = (
    ("model", "model"), ("gpu", "GPU"), ("num_gpus", "GPUs"), ("num_nodes", "nodes"), ("source", "source"),
    ("training_run", "run (batch x seq, prec., opt.)"), ("steps", "steps (its days are for)"),
    ("days", "training days"), ("step_s", "step (s)"), ("pass_s", "pass (s)"), ("pass_spread_s", "pass spread (s)"),
    ("update_s", "update (s)"), ("micro_batch", "micro-batch"), ("grad_accum", "accumulation"),
    ("samples_per_s", "samples/s"), ("tokens_per_s", "tokens/s"), ("analytic_days", "analytic days (100% MFU)"),
    ("peak_memory_gb", "peak memory (GB)"), ("attention", "attention"), ("kernel", "kernel that ran"),
    ("compile", "torch.compile"), ("tf32", "TF32"), ("activation_checkpointing", "checkpointing"),
    ("sharding", "sharding"), ("offloading", "offloading"), ("warmup_s", "warm-up (s, excluded)"),
    ("compile_s", "compile (s, excluded)"), ("repetitions", "timed repetitions"), ("duration_s", "trial wall (s)"),
    ("failure_kind", "outcome"), ("failure_message", "why"), ("config_source", "settings from"),
    ("trial_id", "trial id"), ("run_id", "run id"),
)


def detail_text(row: dict[str, Any]) -> str:
    """A trial as rich markup, every value from the database in it escaped (shown through content())."""
    e = fmt.esc
    flag = row.get("plausibility")
    lines = [f"[b]{e(row['model'])} on {row['num_gpus']} x {e(row['gpu'])}[/b] — {e(fmt.methods(row))}",
             f"MFU [b]{fmt.mfu(row.get('mfu'), flag)}[/b]"
             + (f"  [red]{flag}: above {'100' if flag == 'impossible' else '60'}% of the GPU's dense 16-bit peak[/]"
                if flag in fmt.FLAG_MARK else ""), ""]
    if fmt.dense_mask(row) and row.get("days") is not None:
        lines[-1:-1] = ["[yellow]† compiled causal attention got a dense mask here (engine before its 2026-11-23 "
                        "fix): today's engine is faster[/]"]
    for key, name in DETAIL_FIELDS:
        value = row.get(key)
        if value is None or key in ("model", "gpu"):
            continue
        if isinstance(value, float):
            value = f"{value:.4g}"
        lines.append(f"  {name:<26} {e(value, newlines=True)}")
    prov = row.get("provenance")
    if prov:
        try:
            prov = json.dumps(json.loads(prov), indent=2)
        except (TypeError, ValueError):
            pass
        lines += ["", "[b]Provenance[/b]", e(prov, newlines=True)]
    return "\n".join(lines)


class TrialDetail(ModalScreen[None]):
    """A trial, read from `store` (the app's database when None: the Plan screen passes the store it ranked
    on, which holds predictions made for a run); its training settings are built and exported for the model
    in `presets` (the app's when None: the Plan screen passes the presets with the model on its run, so
    plan.json's steps and days are that run's)."""

    BINDINGS = [Binding("escape,q", "dismiss", "Close"), Binding("x", "export", "Export settings")]

    def __init__(self, trial_id: str, store: Any = None, presets: Any = None) -> None:
        super().__init__()
        self.trial_id = trial_id
        self.row: dict[str, Any] | None = None
        self._store, self._presets = store, presets

    @property
    def store(self) -> Any:
        return self._store if self._store is not None else self.app.store

    @property
    def presets(self) -> Any:
        return self._presets if self._presets is not None else self.app.presets

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="detail"):
            yield Static("loading…", id="detail-body")
            yield Static("", id="detail-recipe")
            yield Label("[dim]x exports ready-to-run training settings · escape closes[/]")

    def on_mount(self) -> None:
        self.load()

    @work(thread=True, exclusive=True, exit_on_error=False)
    def load(self) -> None:
        cur = self.store.cursor()
        try:
            rows = cur.query("SELECT * FROM trials WHERE trial_id = ?", [self.trial_id])
            settings = recipe_preview(cur, self.presets, self.trial_id) if rows else ""
        finally:
            cur.close()
        self.app.call_from_thread(self._show, rows[0] if rows else None, settings)

    def _show(self, row: dict[str, Any] | None, settings: str) -> None:
        self.row = row
        body = self.query_one("#detail-body", Static)
        body.update(content(detail_text(row) if row else
                            f"trial {fmt.esc(self.trial_id)} is not in "
                            f"{fmt.esc(self.store.path or 'the predictions made for this run')}"))
        self.query_one("#detail-recipe", Static).update(content(settings))

    def action_export(self) -> None:
        if not self.row:
            return

        def chosen(path: str | None) -> None:
            if path:
                self.export_to(path)

        # A folder name from the row's model and GPU: a shared file's names may hold slashes or worse.
        name = re.sub(r"[^A-Za-z0-9._+-]", "_", f"{self.row['model']}-{self.row['num_gpus']}x{self.row['gpu']}")
        default = f"./{name}-settings"
        self.app.push_screen(AskPath("Export training settings to folder", default), chosen)

    @work(thread=True, exit_on_error=False)
    def export_to(self, path: str) -> None:
        from engine.recipe import export as recipe

        cur = self.store.cursor()
        try:
            choice = recipe.pick(cur, self.presets, None, None, None, trial_id=self.trial_id)
            written = recipe.write(recipe.build(choice, self.presets, self.store.path), Path(path))
        except Exception as e:  # noqa: BLE001 - PlannerError, OSError, or a bug: say it, keep the app
            self.app.call_from_thread(self.app.notify, fmt.visible(e, newlines=True), title="Export failed",
                                      severity="error", timeout=10, markup=False)
            return
        finally:
            cur.close()
        self.app.call_from_thread(self.app.notify, fmt.visible(f"Wrote {', '.join(p.name for p in written)} to "
                                                               f"{path}. Check them with: tui-planner verify "
                                                               f"{shlex.quote(path)}"),
                                  title="Exported", timeout=10, markup=False)


def recipe_preview(store, presets, trial_id: str) -> str:
    """The training settings `tui-planner export` would write for this trial, or why there are none (rich
    markup, values escaped)."""
    from engine.data.errors import PlannerError
    from engine.recipe import export as recipe

    escape = fmt.esc

    try:
        r = recipe.build(recipe.pick(store, presets, None, None, None, trial_id=trial_id), presets, store.path)
    except PlannerError as e:
        return f"\n[b]Training settings[/b]\n  [dim]{escape(str(e))}[/]"
    except Exception as e:  # noqa: BLE001 - a row the export cannot read (a shared file): say so, show the trial
        return f"\n[b]Training settings[/b]\n  [dim]cannot be built from this row ({escape(type(e).__name__)}: {escape(e)})[/]"
    keys = ("per_device_train_batch_size", "gradient_accumulation_steps", "max_steps", "learning_rate",
            "lr_scheduler_type", "bf16", "fp16", "tf32", "torch_compile", "gradient_checkpointing", "optim", "fsdp")
    lines = ["", "[b]Training settings[/b] [dim](x writes them: TrainingArguments, DeepSpeed/FSDP, launch.sh)[/]",
             f"  {'run':<28} {escape(r.plan.get('run', ''))}"]
    if r.plan.get("days") is not None:
        lines.append(f"  {'days on this run':<28} {fmt.days(r.plan['days'])}")
    lines += [f"  {k:<28} {escape(str(r.training_args[k]))}" for k in keys
              if r.training_args.get(k) not in (None, "", [], False)]
    if r.deepspeed:
        zero = r.deepspeed.get("zero_optimization", {})
        lines.append(f"  {'deepspeed':<28} ZeRO stage {escape(zero.get('stage'))}"
                     + (", offload" if zero.get("offload_optimizer") else ""))
    lines += [f"  [dim]{escape(n)}[/]" for n in r.notes]
    return "\n".join(lines)


class CellFindings(ModalScreen[None]):
    """What the measured search of one cell found: the same tables as `tui-planner results --summary`."""

    BINDINGS = [Binding("escape,q", "dismiss", "Close")]

    def __init__(self, model: str, gpu: str, num_gpus: int) -> None:
        super().__init__()
        self.cell = (model, gpu, num_gpus)

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="detail"):
            yield Static("loading…", id="findings-body")
            yield Label("[dim]the paper's pick: Table 1 days with Appendix J settings · escape closes[/]")

    def on_mount(self) -> None:
        self.load()

    @work(thread=True, exclusive=True, exit_on_error=False)
    def load(self) -> None:
        from engine.plan.findings import findings

        model, gpu, n = self.cell
        cur = self.app.store.cursor()
        try:
            cells = findings(cur, self.app.presets, model=model, gpu=gpu, num_gpus=n)
        except Exception as e:  # noqa: BLE001 - a database error or a bug: say it, keep the app
            self.app.call_from_thread(self.query_one("#findings-body", Static).update,
                                      content(f"[red]{fmt.esc(e, newlines=True)}[/]"))
            return
        finally:
            cur.close()
        self.app.call_from_thread(self._show, cells)

    def _show(self, cells: list) -> None:
        from rich.console import Group

        from tui_planner.views import findings_renderables

        model, gpu, n = self.cell
        body = self.query_one("#findings-body", Static)
        if not cells:
            body.update(content(f"[b]{fmt.esc(model)} on {n} x {fmt.esc(gpu)}[/b]\n\nno measured search here: its "
                                "rows come from the paper or a prediction. Measure it on the Bench screen (3)."))
            return
        body.update(Group(*findings_renderables(cells)))
