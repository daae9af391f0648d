"""What the Plan and Chart screens share: the what-if keys, so a PI can step the budget, the deadline and
the run's tokens and cycle models without typing, and see the ranking or the chart follow."""

from __future__ import annotations

from textual.binding import Binding
from textual.screen import Screen

from tui_planner import format as fmt
from tui_planner.app import state as st

# The footer shows one entry per pair ("[ ]" budget, ", ." deadline) so the 80-column footer keeps room
# for the screen keys, help and quit; the help screen lists each key.
WHAT_IF_BINDINGS = [
    Binding("right_square_bracket", "budget(1)", "budget", key_display="[]", tooltip="budget +$10k"),
    Binding("left_square_bracket", "budget(-1)", "Budget-", show=False, key_display="[", tooltip="budget -$10k"),
    Binding("full_stop", "deadline(1)", "days", key_display=",.", tooltip="deadline +10 days"),
    Binding("comma", "deadline(-1)", "Days-", show=False, key_display=",", tooltip="deadline -10 days"),
    Binding("m", "model(1)", "model", tooltip="next model"),
    Binding("M", "model(-1)", "Prev model", show=False, tooltip="previous model"),
    Binding("s", "sources", "src", tooltip="cycle which sources are trusted"),
    Binding("t", "tokens(2)", "tokens x2", show=False, tooltip="twice the tokens (same batch and sequence)"),
    Binding("T", "tokens(0.5)", "tokens /2", show=False, tooltip="half the tokens"),
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
