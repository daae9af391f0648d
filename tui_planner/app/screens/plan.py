"""Plan: pick a model and its run (tokens, global batch, sequence length), budget, deadline and GPUs; the
ranking beside it follows every change. Each option is GPUs in a system that is sold to hold them, with its
band and deadline verdict; the line under the table tells the highlighted option's whole story (its prices
with their dates, the paper's figure beside). The line under the header says which run every figure is for.

A field applies on enter or on leaving it (tab, escape, a click elsewhere), never as it is typed: while it
holds text the plan does not have, the note under the fields says so (or why the text is not a value), and
the title, the run line and the verdict keep the plan last applied, so the field and the header agree once
it is applied and a half-typed value never reaches the verdict. Leaving a field whose text is not a value
puts the plan's value back and says what was dropped. Tokens re-rank on the database's rows (days scale
with the steps); a batch or sequence length is another model (engine/data/runs.py), ranked on predictions
made for it."""

from __future__ import annotations

from dataclasses import replace

from textual import on
from textual.app import ComposeResult
from textual.actions import SkipAction
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import DataTable, Footer, Header, Input, Label, Select, SelectionList, Static
from textual.widgets.selection_list import Selection

from engine.data.errors import PlannerError
from engine.data.runs import is_image, tokens
from tui_planner import format as fmt
from tui_planner.app import state as st
from tui_planner.app.screens.common import WHAT_IF_BINDINGS, Cell, Checks, Column, WhatIfScreen, layout
from tui_planner.views import unsold_text
from tui_planner.glossary import SOURCE_SHORT
from tui_planner.app.text import content


# In the order shown; they share the width the table gets (laid out again on a resize): every column its
# widest cell where they fit, the days as the figure and a prediction's band beside ('25.2 25-43'), a cost
# as $39.8k and an MFU without its % sign where that keeps the system and the source (80x24); narrower, the system and the source are left
# out (the line under the table names the system and the source), then the days are the band alone and the
# GPUs are cut; wider, each option's cost per run too. The table has no cell padding of its own: each column
# holds its space.
COLUMNS = (Column("mark", ""), Column("gpus", "GPUs", least=8), Column("system", "in", optional=True),
           Column("hw", "cost", right=True), Column("days", "days", right=True), Column("mfu", "MFU", right=True),
           Column("source", "from", optional=True), Column("run", "$/run", right=True, optional=True))
RUN_FIELDS = {"tokens": "Tokens", "batch": "Batch", "seq": "Seq len"}
TOKEN_KEYS = "t/T: tokens x2 /2"
FIELDS = {"budget": "budget_usd", "deadline": "deadline_days", "lifespan": "lifespan_years", "kwh": "kwh_price_usd",
          "prices": "price_overrides"}


def price_used(g, s: st.PlanState) -> tuple[float | None, bool]:
    """The price per GPU the ranking uses for `g` (engine/plan/ranking.py): your override, else the paper's
    own in its view, else the preset's; and whether it is yours."""
    overrides = dict(s.price_overrides)
    if g.id in overrides:
        return overrides[g.id], True
    p = (g.paper_price or g.price) if s.sources == ("paper",) else g.price
    return (p.usd if p else None), False


def money_short(usd: float | None) -> str:
    """$750, $6,956, $27.5k, $1.2m: a price in at most six characters."""
    if usd is None:
        return "—"
    if usd < 10_000:
        return f"${usd:,.0f}"
    if usd < 1e6:
        return f"${usd / 1e3:.3g}k"
    return f"${usd / 1e6:.3g}m"


def gpu_prompt(g, s: st.PlanState):
    """A GPU type in the list: its id and the price per GPU used now ("=" marks yours, as typed in Prices; "u"
    a second-hand one)."""
    usd, yours = price_used(g, s)
    used = not yours and s.sources != ("paper",) and g.price is not None and st.second_hand(g.price.source)
    return fmt.text(f"{g.id:<11}{('=' if yours else '') + money_short(usd):>7}{st.USED_MARK if used else ''}")


