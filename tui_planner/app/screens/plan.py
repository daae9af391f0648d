"""Plan: pick a model, budget, deadline and GPUs; the ranking beside it follows every change."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Footer, Header, Input, Label, Select, SelectionList, Static

from engine.data.errors import PlannerError
from tui_planner import format as fmt
from tui_planner.app import state as st
from tui_planner.app.screens.common import WHAT_IF_BINDINGS, WhatIfScreen
from tui_planner.app.text import content


SOURCE_SHORT = {"measured": "meas", "predicted": "pred", "paper-table1": "T1", "paper-table4": "T4"}


def option_mark(r: dict) -> str:
    return ("*" if r["pareto"] else " ") + ("" if r["within_budget"] else "$") + ("" if r["within_deadline"] else "d")


class PlanScreen(WhatIfScreen):
    BINDINGS = [
        *WHAT_IF_BINDINGS,
        Binding("g", "focus_gpus", "GPUs", show=False, tooltip="choose GPU types (space toggles)"),
        Binding("e", "edit", "Edit", show=False, tooltip="type the budget, deadline, prices…"),
        Binding("escape", "focus_table", "Table", show=False),
        Binding("enter", "details", "Details", show=False, tooltip="the result behind the highlighted option"),
    ]

    def compose(self) -> ComposeResult:
        presets = self.app.presets
        yield Header()
        with Horizontal():
            with Vertical(id="form"):
                with Horizontal(classes="field"):
                    yield Label("Model", classes="name")
                    yield Select([(fmt.text(m), m) for m in presets.models], allow_blank=False, compact=True, id="model",
                                 value=self.app.initial.model)
                for key, label, tip in (("budget", "Budget $", "e.g. 50000, 50k"),
                                        ("deadline", "Deadline d", "days; empty: none"),
                                        ("lifespan", "Lifespan y", "years to amortise"),
                                        ("kwh", "$/kWh", "empty: no energy cost"),
                                        ("prices", "Prices", "h100=25000 …")):
                    with Horizontal(classes="field"):
                        yield Label(label, classes="name")
                        yield Input(placeholder=tip, compact=True, id=key, select_on_focus=True)
                yield Label("", id="sources")
                yield Label("GPUs [dim](g, space)[/]")
                yield SelectionList(*[(fmt.text(f"{g.id:<8} {fmt.usd(g.price.usd) if g.price else 'no price'}"), g.id, True)
                                      for g in presets.gpus.values()], compact=True, id="gpus")
            with Vertical(id="right"):
                yield Static("", id="title")
                yield DataTable(id="ranking", cursor_type="row", zebra_stripes=False)
                yield Static("", id="verdict")
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        t = self.query_one("#ranking", DataTable)
        # Fixed widths: auto widths computed while rows arrive from a worker were sometimes left at the
        # labels' widths (seen in a real terminal), cutting "8 x a6000" to "8 x".
        for label, key, width in (("", "mark", 2), ("GPUs", "gpus", 11), ("cost", "hw", 8), ("days", "days", 7),
                                  ("MFU", "mfu", 5), ("from", "source", 4)):
            t.add_column(label, key=key, width=width)
        self.watch(self.app, "ranking", self.show_ranking)
        self.watch(self.app, "state", self.show_state)
        t.focus()

    # --- state -> widgets --------------------------------------------------------------------------

    def show_state(self, s: st.PlanState | None) -> None:
        if s is None:
            return
        values = {"budget": f"{s.budget_usd:.0f}", "deadline": "" if s.deadline_days is None else f"{s.deadline_days:g}",
                  "lifespan": f"{s.lifespan_years:g}", "kwh": "" if s.kwh_price_usd is None else f"{s.kwh_price_usd:g}",
                  "prices": " ".join(f"{g}={usd:.0f}" for g, usd in s.price_overrides)}
        for key, text in values.items():
            box = self.query_one(f"#{key}", Input)
            if not box.has_focus:
                try:
                    current = self._parse(key, box.value)
                except PlannerError:
                    current = None
                if current != self._parse(key, text):
                    with box.prevent(Input.Changed):  # only a person's typing changes the plan
                        box.value = text
        model = self.query_one("#model", Select)
        if model.value != s.model:
            with model.prevent(Select.Changed):
                model.value = s.model
        self.query_one("#sources", Label).update(f"Sources [b]{st.sources_label(s.sources)}[/] [dim](s)[/]")

    def _parse(self, key: str, text: str):
        if key == "budget":
            return st.parse_money(text, "budget")
        if key == "deadline":
            return st.parse_optional(text, "deadline", "days")
        if key == "lifespan":
            return st.parse_years(text, "lifespan")
        if key == "kwh":
            return st.parse_optional(text, "electricity price", "USD/kWh")
        return st.parse_prices(text, list(self.app.presets.gpus))

    def show_ranking(self, result) -> None:
        if result is None:
            return
        s = result.state
        title = self.query_one("#title", Static)
        title.update(content(f"[b]{fmt.esc(s.model)}[/b] {fmt.usd(s.budget_usd)}"
                             + (f", {s.deadline_days:g} d" if s.deadline_days else ", no deadline")
                             + "  [dim]* Pareto $ over d late[/]"))
        t = self.query_one("#ranking", DataTable)
        t.clear()
        verdict = self.query_one("#verdict", Static)
        if result.error:
            verdict.update(content(f"[b red]{fmt.esc(result.error, newlines=True)}[/]"))
            return
        for i, r in enumerate(result.rows):
            has = r["days"] is not None
            style = "" if r["within_budget"] and has else "dim"
            if i == 0 and r["within_budget"] and r["within_deadline"]:
                style = "bold green"
            cells = [option_mark(r), f"{r['num_gpus']} x {r['gpu']}", fmt.usd(r["hardware_cost_usd"]),
                     fmt.days(r["days"]) if has else r["status"],
                     fmt.mfu(r["mfu"], r["plausibility"]) if has else "—",
                     SOURCE_SHORT.get(r["source"], r["source"] or "—")]
            t.add_row(*[fmt.cell(f"[{style}]{fmt.esc(c)}[/]" if style else fmt.esc(c)) for c in cells],
                      key=f"{r['gpu']}:{r['num_gpus']}")
        lines = st.verdict(list(result.rows), s)
        if result.missing:
            lines.append(f"[dim]No data: {fmt.esc(', '.join(result.missing))}[/]")
        verdict.update(content("\n".join(lines)))

    # --- widgets -> state --------------------------------------------------------------------------

    @on(Select.Changed, "#model")
    def _model(self, event: Select.Changed) -> None:
        if isinstance(event.value, str) and self.app.state and event.value != self.app.state.model:
            self.app.update_state(model=event.value)

    @on(Input.Changed)
    def _typed(self, event: Input.Changed) -> None:
        key = event.input.id
        try:
            value = self._parse(key, event.value)
        except PlannerError as e:
            event.input.add_class("-bad")
            self.query_one("#verdict", Static).update(content(f"[b red]{fmt.esc(e)}[/]"))  # e holds what was typed
            return
        event.input.remove_class("-bad")
        field = {"budget": "budget_usd", "deadline": "deadline_days", "lifespan": "lifespan_years",
                 "kwh": "kwh_price_usd", "prices": "price_overrides"}[key]
        if self.app.state and getattr(self.app.state, field) != value:
            self.app.update_state(**{field: value})

    @on(Input.Submitted)
    def _submitted(self) -> None:
        self.query_one("#ranking", DataTable).focus()

    @on(SelectionList.SelectedChanged, "#gpus")
    def _gpus(self, event: SelectionList.SelectedChanged) -> None:
        chosen = tuple(event.selection_list.selected)
        if not chosen:
            self.query_one("#verdict", Static).update("[b red]Choose at least one GPU type (space toggles).[/]")
            return
        allowed = () if len(chosen) == len(self.app.presets.gpus) else tuple(sorted(chosen))
        if self.app.state and self.app.state.gpus_allowed != allowed:
            self.app.update_state(gpus_allowed=allowed)

    # --- actions -----------------------------------------------------------------------------------

    def action_focus_gpus(self) -> None:
        self.query_one("#gpus", SelectionList).focus()

    def action_edit(self) -> None:
        self.query_one("#budget", Input).focus()

    def action_focus_table(self) -> None:
        self.query_one("#ranking", DataTable).focus()

    @on(DataTable.RowSelected, "#ranking")
    def _selected(self) -> None:
        self.action_details()

    def action_details(self) -> None:
        result = self.app.ranking
        t = self.query_one("#ranking", DataTable)
        if not result or not result.rows or t.cursor_row is None or t.cursor_row >= len(result.rows):
            return
        row = result.rows[t.cursor_row]
        if row.get("trial_id"):
            from tui_planner.app.screens.dialogs import TrialDetail

            self.app.push_screen(TrialDetail(row["trial_id"]))
