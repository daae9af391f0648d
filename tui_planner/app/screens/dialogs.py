"""Modal screens: help (every key on every screen), a yes/no question, a path prompt, a trial's details."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Collapsible, Input, Label, Static

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
    "never ranked on, except in the paper's own view; [b]^[/b] a prediction capped at that line, not an "
    "estimate). A key means one thing on every screen: [b]f[/b] filters, [b]s[/b] sorts, [b]r[/b] runs, "
    "[b]p[/b] pauses, [b]x[/b] exports. Options are GPUs in systems that are sold to hold "
    "them; each price is dated ([b]°[/b]: older than 12 months, [b]$[/b] lists them). A [b]†[/b] marks a time measured with a dense causal mask (the engine "
    "before its 2026-11-23 fix: today's is faster). [b]ctrl+p[/b] opens the command palette: every action, by name.\n"
)


KEY_NAMES = {"right_square_bracket": "]", "left_square_bracket": "[", "full_stop": ".", "comma": ",",
             "question_mark": "?", "dollar_sign": "$"}


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


def glossary_markup() -> str:
    """Every term the screens print, in a PI's words (tui_planner/glossary.py), as markup."""
    from tui_planner import glossary

    lines = ["[b]Glossary[/b]: the words and marks on these screens, what each means and why it matters.", ""]
    for title, terms in glossary.GROUPS:
        lines.append(f"[b u]{fmt.esc(title)}[/]")
        for t in terms:
            lines.append(f"  [b]{fmt.esc(t.term)}[/b] [i]{fmt.esc(t.name)}[/i]: {fmt.esc(t.means)}")
            lines.append(f"    [dim]why it matters:[/] {fmt.esc(t.why)}")
        lines.append("")
    return "\n".join(lines)


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark,f1", "dismiss", "Close"),
                Binding("g", "glossary", "Glossary", tooltip="what FL, ckpt, ZeRO, MFU, band, Pareto... mean")]

    def compose(self) -> ComposeResult:
        lines = [HELP_INTRO, "[b reverse] g [/] [b]the glossary[/b]: what FL, ckpt, ZeRO, FSDP, offload, MFU, band, "
                 "T1/T4, Pareto, $/run and every other abbreviation mean, and why they matter."]
        current = None
        for title, keys, what in binding_rows():  # a key may be "[" itself: escaped like any value, padded after
            if title != current:
                lines.append(f"\n[b u]{fmt.esc(title)}[/]")
                current = title
            lines.append(f"  [b]{fmt.esc(keys)}[/]{' ' * max(1, 11 - len(keys))}{fmt.esc(what)}")
        with VerticalScroll(id="help"):
            yield Static(content("\n".join(lines)))
            yield Label("[dim]g glossary · escape closes[/]")

    def on_mount(self) -> None:
        self.query_one("#help", VerticalScroll).focus()

    def action_glossary(self) -> None:
        self.app.push_screen(GlossaryScreen())


class GlossaryScreen(ModalScreen[None]):
    """The glossary (tui_planner/glossary.py): every abbreviation and mark the screens print."""

    BINDINGS = [Binding("escape,q,g", "dismiss", "Close")]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help"):
            yield Static(content(glossary_markup()), id="glossary")
            yield Label("[dim]↑/↓ pgup/pgdn scroll · escape closes[/]")

    def on_mount(self) -> None:
        self.query_one("#help", VerticalScroll).focus()


class PricesScreen(ModalScreen[None]):
    """Every price the planner uses, with its date and source; a stale one (older than 12 months) marked,
    and how to give today's."""

    BINDINGS = [Binding("escape,q,dollar_sign", "dismiss", "Close")]

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

    def __init__(self, title: str, value: str = "", hint: str = "enter opens, escape cancels",
                 suggester: Any = None) -> None:
        super().__init__()
        self.title_text, self.value, self.hint, self.suggester = title, value, hint, suggester

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self.title_text)
            yield Input(self.value, id="path", suggester=self.suggester)
            yield Label(content(f"[dim]{fmt.esc(self.hint)}[/]"), id="path-hint")

    def on_mount(self) -> None:
        self.query_one("#path", Input).focus()

    @on(Input.Submitted)
    def _done(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip() or None)


