"""Results: every trial in the current database, filtered and sorted by keyboard; enter shows one (every row,
a failed one too: it says why). The columns share the width the table gets (laid out again on a resize:
nothing a person needs is cut at 80 columns, and a wider terminal shows each row's band and run). Under the
table: the highlighted row's setting in words and which run it answers for (batch x sequence, precision,
optimizer) with the steps its days are for."""

from __future__ import annotations

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.screen import Screen
from textual.worker import get_current_worker
from textual.widgets import DataTable, Footer, Header, Select, Static

from tui_planner import format as fmt
from tui_planner import glossary
from tui_planner.app.screens.common import Cell, Check, Column, layout
from tui_planner.app.text import content

SORTS = (("days", "days"), ("mfu", "MFU"), ("model", "model"), ("gpu", "GPU"), ("num_gpus", "GPUs"),
         ("source", "source"))


# In the order shown. The table has no cell padding of its own: each column holds its separating space.
COLUMNS = (Column("model", "model", least=8), Column("gpu", "GPU"), Column("n", "n", right=True),
           Column("setting", "setting", least=12), Column("mb", "batch", right=True),
           Column("days", "days", right=True), Column("band", "band", right=True, optional=True),
           Column("mfu", "MFU", right=True), Column("source", "from"),
           Column("run", "run", optional=True), Column("when", "recorded", optional=True))


METHOD_FILTERS = (("naive", "naive"), ("free-lunch", "free-lunch only"), ("ckpt", "checkpointing"),
                  ("zero", "ZeRO (any)"), ("fsdp", "FSDP (any)"), ("zero1", "ZeRO-1"), ("zero2", "ZeRO-2"),
                  ("zero3", "ZeRO-3"), ("fsdp2", "FSDP-2"), ("fsdp3", "FSDP-3"), ("offload", "offloading"))


def uses(r: dict, method: str) -> bool:
    """Whether a trial's settings include a method (a paper row whose setting is unreadable does not)."""
    sharding = r.get("sharding") or ""
    if method == "naive":
        return r.get("free_lunch") is False
    if method == "free-lunch":
        return bool(r.get("free_lunch")) and sharding == "none" and not r.get("activation_checkpointing") \
            and not r.get("offloading")
    if method == "ckpt":
        return bool(r.get("activation_checkpointing"))
    if method == "offload":
        return bool(r.get("offloading"))
    return sharding.startswith(method)


def run_text(r: dict) -> str:
    """The run a trial answers for, as markup (values escaped): 'pythia-1b run 1024x2049 fp16 adam, 143,000
    steps'."""
    run = r.get("training_run")
    steps = r.get("steps")
    if not run:
        return "[dim]run: not stored (a file from before runs were kept): the model preset's[/]"
    return (f"[dim]{fmt.esc(r['model'])} run[/] {fmt.esc(run)}"
            + (f", [b]{steps:,}[/] steps [dim](its days are for these)[/]" if isinstance(steps, int) else ""))


def words_text(r: dict) -> str:
    """The highlighted row in words, as markup (values escaped): its setting spelled out, its source, and
    for a row with no time, why. One or two lines under the table; ? then g has the glossary."""
    e = fmt.esc
    ok = r["feasible"] and r["days"] is not None and not r.get("failure_kind")
    src = glossary.SOURCE_SHORT.get(r["source"], r["source"] or "")
    text = f"[b]{e(fmt.methods(r))}[/b]: {e(glossary.setting_words(r))}"
    text += "\n"
    mb = r.get("micro_batch"), r.get("grad_accum")
    if all(mb):
        text += f"[b]{mb[0]}x{mb[1]}[/b] micro-batch x accumulation · "
    text += f"[b]{e(src)}[/b] {e(glossary.SOURCE_WORDS.get(r['source'], r['source'] or 'no source'))}"
    if fmt.band(r.get("days_low"), r.get("days_high")):
        text += " (band: its low-high days)"
    if not ok:
        from tui_planner.app.details import OUTCOME_WORDS

        kind = r.get("failure_kind") or "infeasible"
        text += f" · [yellow]{e(kind)}: {e(OUTCOME_WORDS.get(kind, 'no usable time'))}[/] (enter: why)"
    return text + " [dim]· ? then g: glossary[/]"


