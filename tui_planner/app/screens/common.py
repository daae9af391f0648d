"""What the Plan and Chart screens share: the what-if keys, so a PI can step the budget and the deadline
and cycle models without typing, and see the ranking or the chart follow."""

from __future__ import annotations

from textual.binding import Binding
from textual.screen import Screen

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
