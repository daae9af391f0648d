"""What the screens share: the what-if keys of the Plan and Chart screens, so a PI can step the budget, the
deadline and the run's tokens and cycle models without typing, and see the ranking or the chart follow;
check boxes that look unchecked when they are (Textual's draw the same X either way, only its colour
differs, which a monochrome or low-contrast terminal does not show); and table columns that share the width
they get (the Plan and Results screens)."""

from __future__ import annotations

from dataclasses import dataclass

from rich.segment import Segment
from rich.text import Text
from textual.binding import Binding
from textual.content import Content
from textual.screen import Screen
from textual.strip import Strip
from textual.widgets import Checkbox, SelectionList

from tui_planner import format as fmt
from tui_planner.app import state as st

# The footer shows one entry per pair ("[ ]" budget, ", ." deadline) so the 80-column footer keeps room
# for the screen keys, help and quit; the help screen lists each key. A key means one thing on every screen
# (tests/test_app.py checks it): f filters (here: the sources), s sorts, r runs, p pauses, $ lists prices.
WHAT_IF_BINDINGS = [
    Binding("right_square_bracket", "budget(1)", "budget", key_display="[]", tooltip="budget +$10k"),
    Binding("left_square_bracket", "budget(-1)", "Budget-", show=False, key_display="[", tooltip="budget -$10k"),
    Binding("full_stop", "deadline(1)", "days", key_display=",.", tooltip="deadline +10 days"),
    Binding("comma", "deadline(-1)", "Days-", show=False, key_display=",", tooltip="deadline -10 days"),
    Binding("m", "model(1)", "model", tooltip="next model"),
    Binding("M", "model(-1)", "Prev model", show=False, tooltip="previous model"),
    # f: which figures to trust, by where they come from (the table's from column); on Results f filters too
    Binding("f", "sources", "from", tooltip="cycle which sources are trusted (the from column)"),
    Binding("t", "tokens(2)", "tokens x2", show=False, tooltip="twice the tokens (same batch and sequence)"),
    Binding("T", "tokens(0.5)", "tokens /2", show=False, tooltip="half the tokens"),
    Binding("n", "second_hand", "New only", show=False,
            tooltip="leave out the GPUs priced second-hand (u: used or refurbished), or bring them back"),
    Binding("x", "app.report", "Report", show=False,
            tooltip="write the plan as a report: Markdown, CSV and an SVG of this screen, to a folder"),
]


class WhatIfScreen(Screen):
    """Screens with the what-if keys. Each change replaces the app's PlanState; the app re-ranks."""

    def action_budget(self, steps: int) -> None:
        if self.app.state:
            self.app.state = st.nudge_budget(self.app.state, steps)

    def action_deadline(self, steps: int) -> None:
        if self.app.state:
            self.app.state = st.nudge_deadline(self.app.state, steps)

    def action_model(self, steps: int) -> None:
        if self.app.state:
            models = list(self.app.presets.models)
            self.app.update_state(model=st.cycle(models, self.app.state.model, steps))

    def action_sources(self) -> None:
        if self.app.state:
            self.app.state = st.cycle_sources(self.app.state)

    def action_second_hand(self) -> None:
        if not self.app.state:
            return
        state, out = st.toggle_second_hand(self.app.state, self.app.presets)
        used = sorted(st.second_hand_gpus(self.app.presets, self.app.state))
        if not used:
            self.app.notify("No GPU here is priced second-hand", timeout=4)
            return
        self.app.state = state
        self.app.notify(fmt.visible(("Left out, priced second-hand: " if out else "Back in, priced second-hand: ")
                                    + ", ".join(used)), title="New prices only" if out else "All prices",
                        timeout=5, markup=False)

    def action_tokens(self, factor: float) -> None:
        """Another length of the same run: the ranking scales its days with the steps, no new predictions."""
        from engine.data.errors import PlannerError

        if not self.app.state:
            return
        try:
            _, on_run = st.run_model(self.app.presets, self.app.state)
        except PlannerError as e:  # the run in the fields cannot be: the verdict already says why
            self.app.notify(fmt.visible(e, newlines=True), severity="warning", timeout=4, markup=False)
            return
        from engine.data.runs import is_image

        if is_image(on_run):
            self.app.notify(f"{fmt.visible(on_run.id)}: an image model's run is its batch and steps, not tokens",
                            timeout=4, markup=False)
            return
        self.app.state = st.nudge_tokens(self.app.state, on_run, factor)


UNCHECKED = " "  # inside the box: blank when off, Textual's X when on


class Check(Checkbox):
    """A Checkbox whose box is empty when it is off (ToggleButton._button, the inside chosen by value)."""

    @property
    def _button(self) -> Content:
        from textual.style import Style

        button_style = self.get_visual_style("toggle--button")
        side_style = Style(foreground=button_style.background, background=self.background_colors[1])
        inner = self.BUTTON_INNER if self.value else UNCHECKED * len(self.BUTTON_INNER)
        return Content.assemble((self.BUTTON_LEFT, side_style), (inner, button_style),
                                (self.BUTTON_RIGHT, side_style))


class Checks(SelectionList):
    """A SelectionList whose boxes are empty for the values not selected."""

    def render_line(self, y: int) -> Strip:
        line = super().render_line(y)
        try:
            selection = self.get_option_at_index(self.scroll_offset.y + y)
        except Exception:  # noqa: BLE001 - a line below the last option: nothing to change
            return line
        if selection.value in self._selected:
            return line
        segments = list(line)
        if len(segments) < 2:
            return line
        inner = segments[1]
        segments[1] = Segment(UNCHECKED * len(inner.text), inner.style, inner.control)
        return Strip(segments, line.cell_length)


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    right: bool = False  # numbers: right-aligned
    least: int | None = None  # may be cut down to this (with "…") when the width is short; None: never cut
    optional: bool = False  # shown only where the width has room for it


def layout(columns: list[Column], widths: dict[str, int], room: int) -> dict[str, int]:
    """Each column's width (its separating space included) for `room` cells: every column its widest cell
    where they fit; else the optional ones left out, then the cuttable ones cut down toward their least, in
    their order (the first is the one the line under the table names in full: the Results screen's model,
    the Plan screen's GPUs)."""
    need = {c.key: widths[c.key] + 1 for c in columns}
    shown = [c for c in columns if not c.optional]
    for c in (c for c in columns if c.optional):  # in order, while they fit
        if sum(need[x.key] for x in shown) + need[c.key] <= room:
            shown.append(c)
    out = {c.key: need[c.key] for c in columns if c in shown}
    over = sum(out.values()) - room
    for c in (c for c in shown if c.least is not None):
        cut = max(0, min(over, out[c.key] - (c.least + 1)))
        out[c.key] -= cut
        over -= cut
    return out


def fit(text: str, width: int, right: bool = False) -> str:
    """`text` in `width` cells, its last one a space; cut with '…' where it is longer."""
    w = width - 1
    if len(text) > w:
        text = text[: max(0, w - 1)] + "…"
    return (text.rjust(w) if right else text.ljust(w)) + " "


class Cell(Text):
    """A cell padded (or cut) to its column's width, its separating space included; str() is the value
    itself, as a table's cell reads without padding."""

    def __init__(self, value: str, width: int, right: bool = False, style: str = "") -> None:
        super().__init__(fit(value, width, right), style=style, no_wrap=True, overflow="crop", end="")
        self.value = value

    def __str__(self) -> str:
        return self.value