class ResultsScreen(Screen):
    BINDINGS = [
        Binding("f", "focus_filters", "Filter", tooltip="model, GPU, count, source, feasible only"),
        Binding("s", "sort", "Sort", tooltip="cycle the sort column"),
        Binding("S", "reverse", "Rev", tooltip="reverse the sort order", show=False),
        Binding("w", "findings", "Found", tooltip="what the highlighted row's search found: winner, median, "
                "worst, the best memory-saving setting against free-lunch, the paper's pick"),
        Binding("o", "app.open_db", "Open", tooltip="browse another results file"),
        Binding("escape", "focus_table", "Table", show=False),
    ]

    def compose(self) -> ComposeResult:
        p = self.app.presets
        yield Header()
        with Horizontal(id="filters"):
            yield Select([(fmt.text(m), m) for m in p.models], prompt="model", compact=True, id="f-model")
            yield Select([(fmt.text(g), g) for g in p.gpus], prompt="GPU", compact=True, id="f-gpu")
            yield Select([(str(n), n) for n in (1, 2, 4, 8, 16, 32)], prompt="GPUs", compact=True, id="f-n")
            yield Select([(s, s) for s in ("measured", "paper", "predicted")], prompt="source", compact=True,
                         id="f-source")
            yield Select([(label, key) for key, label in METHOD_FILTERS], prompt="method", compact=True, id="f-method")
            yield Check("fits", value=False, compact=True, id="f-feasible")
        yield DataTable(id="results", cursor_type="row", cell_padding=0)
        yield Static("", id="results-words")
        yield Static("", id="results-run")
        yield Static("", id="results-status")
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        self.sort_index, self.reverse, self.rows = 0, False, []
        self._room = 0
        t = self.query_one("#results", DataTable)
        t.styles.scrollbar_size_vertical = 1
        self.watch(self.app, "db_path", lambda _: self.reload())
        t.focus()

    def filters(self) -> dict:
        def val(sel: str):
            v = self.query_one(sel, Select).value
            return None if v is Select.NULL else v

        return {"model": val("#f-model"), "gpu": val("#f-gpu"), "num_gpus": val("#f-n"), "source": val("#f-source"),
                "method": val("#f-method"), "feasible": True if self.query_one("#f-feasible", Check).value else None}

    @on(Select.Changed)
    @on(Check.Changed)
    def reload(self) -> None:
        self.load(self.filters())

    @work(thread=True, exclusive=True, group="results")
    def load(self, f: dict) -> None:
        cur = self.app.store.cursor()
        try:
            if f["source"]:
                f["source"] += "*"  # "paper" matches paper-table1 and paper-table4
            method = f.pop("method")
            rows = [r for r in cur.trials(**f) if method is None or uses(r, method)]
            # none at all of the model chosen (one from a config.json, say): _show says why, not just 0
            unknown = bool(f["model"]) and not rows and not cur.query(
                "SELECT 1 FROM trials WHERE model = ? LIMIT 1", [f["model"]])
        finally:
            cur.close()
        if not get_current_worker().is_cancelled:  # a newer filter (or database) has its own load
            self.app.call_from_thread(self._show, rows, f["model"] if unknown else None)

    def none_text(self, model: str | None) -> str:
        """Why the table is empty, as markup (values escaped): for a model the database holds nothing of, that
        nobody measured it here, that the Plan screen ranks it on predictions made there and not stored,
        and how to measure it or store them; else that no trial matches the filters."""
        e = fmt.esc
        if model is None:
            return "[yellow]No trial matches these filters[/] [dim](f: change them)[/]"
        config = getattr(self.app, "model_config", None)
        arg = config if config and model == getattr(self.app, "model_config_id", None) else model
        import shlex

        cmd = f"--model {shlex.quote(str(arg))} --db mine.duckdb"
        return (f"[yellow]No trial of {e(model)} in this database:[/] nobody measured it here, and the Plan screen "
                f"ranks it on predictions made for it there, not stored. Measure it: 3 (Benchmark, a GPU machine) "
                f"or [b]tui-planner bench {e(cmd)}[/]; [b]tui-planner predict {e(cmd)} --write[/] stores its "
                "predictions.")

    def _show(self, rows: list[dict], unknown_model: str | None = None) -> None:
        key, _ = SORTS[self.sort_index]

        def sort_key(r: dict):
            v = r.get(key)
            return (v is None, v if v is not None else 0)

        self.rows = sorted(rows, key=sort_key, reverse=self.reverse)
        if self.reverse:  # keep rows without a value last either way
            self.rows = [r for r in self.rows if r.get(key) is not None] + [r for r in self.rows if r.get(key) is None]
        self._lay_out()
        t = self.query_one("#results", DataTable)
        self._show_run(t.cursor_row if self.rows else None)
        self._unknown_model = unknown_model
        if not self.rows:
            self.query_one("#results-words", Static).update(content(self.none_text(unknown_model)))
        ro = " (read-only)" if self.app.store.read_only else ""
        self.query_one("#results-status", Static).update(content(
            f"{len(self.rows)} trials · sorted by {SORTS[self.sort_index][1]}{' ↓' if self.reverse else ''} · "
            f"[dim]{fmt.esc(self.app.store.path)}{ro}[/]"))

    def _cells(self, r: dict) -> dict[str, str]:
        ok = r["feasible"] and r["days"] is not None and not r.get("failure_kind")
        outcome = fmt.days(r["days"]) + ("†" if fmt.dense_mask(r) else "") if ok else (
            r["failure_kind"] or "infeasible")
        n = r["num_gpus"] * (r.get("num_nodes") or 1)
        created = r.get("created_at")
        return {"model": r["model"], "gpu": r["gpu"], "n": str(n), "setting": fmt.methods(r),
                "mb": f"{r['micro_batch']}x{r['grad_accum']}" if r.get("micro_batch") and r.get("grad_accum") else "—",
                "days": outcome, "band": fmt.band(r.get("days_low"), r.get("days_high")) if ok else "",
                "mfu": fmt.mfu(r["mfu"], r["plausibility"]) if ok or r.get("mfu") is not None else "—",
                "source": glossary.SOURCE_SHORT.get(r["source"], r["source"] or ""),
                "run": r.get("training_run") or "",
                "when": created.date().isoformat() if hasattr(created, "date") else str(created or "")[:10]}

    def _lay_out(self) -> None:
        """Fill the table with columns sized to the width it has now (again on a resize)."""
        t = self.query_one("#results", DataTable)
        cursor = t.cursor_row
        self._room = room = max(20, t.size.width - 1 if t.size.width else self.app.size.width - 1)
        cells = [{k: fmt.visible(v) for k, v in self._cells(r).items()} for r in self.rows]
        columns = [c for c in COLUMNS if not (c.key == "model" and self.filters_model())]
        widest = {c.key: max([len(c.label)] + [len(x[c.key]) for x in cells]) for c in columns}
        if not any(x["band"] for x in cells):  # no prediction among the rows: no band to show
            columns = [c for c in columns if c.key != "band"]
        widths = layout(columns, widest, room)
        shown = [c for c in columns if c.key in widths]
        t.clear(columns=True)
        for c in shown:
            t.add_column(Cell(c.label, widths[c.key], c.right), key=c.key, width=widths[c.key])
        for r, x in zip(self.rows, cells):
            ok = r["feasible"] and r["days"] is not None and not r.get("failure_kind")
            t.add_row(*[Cell(x[c.key], widths[c.key], c.right, "" if ok else "dim") for c in shown],
                      key=r["trial_id"])
        if self.rows and cursor:
            t.move_cursor(row=min(cursor, len(self.rows) - 1))

    def filters_model(self) -> bool:
        v = self.query_one("#f-model", Select).value
        return v is not Select.NULL and v is not None

    def on_resize(self) -> None:
        t = self.query_one("#results", DataTable)
        if self.rows and t.size.width and t.size.width - 1 != self._room:
            self._lay_out()
            self._show_run(t.cursor_row)

    def _show_run(self, index: int | None) -> None:
        box = self.query_one("#results-run", Static)
        words = self.query_one("#results-words", Static)
        if index is None or not 0 <= index < len(self.rows):
            box.update("")
            words.update(content(f"[dim]{fmt.esc(glossary.SETTING_LEGEND)}[/]"))
            return
        box.update(content(run_text(self.rows[index])))
        words.update(content(words_text(self.rows[index])))

    @on(DataTable.RowHighlighted, "#results")
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_run(event.cursor_row)

    @on(DataTable.RowSelected, "#results")
    def _open(self, event: DataTable.RowSelected) -> None:
        from tui_planner.app.screens.dialogs import TrialDetail

        trial = str(event.row_key.value)
        row = next((r for r in self.rows if r["trial_id"] == trial), None)
        # Its export is for the Plan screen's run when that is this row's model's (its days scaled to it).
        ranking = self.app.ranking
        on_run = ranking is not None and ranking.model is not None and row is not None \
            and ranking.model.id == row["model"]
        self.app.push_screen(TrialDetail(trial, presets=ranking.presets if on_run else None))

    def action_findings(self) -> None:
        from tui_planner.app.screens.dialogs import CellFindings

        t = self.query_one("#results", DataTable)
        if not self.rows or t.cursor_row is None or t.cursor_row >= len(self.rows):
            self.app.notify("no row highlighted", timeout=3)
            return
        r = self.rows[t.cursor_row]
        self.app.push_screen(CellFindings(r["model"], r["gpu"], r["num_gpus"]))

    def action_sort(self) -> None:
        self.sort_index = (self.sort_index + 1) % len(SORTS)
        self._show(self.rows, getattr(self, "_unknown_model", None))

    def action_reverse(self) -> None:
        self.reverse = not self.reverse
        self._show(self.rows, getattr(self, "_unknown_model", None))

    def action_focus_filters(self) -> None:
        self.query_one("#f-model", Select).focus()

    def action_focus_table(self) -> None:
        self.query_one("#results", DataTable).focus()
