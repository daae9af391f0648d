"""Chart: training days against hardware cost (or cost per experiment), Pareto frontier highlighted and
labelled with the verdict's pick, the budget and the deadline drawn as lines that move with the what-if keys;
the title says which run the days are for, the legend names what is drawn (only that), and enter opens the
selected point's details (the Results screen's dialog)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.reactive import reactive
from textual.widget import Widget
from textual.widgets import Footer, Header, Static

from tui_planner import format as fmt
from tui_planner.app import chart
from tui_planner.app import state as st
from tui_planner.app.screens.common import WHAT_IF_BINDINGS, WhatIfScreen
from tui_planner.app.text import content


class ScatterChart(Widget, can_focus=True):
    points: reactive[tuple[chart.Point, ...]] = reactive(())
    budget: reactive[float | None] = reactive(None)
    deadline: reactive[float | None] = reactive(None)
    selected: reactive[int | None] = reactive(None)
    x_title: reactive[str] = reactive("hardware cost")

    def render(self):
        return chart.render(list(self.points), self.size.width, self.size.height, self.budget, self.deadline,
                            self.selected, self.x_title)


class ChartScreen(WhatIfScreen):
    BINDINGS = [
        *WHAT_IF_BINDINGS,
        # The arrows only: k and l mean stop and log on the Benchmark screen.
        Binding("left", "select(-1)", "◀", show=False, tooltip="previous point (cheaper)"),
        Binding("right", "select(1)", "▶", show=False, tooltip="next point (dearer)"),
        Binding("up", "select_pareto(1)", "▲", show=False, tooltip="next Pareto point (faster)"),
        Binding("down", "select_pareto(-1)", "▼", show=False, tooltip="previous Pareto point (cheaper)"),
        Binding("enter", "details", "Details", show=False, tooltip="the selected point's details"),
        # Out of the footer, which it would push "q Quit" off at 80 columns; the title line names it.
        Binding("c", "axis", "Axis", show=False, tooltip="x axis: hardware cost or cost per experiment"),
    ]

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("", id="chart-title")
        yield Static("", id="chart-run")
        yield ScatterChart(id="chart")
        yield Static("", id="chart-legend")
        yield Static("", id="chart-info")
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        self.rows: list[dict] = []
        self.front: list[bool] = []  # each row on the frontier of the cost plotted
        self.watch(self.app, "ranking", self.show)
        for box in ("#chart-title", "#chart-legend", "#chart-info"):  # a line each where they fit, two where they do not
            self.query_one(box, Static).styles.height = "auto"
            self.query_one(box, Static).styles.padding = (0, 1)
        self.query_one(ScatterChart).focus()

    def show(self, result=None) -> None:
        result = result or self.app.ranking
        if result is None:
            return
        s = result.state
        per_run = s.x_axis == "experiment"
        key = "cost_per_experiment_usd" if per_run else "hardware_cost_usd"
        self.rows = sorted((r for r in result.rows if r["days"] is not None and r["system"] is not None and r[key]),
                           key=lambda r: r[key])
        c = self.query_one(ScatterChart)
        from engine.plan.verdict import decide

        buy = decide(list(result.rows), s.deadline_days).buy if result.rows else None
        # The frontier on the cost plotted: the ranking's is on hardware cost; per experiment it is another.
        self.front = [bool(r["pareto"]) for r in self.rows] if not per_run else \
            chart.pareto([(r[key], r["days"]) for r in self.rows])
        c.points = tuple(chart.Point(r[key], r["days"], f"{r['num_gpus']}x {r['gpu']}", front,
                                     bool(r["within_budget"] and r.get("deadline_verdict") in (None, "met")),
                                     pick=r is buy)
                         for r, front in zip(self.rows, self.front))
        c.budget = None if per_run else s.budget_usd
        c.deadline = s.deadline_days
        c.x_title = "cost per experiment" if per_run else "hardware cost"
        if c.selected is not None and c.selected >= len(self.rows):
            c.selected = None
        model = result.model.id if result.model is not None else s.model  # the model on the run
        self.query_one("#chart-title", Static).update(content(
            f"[b]{fmt.esc(model)}[/b]: days against {c.x_title} [dim](log scales · c: "
            f"{'hardware cost' if per_run else 'per experiment'})[/]"))
        words = {"budget": f"{fmt.usd(c.budget)} budget" if c.budget else "",
                 "deadline": f"{c.deadline:g}-day deadline" if c.deadline else ""}
        parts = [f"[{style}]{glyph}[/]{words.get(what, what)}" if style else f"{glyph}{words.get(what, what)}"
                 for glyph, style, what in chart.legend(list(c.points), c.budget, c.deadline)]
        self.query_one("#chart-legend", Static).update(content("  ".join(parts)))
        self.query_one("#chart-run", Static).update(content(
            f"[dim]days for[/] {fmt.esc(st.run_line(result.model))}" if result.model is not None else ""))
        self._info()

    def _info(self) -> None:
        c = self.query_one(ScatterChart)
        info = self.query_one("#chart-info", Static)
        if error := (self.app.ranking.error if self.app.ranking else None):
            info.update(content(f"[b red]{fmt.esc(error, newlines=True)}[/]"))
            return
        if c.selected is None or c.selected >= len(self.rows):
            info.update(f"{len(self.rows)} options in systems sold to hold them: ←/→ walk, ↑/↓ the "
                        "Pareto ones, enter: details")
            return
        r = self.rows[c.selected]
        flag = f" [red]MFU {fmt.mfu(r['mfu'], r['plausibility'])}[/]" if r["plausibility"] in fmt.FLAG_MARK else ""
        band = fmt.band(r.get("days_low"), r.get("days_high"))
        stale = f"[yellow]{fmt.STALE_MARK}[/]" if r.get("price_stale") else ""
        info.update(content(f"[b]{r['num_gpus']} x {fmt.esc(r['gpu'])}[/b] in {fmt.esc(r['system_short'] or '')}: "
                            f"{fmt.usd(r['hardware_cost_usd'])}{stale} ({fmt.date(r['price_date'])}) · "
                            f"[b]{fmt.days(r['days'])} days[/b]{f' (band {band})' if band else ''} · "
                            f"{fmt.usd(r['cost_per_experiment_usd'])}/run · "
                            f"{fmt.esc(r['source'])}{' · Pareto' if self.front[c.selected] else ''}{flag} "
                            "[dim]· enter: details[/]"))

    def action_select(self, step: int) -> None:
        c = self.query_one(ScatterChart)
        if not self.rows:
            return
        c.selected = (0 if step > 0 else len(self.rows) - 1) if c.selected is None else (c.selected + step) % len(self.rows)
        self._info()

    def action_select_pareto(self, step: int) -> None:
        c = self.query_one(ScatterChart)
        front = [i for i, on in enumerate(self.front) if on]  # cheapest first: the slowest
        if not front:
            return
        at = c.selected if c.selected is not None else (-1 if step > 0 else len(self.rows))
        ahead = [i for i in front if (i > at if step > 0 else i < at)]
        c.selected = (ahead[0] if step > 0 else ahead[-1]) if ahead else (front[0] if step > 0 else front[-1])
        self._info()

    def action_details(self) -> None:
        from tui_planner.app.screens.dialogs import option_detail

        c = self.query_one(ScatterChart)
        if c.selected is None or c.selected >= len(self.rows):
            self.app.notify("←/→ pick a point first (↑/↓: the Pareto ones)", timeout=3)
            return
        result = self.app.ranking  # the trial is in the store it was ranked on; its export is for this run
        self.app.push_screen(option_detail(self.rows[c.selected], store=result.store if result else None,
                                           presets=result.presets if result else None))

    def action_axis(self) -> None:
        if self.app.state:
            self.app.update_state(x_axis="experiment" if self.app.state.x_axis == "hardware" else "hardware")