class TrialDetail(ModalScreen[None]):
    """A trial, read from `store` (the app's database when None: the Plan screen passes the store it ranked
    on, which holds predictions made for a run); its training settings are built and exported for the model
    in `presets` (the app's when None: the Plan screen passes the presets with the model on its run, so
    plan.json's steps and days are that run's). It reads top-down: what it is, its result, how it was
    derived, its settings, what next; the raw record last, folded."""

    BINDINGS = [Binding("escape,q", "dismiss", "Close"), Binding("x", "export", "Export settings")]

    def __init__(self, trial_id: str, store: Any = None, presets: Any = None) -> None:
        super().__init__()
        self.trial_id = trial_id
        self.row: dict[str, Any] | None = None
        self.export_error: str | None = None  # why x cannot export this row (known before anything is asked)
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
            with Collapsible(title="Raw record (every stored field; enter unfolds)", id="detail-raw"):
                yield Static("", id="detail-raw-body")
            yield Label("[dim]x export settings · tab, enter: raw record · escape closes[/]")

    def on_mount(self) -> None:
        self.query_one("#detail", VerticalScroll).focus()
        self.load()

    @work(thread=True, exclusive=True, exit_on_error=False)
    def load(self) -> None:
        cur = self.store.cursor()
        try:
            rows = cur.query("SELECT * FROM trials WHERE trial_id = ?", [self.trial_id])
            settings, error = recipe_preview(cur, self.presets, self.trial_id, with_error=True) if rows else ("", None)
        finally:
            cur.close()
        self.app.call_from_thread(self._show, rows[0] if rows else None, settings, error)

    def _show(self, row: dict[str, Any] | None, settings: str, error: str | None = None) -> None:
        from tui_planner.app import details

        self.row, self.export_error = row, error
        body = self.query_one("#detail-body", Static)
        body.update(content(details.detail_text(row, self.presets, error) if row else
                            f"trial {fmt.esc(self.trial_id)} is not in "
                            f"{fmt.esc(self.store.path or 'the predictions made for this run')}"))
        self.query_one("#detail-recipe", Static).update(content(settings))
        self.query_one("#detail-raw-body", Static).update(content(details.raw_text(row) if row else ""))

    def action_export(self) -> None:
        if not self.row:
            self.app.notify("the trial is still loading", timeout=3)
            return
        if self.export_error is not None:  # say why before asking for anything
            from tui_planner.app import details

            src = self.row.get("source") or ""
            hint = ("" if src == "measured" and self.row.get("failure_kind") is None else
                    f" Measure it first: {details.bench_command(self.row)}")
            self.app.notify(fmt.visible(f"Cannot export this row: {self.export_error}.{hint}", newlines=True),
                            title="Not exported", severity="warning", timeout=12, markup=False)
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


class OptionDetail(ModalScreen[None]):
    """A ranking option with no trial behind it (refused, infeasible, implausible only, no system sold):
    what it is and why it is not ranked."""

    BINDINGS = [Binding("escape,q", "dismiss", "Close")]

    def __init__(self, row: dict[str, Any]) -> None:
        super().__init__()
        self.row = row

    def compose(self) -> ComposeResult:
        from tui_planner.app import details

        with VerticalScroll(id="detail"):
            yield Static(content(details.option_text(self.row)), id="detail-body")
            yield Label("[dim]escape closes[/]")


def option_detail(row: dict[str, Any], store: Any = None, presets: Any = None) -> ModalScreen:
    """The details of a ranking row (the Plan screen's or the Chart's): its trial where it has one, else
    why it is not ranked. Every row opens something."""
    if row.get("trial_id"):
        return TrialDetail(row["trial_id"], store=store, presets=presets)
    return OptionDetail(row)


def recipe_preview(store, presets, trial_id: str, with_error: bool = False):
    """The training settings `tui-planner export` would write for this trial, or why there are none (rich
    markup, values escaped); with_error: (that, why export cannot build them or None)."""
    text, error = _recipe_preview(store, presets, trial_id)
    return (text, error) if with_error else text


def _recipe_preview(store, presets, trial_id: str) -> tuple[str, str | None]:
    from engine.data.errors import PlannerError
    from engine.recipe import export as recipe

    escape = fmt.esc

    try:
        r = recipe.build(recipe.pick(store, presets, None, None, None, trial_id=trial_id), presets, store.path)
    except PlannerError as e:
        return f"\n[b]Training settings[/b]\n  [dim]{escape(str(e))}[/]", str(e)
    except Exception as e:  # noqa: BLE001 - a row the export cannot read (a shared file): say so, show the trial
        why = f"cannot be built from this row ({type(e).__name__}: {e})"
        return f"\n[b]Training settings[/b]\n  [dim]{escape(why)}[/]", why
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
    return "\n".join(lines), None


class CellFindings(ModalScreen[None]):
    """What the measured search of one cell found: the same tables as `tui-planner results --summary`."""

    BINDINGS = [Binding("escape,q", "dismiss", "Close")]

    def __init__(self, model: str, gpu: str, num_gpus: int) -> None:
        super().__init__()
        self.cell = (model, gpu, num_gpus)

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="detail"):
            yield Static("loading…", id="findings-body")
            yield Static("[dim]the paper's pick: Table 1 days with Appendix J settings · escape closes[/]",
                         id="findings-foot")

    def on_mount(self) -> None:
        self.load()

    @work(thread=True, exclusive=True, exit_on_error=False)
    def load(self) -> None:
        from engine.plan.findings import findings

        from engine.plan.scaling import link_costs, scaling

        model, gpu, n = self.cell
        cur = self.app.store.cursor()
        try:
            cells = findings(cur, self.app.presets, model=model, gpu=gpu, num_gpus=n)
            # the model's scaling on this GPU type, and what other links cost at this count
            scales = scaling(cur, model=model, gpu=gpu)
            links = [c for c in link_costs(cur, model=model, gpu=gpu) if c.num_gpus == n]
        except Exception as e:  # noqa: BLE001 - a database error or a bug: say it, keep the app
            self.app.call_from_thread(self.query_one("#findings-body", Static).update,
                                      content(f"[red]{fmt.esc(e, newlines=True)}[/]"))
            return
        finally:
            cur.close()
        self.app.call_from_thread(self._show, cells, scales, links)

    def _show(self, cells: list, scales: list = (), links: list = ()) -> None:
        from rich.console import Group

        from tui_planner.views import findings_renderables, multi_gpu_renderables

        model, gpu, n = self.cell
        body = self.query_one("#findings-body", Static)
        if not cells:
            body.update(content(f"[b]{fmt.esc(model)} on {n} x {fmt.esc(gpu)}[/b]\n\nno measured search here: its "
                                "rows come from the paper or a prediction. Measure it on the Bench screen (3)."))
            return
        body.update(Group(*findings_renderables(cells), *multi_gpu_renderables(scales, links)))