SOURCES_ROOM = 25  # the form's width less its padding and border


def sources_line(sources: tuple[str, ...]) -> str:
    """'Sources all (f)', as markup: the sources trusted, in the table's short words where the full ones
    would not fit the form ('Sources meas+pred (f)')."""
    label = st.sources_label(sources)
    if len(f"Sources {label} (f)") > SOURCES_ROOM:
        label = label.replace("measured", SOURCE_SHORT["measured"]).replace("predicted", SOURCE_SHORT["predicted"])
    return f"Sources [b]{fmt.esc(label)}[/] [dim](f)[/]"


def option_mark(r: dict) -> str:
    """'*' Pareto, '$' over budget, '?' at risk (the deadline inside its band), 'd' misses it."""
    verdict = r.get("deadline_verdict")
    late = "" if verdict in (None, "met") else "?" if verdict == "at risk" else "d"
    if r.get("days") is None:
        late = "d"
    return ("*" if r["pareto"] else " ") + ("" if r["within_budget"] else "$") + late


def days_cell(r: dict) -> str:
    """The days and, for a prediction, its band beside ('25.2 25-43'): the figure the options are ordered by
    and the range a deadline is judged on."""
    if r.get("days") is None:
        return r["status"]
    band = fmt.band(r.get("days_low"), r.get("days_high"))
    return f"{fmt.days(r['days'])} {band}" if band else fmt.days(r["days"])


def trade_text(r: dict, pick: dict | None) -> str:
    """What an option trades against the verdict's pick, as markup: 'vs the pick: $10,176 more, 11.2 d slower,
    at risk' (over budget, at risk or missing the deadline where the pick is not); '' for the pick itself or
    with no pick."""
    if pick is None or r is pick or r.get("days") is None or pick.get("days") is None:
        return ""
    dollars = r["hardware_cost_usd"] - pick["hardware_cost_usd"]
    days = r["days"] - pick["days"]
    parts = [f"{fmt.usd(abs(dollars))} {'more' if dollars > 0 else 'less'}" if round(dollars) else "same cost",
             f"{fmt.days(abs(days))} d {'slower' if days > 0 else 'faster'}" if abs(days) >= 0.05 else "as fast"]
    if not r.get("within_budget") and pick.get("within_budget"):
        parts.append("[yellow]over budget[/]")
    risk, pick_risk = r.get("deadline_verdict"), pick.get("deadline_verdict")
    if risk != pick_risk and risk is not None:
        parts.append({"met": "meets the deadline", "at risk": "[yellow]at risk[/]"}.get(risk, "[red]misses the deadline[/]"))
    return "[dim]vs the pick:[/] " + ", ".join(parts)  # the verdict names the pick


def option_text(r: dict, source: bool = False, pick: dict | None = None) -> str:
    """The highlighted option under the table, as markup: its system, days (with where they come from when
    `source`: the table too narrow for its column), cost per run and the paper's figure beside; for another
    than the verdict's `pick`, what it trades against it; then its prices, each with its date and the start
    of its source ($: all of them)."""
    from tui_planner import views
    from tui_planner.glossary import SOURCE_WORDS

    e = fmt.esc
    src = f" ({e(SOURCE_WORDS.get(r.get('source'), r.get('source') or ''))})" if source and r.get("source") else ""
    head = f"[b]{e(r['system_name'])}[/b]: " + (
        f"{fmt.days(r['days'])} d{src}, {fmt.usd(r['cost_per_experiment_usd'])}/run" if r.get("days") is not None
        else e(r["status"]))
    if r.get("paper_days") is not None and not (r.get("source") or "").startswith("paper"):
        head += f"; paper {fmt.days(r['paper_days'])} d at MFU {fmt.mfu(r['paper_mfu'], r['paper_plausibility'])}"
    stale = f" [yellow]{fmt.STALE_MARK} stale: $[/]" if r.get("price_stale") else ""
    trade = trade_text(r, pick)
    return f"{head}\n" + (f"{trade}\n" if trade else "") + f"[dim]{e(views.price_text(r, source_limit=18))}[/]{stale}"


class PlanScreen(WhatIfScreen):
    # The keys that move the focus are priority bindings: the app runs them as it reads them, so the keys
    # typed right after already go to the field they were typed for. Otherwise Textual hands each key to the
    # widget focused when it is read, and a fast typist's "e120k" reached the table, digits switching
    # screens. An Input still takes e, g and the other letters typed into it (they are not bound there).
    BINDINGS = [
        *WHAT_IF_BINDINGS,
        Binding("g", "focus_gpus", "GPUs", show=False, priority=True, tooltip="choose GPU types (space toggles)"),
        Binding("e", "edit", "Edit", show=False, priority=True,
                tooltip="type the budget, deadline, prices… (shift+tab: the run's tokens, batch, sequence)"),
        Binding("tab", "next_field(1)", "Next", show=False, priority=True, tooltip="next field"),
        Binding("shift+tab", "next_field(-1)", "Previous", show=False, priority=True, tooltip="previous field"),
        Binding("escape", "focus_table", "Table", show=False, priority=True, tooltip="leave a field for the table"),
        Binding("enter", "details", "Details", show=False, priority=True,
                tooltip="the result behind the highlighted option (in a field: apply it, back to the table)"),
        Binding("dollar_sign", "prices", "Prices", show=False, key_display="$",
                tooltip="every price with its date and source, stale ones marked, and how to override"),
        Binding("a", "load_model", "Add model", show=False,
                tooltip="a model from its config.json (a path; → completes) or from the local Hugging Face cache "
                        "by id (offline: nothing is downloaded)"),
        Binding("R", "reset", "Reset", show=False,
                tooltip="reset the plan to the defaults (model, run, budget, deadline, sources, GPUs, prices)"),
    ]
    DEFAULT_CSS = """
    PlanScreen #form Input > .input--placeholder { text-style: italic; }
    """

    def compose(self) -> ComposeResult:
        presets = self.app.presets
        self._errors: dict[str, str] = {}  # a field's text that is not a value: why (the note says it)
        self._applied: dict[str, str] = {}  # each field's text last applied (typed, or shown from the state)
        yield Header()
        yield Static("", id="run")
        with Horizontal():
            with Vertical(id="form"):
                with Horizontal(classes="field"):
                    yield Label("Model", classes="name")
                    yield Select([(fmt.text(m), m) for m in presets.models], allow_blank=False, compact=True, id="model",
                                 value=self.app.initial.model)
                for key, label in RUN_FIELDS.items():
                    with Horizontal(classes="field"):
                        yield Label(label, classes="name")
                        yield Input(compact=True, id=key, select_on_focus=True)
                # Labels shorter than their column, so a value never runs into its label; a placeholder says
                # in brackets what an empty field stands for, so it never reads as a value typed.
                kwh = presets.electricity
                for key, label, tip, help_ in (
                        ("budget", "Budget $", "(e.g. 50k)", "the budget for the hardware, in USD (50000, 50k)"),
                        ("deadline", "Deadline", "(days; none)", "days; empty: no deadline"),
                        ("lifespan", "Lifespan", "(years)", "years to amortise the hardware over"),
                        ("kwh", "$/kWh", f"(preset {kwh.usd_per_kwh:g})" if kwh else "(none)",
                         "the electricity price; empty: the preset's dated one ($ lists it), 0: no energy cost"),
                        ("prices", "Prices $", "(none: id=usd)",
                         "your prices: GPU (per GPU) or system, e.g. h100=25000 ws4=12k; the GPU list shows each "
                         "price used")):
                    with Horizontal(classes="field"):
                        yield Label(label, classes="name")
                        yield Input(placeholder=tip, compact=True, id=key, select_on_focus=True, tooltip=help_)
                yield Static("", id="field-note")  # the focused field: not applied yet, or why not a value
                yield Label("", id="sources")
                yield Label("GPUs [dim](g, space)[/]  [dim]price[/]")
                state = self.app.initial
                self._gpu_prices = (state.price_overrides, state.sources == ("paper",))  # the prompts' prices
                yield Checks(*[Selection(gpu_prompt(g, state), g.id, True, id=g.id) for g in presets.gpus.values()],
                             compact=True, id="gpus")
            with Vertical(id="right"):
                yield Static("", id="title")
                yield DataTable(id="ranking", cursor_type="row", zebra_stripes=False, cell_padding=0)
                yield Static("", id="option")
                # Scrolls where it is longer than its seven lines (80x24: the runner-up and the prices
                # would be cut): its scrollbar says there is more; the wheel, or tab to it and ↑/↓, reads it.
                with VerticalScroll(id="verdict-pane"):
                    yield Static("", id="verdict")
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        t = self.query_one("#ranking", DataTable)
        self.option_rows: list[dict] = []
        self._room = 0
        self._lay_out()  # the columns, before any ranking
        self.watch(self.app, "ranking", self.show_ranking)
        self.watch(self.app, "state", self.show_state)
        t.focus()

    # --- state -> widgets --------------------------------------------------------------------------

    def show_state(self, s: st.PlanState | None) -> None:
        if s is None:
            return
        values = {"budget": f"{s.budget_usd:.0f}", "deadline": "" if s.deadline_days is None else f"{s.deadline_days:g}",
                  "lifespan": f"{s.lifespan_years:g}", "kwh": "" if s.kwh_price_usd is None else f"{s.kwh_price_usd:g}",
                  "prices": " ".join(f"{g}={usd:.0f}" for g, usd in s.price_overrides),
                  # as the run line says them (600B, not 600.078336B after t): the plan keeps the exact figure,
                  # and the field's text applies only once it is edited (_commit)
                  "tokens": "" if s.run.tokens is None else st.tokens_short(s.run.tokens),
                  "batch": "" if s.run.batch is None else str(s.run.batch),
                  "seq": "" if s.run.seq_len is None else str(s.run.seq_len)}
        for key, text in values.items():
            box = self.query_one(f"#{key}", Input)
            if box.has_focus or box.value != self._applied.get(key, box.value):
                continue  # being typed in, or typed text whose leaving is on its way: the person's wins
            try:
                current = self._parse(key, box.value)
            except PlannerError:
                current = None
            if current != self._parse(key, text):
                self._set_box(box, text)
        self._show_note()
        self._show_gpus(s)
        model = self.query_one("#model", Select)
        listed = tuple(self.app.presets.models)
        if getattr(self, "_models_listed", listed) != listed:  # a model added since (`a`: app.load_model)
            with model.prevent(Select.Changed):
                model.set_options([(fmt.text(m), m) for m in listed])
        self._models_listed = listed
        if model.value != s.model:
            with model.prevent(Select.Changed):
                model.value = s.model
        self.query_one("#sources", Label).update(sources_line(s.sources))
        self._show_run(s)

    def _show_gpus(self, s: st.PlanState) -> None:
        """The GPU list: the types the plan allows checked, each with the price the ranking uses."""
        gpus = self.query_one("#gpus", Checks)
        want = set(s.gpus_allowed) or set(self.app.presets.gpus)
        if set(gpus.selected) != want:
            with gpus.prevent(SelectionList.SelectedChanged):
                gpus.deselect_all()
                for g in want:
                    gpus.select(g)
        prices = (s.price_overrides, s.sources == ("paper",))
        if getattr(self, "_gpu_prices", None) != prices:
            self._gpu_prices = prices
            for g in self.app.presets.gpus.values():
                gpus.replace_option_prompt(g.id, gpu_prompt(g, s))

    def _show_run(self, s: st.PlanState) -> None:
        """The run line under the header (what every figure on the screen is for) and, in each empty run
        field, what it stands for now (the model's own, or what the other fields make of it)."""
        box = self.query_one("#run", Static)
        try:
            _, on_run = st.run_model(self.app.presets, s)
        except PlannerError as e:
            box.update(content(f"[b]Run[/b] [b red]{fmt.esc(e)}[/]"))
            return
        image = is_image(on_run)
        own = {"tokens": "image model" if image else st.tokens_short(float(tokens(on_run))),
               "batch": f"{on_run.training.batch_size} {'images' if image else 'seqs'}",
               "seq": "image model" if image else f"{on_run.seq_len}"}
        for key, text in own.items():
            self.query_one(f"#{key}", Input).placeholder = f"({text})"  # in brackets: not a value typed
        result = self.app.ranking
        words = st.run_line(on_run)
        line = f"[b]Run[/b] {fmt.esc(words)}"
        if result is None or result.state != s:
            line += "  [dim]predicting…[/]" if self.app.predicting(on_run.id) else "  [dim]ranking…[/]"
        elif len(words) + len(TOKEN_KEYS) + 4 <= 78:  # the screen's width less the line's padding
            line += f"  [dim]{TOKEN_KEYS}[/]"
        box.update(content(line))

    def _parse(self, key: str, text: str):
        if key == "tokens":
            return st.parse_tokens(text)
        if key == "batch":
            return st.parse_batch(text)
        if key == "seq":
            return st.parse_seq_len(text)
        if key == "budget":
            return st.parse_money(text, "budget")
        if key == "deadline":
            return st.parse_optional(text, "deadline", "days")
        if key == "lifespan":
            return st.parse_years(text, "lifespan")
        if key == "kwh":
            return st.parse_optional(text, "electricity price", "USD/kWh")
        return st.parse_prices(text, [*self.app.presets.gpus, *self.app.presets.systems])

    def show_ranking(self, result) -> None:
        if result is None:
            return
        s = result.state
        if s == self.app.state:
            self._show_run(s)
        title = self.query_one("#title", Static)
        model = result.model.id if result.model is not None else s.model  # the model on the run
        title.update(content(f"[b]{fmt.esc(model)}[/b] {fmt.usd(s.budget_usd)}"
                             + (f", {s.deadline_days:g} d" if s.deadline_days else ", no deadline")
                             + ("  [b]paper's view[/b]" if s.sources == ("paper",) else "")
                             + "  [dim]*Pareto $over ?risk dlate[/]"))
        t = self.query_one("#ranking", DataTable)
        self.option_rows = []
        self._pick = None
        self.query_one("#option", Static).update("")
        self._show_verdict(result)
        if not result.error:
            self.option_rows = [r for r in result.rows if r["system"] is not None]
        self._lay_out()
        if result.error:
            return
        # The cursor starts on the option the verdict buys, so the line under the table shows its prices.
        from engine.plan.verdict import decide

        buy = decide(list(result.rows), s.deadline_days).buy
        self._pick = buy
        at = next((i for i, r in enumerate(self.option_rows) if r is buy), 0)
        if self.option_rows:
            t.move_cursor(row=at, animate=False)
        self._show_option(at)

    @staticmethod
    def _cells(r: dict, short_cost: bool = False, band_only: bool = False, used: bool = True,
               percent: bool = True) -> dict[str, str]:
        """An option's cells, as plain text (values from outside made visible; a Cell is never markup);
        `band_only`: a prediction's days as its band alone, where the figure beside does not fit; `used`: a
        second-hand price marked u (the GPU list marks it too, where the table has no room); `percent`: an
        MFU with its % sign (the column's title says MFU where it has no room; a capped MFU keeps its ^,
        which nothing else on the screen says)."""
        has = r["days"] is not None
        money = money_short if short_cost else fmt.usd
        run = r.get("cost_per_experiment_usd")
        mfu = fmt.mfu(r["mfu"], r["plausibility"], r.get("capped")) if has else "—"
        if not percent:
            mfu = mfu.replace("%", "")
        cells = {"mark": option_mark(r), "gpus": f"{r['num_gpus']}x {r['gpu']}", "system": r["system_short"] or "",
                 "hw": money(r["hardware_cost_usd"]) + (fmt.STALE_MARK if r["price_stale"] else "")
                 + (st.USED_MARK if used and st.second_hand(r.get("gpu_price_source")) else ""),
                 "days": (fmt.band(r.get("days_low"), r.get("days_high")) or days_cell(r)) if band_only and has
                 else days_cell(r), "mfu": mfu,
                 "source": SOURCE_SHORT.get(r["source"], r["source"] or "—"),
                 "run": fmt.usd(run) if has and run is not None else "—"}
        return {k: fmt.visible(v) for k, v in cells.items()}

    def _lay_out(self) -> None:
        """Fill the table with the options, its columns sized to the width it has now (again on a resize)."""
        t = self.query_one("#ranking", DataTable)
        cursor = t.cursor_row
        # Before the first layout the table has no size: the right pane's share of the screen.
        self._room = room = max(20, t.size.width - 1 if t.size.width else self.app.size.width - 29)
        rows = self.option_rows

        def widest(cells: list[dict[str, str]]) -> dict[str, int]:
            return {c.key: max([len(c.label)] + [len(x[c.key]) for x in cells]) for c in COLUMNS}

        def need(wide: dict[str, int], keys) -> int:
            return sum(wide[c.key] + 1 for c in COLUMNS if c.key in keys)

        # The first form where every column but $/run fits, else the first where those that stay do.
        required = {c.key for c in COLUMNS if not c.optional}
        # The days' figure beside its band goes last: a capped MFU's ^ costs a column, so at 80 columns the
        # MFU drops its % sign (the column's title says MFU) before the figure goes.
        forms = [(False, False, True, True), (True, False, True, True), (True, False, True, False),
                 (False, True, True, True), (True, True, True, True), (True, True, False, False)]
        tried = []
        for short, band, used, percent in forms:
            cells = [self._cells(r, short_cost=short, band_only=band, used=used, percent=percent) for r in rows]
            tried.append((cells, widest(cells)))
        fits = [x for x in tried if need(x[1], required | {"system", "source"}) <= room] or \
            [x for x in tried if need(x[1], required) <= room] or tried[-1:]
        cells, wide = fits[0]
        widths = layout(list(COLUMNS), wide, room)
        shown = [c for c in COLUMNS if c.key in widths]
        self._shown = {c.key for c in shown}
        t.clear(columns=True)
        for c in shown:
            t.add_column(Cell(c.label, widths[c.key], c.right), key=c.key, width=widths[c.key])
        for i, (r, x) in enumerate(zip(rows, cells)):
            has = r["days"] is not None
            style = "" if r["within_budget"] and has else "dim"
            if i == 0 and r["within_budget"] and r.get("deadline_verdict") in ("met", None) and has:
                style = "bold green"
            t.add_row(*[Cell(x[c.key], widths[c.key], c.right, style) for c in shown],
                      key=f"{r['gpu']}:{r['num_gpus']}")
        if rows and cursor:
            t.move_cursor(row=min(cursor, len(rows) - 1), animate=False)

    def on_resize(self) -> None:
        t = self.query_one("#ranking", DataTable)
        if t.size.width and t.size.width - 1 != self._room:
            self._lay_out()
            self._show_option(t.cursor_row)

    def _show_verdict(self, result=None) -> None:
        """The verdict on the ranking, or why it could not be made (a field's text that is not a value is said
        beside the fields: the verdict stays the last plan applied)."""
        verdict = self.query_one("#verdict", Static)
        result = result or self.app.ranking
        if result is None:
            verdict.update("")
        elif result.error:
            verdict.update(content(f"[b red]{fmt.esc(result.error, newlines=True)}[/]"))
        else:
            lines = st.verdict(list(result.rows), result.state)
            if unsold := unsold_text(result.rows, measured_only=any(r.get("system") for r in result.rows)):
                lines.append(f"[yellow]Not an option[/] [dim](no system sold takes them; 4 lists their rows):[/] "
                             f"{fmt.esc(unsold)}.")
            if result.missing:
                lines.append(f"[dim]No data: {fmt.esc(', '.join(result.missing))}[/]")
            from engine.data.runs import position_note

            if result.model is not None and (note := position_note(result.model, result.state.run.seq_len)):
                lines.append(f"[yellow]Note:[/] {fmt.esc(note)}.")  # past learned positions: refused
            verdict.update(content("\n".join(lines)))

    def _show_option(self, index: int | None) -> None:
        options = getattr(self, "option_rows", [])
        box = self.query_one("#option", Static)
        result = self.app.ranking
        if result is None or index is None or not 0 <= index < len(options):
            box.update("")
            return
        box.update(content(option_text(options[index], source="source" not in getattr(self, "_shown", ()),
                                       pick=getattr(self, "_pick", None))))

    @on(DataTable.RowHighlighted, "#ranking")
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_option(event.cursor_row)

    # --- widgets -> state --------------------------------------------------------------------------

    @on(Select.Changed, "#model")
    def _model(self, event: Select.Changed) -> None:
        if isinstance(event.value, str) and self.app.state and event.value != self.app.state.model:
            self.app.update_state(model=event.value)

    @on(Input.Changed)
    def _typed(self, event: Input.Changed) -> None:
        """As it is typed: checked and said beside the fields, never applied."""
        if event.value != event.input.value:
            return  # typed over since: the Changed for what the box holds now follows
        self._check(event.input)

    def _set_box(self, box: Input, text: str) -> None:
        """Show the plan's value in a box (only a person's typing is checked and applied)."""
        with box.prevent(Input.Changed):
            box.value = text
        self._applied[box.id] = text
        box.remove_class("-bad")
        self._errors.pop(box.id, None)

    def _value(self, box: Input):
        """The value the box's text stands for, checked: a run the model cannot have too. PlannerError if none."""
        value = self._parse(box.id, box.value)
        if box.id in RUN_FIELDS and self.app.state:
            st.run_model(self.app.presets, self._with_run(self.app.state, box.id, value))
        return value

    def _check(self, box: Input) -> None:
        try:
            self._value(box)
        except PlannerError as e:
            box.add_class("-bad")
            self._errors[box.id] = str(e)  # e holds what was typed: escaped where it is shown
        else:
            box.remove_class("-bad")
            self._errors.pop(box.id, None)
        self._show_note()

    def _differs(self, box: Input) -> bool:
        """Whether the box holds text the plan does not have (not a value, or another one)."""
        if box.id in self._errors:
            return True
        if box.value == self._applied.get(box.id):
            return False  # the plan's own text, as shown (tokens in three figures)
        s = self.app.state
        if s is None:
            return False
        try:
            return self._value(box) != self._state_value(s, box.id)
        except PlannerError:
            return True

    @staticmethod
    def _state_value(s: st.PlanState, key: str):
        run = {"tokens": s.run.tokens, "batch": s.run.batch, "seq": s.run.seq_len}
        return run[key] if key in run else getattr(s, FIELDS[key])

    def _show_note(self) -> None:
        """Under the fields: why the focused field's text is not a value, or that it is not applied yet."""
        note = self.query_one("#field-note", Static)
        box = self.focused if isinstance(self.focused, Input) else None
        text = ""
        if box is not None and box.id in self._errors:
            text = f"[b red]{fmt.esc(self._errors[box.id])}[/]"
        elif box is not None and self._differs(box):
            text = "[yellow]not applied yet:[/] [b]enter[/] or [b]tab[/] applies it"
        note.update(content(text))
        note.display = bool(text)

    def _commit(self, box: Input | None = None, leaving: bool = True) -> bool:
        """Apply a field's text (the focused one's by default): enter, or leaving it. Text that is not a value
        is not applied: on enter the field keeps it, its reason beside it; leaving, the field gets the plan's
        value back and a note says what was dropped. True when the plan holds the field's value."""
        box = box if box is not None else self.focused
        if not isinstance(box, Input) or self.app.state is None:
            return True
        key = box.id
        if box.value == self._applied.get(key) and key not in self._errors:
            return True  # not edited: the plan's value stands (its text may be rounded: 600B)
        try:
            value = self._value(box)
        except PlannerError as e:
            if not leaving:
                self._check(box)
                return False
            kept = self._applied.get(key, "")  # a box never set from the plan started empty
            self._set_box(box, kept)
            self.notify(fmt.visible(f"{e}. Not applied: the field is back to {kept or 'empty'}", newlines=True),
                        title="Not applied", severity="warning", timeout=6, markup=False)
            self._show_note()
            return False
        self._applied[key] = box.value
        box.remove_class("-bad")
        self._errors.pop(key, None)
        s = self.app.state
        new = self._with_run(s, key, value) if key in RUN_FIELDS else replace(s, **{FIELDS[key]: value})
        if new != s:
            self.app.state = new
        self._show_note()
        return True

    @staticmethod
    def _with_run(s: st.PlanState, key: str, value) -> st.PlanState:
        if key == "tokens":
            return st.with_tokens(s, value)
        return st.with_batch(s, value) if key == "batch" else st.with_seq_len(s, value)

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted | None = None) -> None:
        box = event.input if event is not None else self.focused
        if self._commit(box, leaving=False):
            self._focus_now("#ranking")

    @on(Input.Blurred)
    def _left(self, event: Input.Blurred) -> None:
        self._commit(event.input)
        self._show_note()

    def on_descendant_focus(self) -> None:
        self._show_note()

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

    def _focus_now(self, selector: str) -> None:
        """Move the focus before the next key is read (Widget.focus waits for the app's queue, behind the
        keys already typed)."""
        self.set_focus(self.query_one(selector))

    def action_focus_gpus(self) -> None:
        self._focus_now("#gpus")

    def action_edit(self) -> None:
        self._focus_now("#budget")

    def action_load_model(self) -> None:
        from tui_planner.app.completion import ModelSuggester
        from tui_planner.app.screens.dialogs import AskPath

        def chosen(text: str | None) -> None:
            if text:
                self.app.load_model(text)

        self.app.push_screen(AskPath("Load a model: a config.json's path, or a model id in the local Hugging Face "
                                     "cache", "", "→ completes · enter loads · escape cancels",
                                     suggester=ModelSuggester()), chosen)


    def action_focus_table(self) -> None:
        if self.focused is not None and isinstance(self.focused.parent, Select):
            raise SkipAction()  # the model list open: escape closes it
        self._commit()
        self._focus_now("#ranking")

    def action_next_field(self, step: int) -> None:
        self._commit()
        self.focus_next() if step > 0 else self.focus_previous()

    @on(DataTable.RowSelected, "#ranking")
    def _selected(self) -> None:
        self.action_details()

    def action_reset(self) -> None:
        """Ask, then reset the plan to the defaults."""
        from tui_planner.app.screens.dialogs import Confirm

        def answer(yes: bool | None) -> None:
            if yes:
                self.app.reset_plan()
                self.notify("The plan is back to the defaults (the last plan is kept for the next start from now "
                            "on)", title="Reset", timeout=4)

        self.app.push_screen(Confirm("Reset the plan to the defaults? The model, its run, the budget, deadline, "
                                     "lifespan, electricity, your prices, the sources and the GPU types all go "
                                     "back.", "Reset"), answer)

    def action_prices(self) -> None:
        from tui_planner.app.screens.dialogs import PricesScreen

        today = self.app.state.today if self.app.state else None
        self.app.push_screen(PricesScreen(today))

    def action_details(self) -> None:
        if isinstance(self.focused, Input):  # enter in a field: apply it, back to the table
            self._submitted()
            return
        t = self.query_one("#ranking", DataTable)
        if self.focused is not t:
            raise SkipAction()  # the model list, a GPU type: theirs
        options = getattr(self, "option_rows", [])
        if t.cursor_row is None or not 0 <= t.cursor_row < len(options):
            return
        from tui_planner.app.screens.dialogs import option_detail

        # Every row opens something: its trial (in the store it was ranked on, its export for this run),
        # else why it is not ranked.
        result = self.app.ranking
        self.app.push_screen(option_detail(options[t.cursor_row], store=result.store if result else None,
                                           presets=result.presets if result else None))
