"""What the Benchmark screen's progress says, from the sweep's events (engine/bench/events.py) and a clock.

The count is every combination settled (measured, failed, left unrun, or resumed from the database) of all
of them, so a resumed sweep starts where the last one stopped, not at 0%. The time runs while a trial runs
(the screen reads it each second) and stops when the sweep ends or pauses. The time left is never a rate
extrapolated from the bar: it is the mean time of the trials this sweep ran, times the combinations still
queued that can still win (a guided search leaves unrun, in no time, one whose predicted band's low end is
no faster than the best measured), plus what the mean leaves of the running trial (past the mean, the rest
counts from its end); none before a trial has finished, none while pausing. No Textual here: the screen calls these methods and shows `line`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tui_planner import format as fmt


def short_time(seconds: float) -> str:
    """45s, 2m10s, 1h05m: a duration in at most six characters."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


@dataclass
class SweepProgress:
    total: int = 0
    done: int = 0  # settled: finished (run or not), resumed, given up
    resumed: int = 0
    started_at: float | None = None
    ended_at: float | None = None
    current: str | None = None  # the running trial's key
    current_label: str = ""
    current_since: float | None = None
    durations: list[float] = field(default_factory=list)  # of the trials this sweep ran
    low_days: dict[str, float] = field(default_factory=dict)  # key -> its prediction's band low end (guided)
    queued: set[str] = field(default_factory=set)
    best_days: float | None = None  # the fastest measured in the cell so far
    pausing: bool = False

    def start(self, keys: tuple[str, ...], total: int, now: float) -> None:
        self.__init__()  # a new sweep: nothing carried over
        self.total, self.started_at, self.queued = total, now, set(keys)

    def predicted(self, low_days: dict[str, float]) -> None:
        self.low_days = dict(low_days)

    def settled(self, key: str, days: float | None = None, resumed: bool = False) -> None:
        """A combination that needs no trial now: resumed from the database (its days, if it has them), given
        up, or left unrun."""
        if key in self.queued:
            self.queued.discard(key)
            self.done += 1
            self.resumed += resumed
        self._best(days)

    def trial_started(self, key: str, label: str, now: float) -> None:
        self.current, self.current_label, self.current_since = key, label, now
        self.queued.discard(key)

    def finished(self, key: str, status: str, days: float | None, duration_s: float) -> None:
        if key == self.current:
            self.current = self.current_since = None
        if status == "stopped":  # killed: not settled, it runs again (from its start) on resume
            self.queued.add(key)
            return
        if key in self.queued:
            self.queued.discard(key)
        self.done += 1
        if duration_s > 0 and status not in ("cannot-win", "memory", "unavailable"):
            self.durations.append(duration_s)
        if status == "measured":
            self._best(days)

    def end(self, now: float) -> None:
        self.ended_at, self.current, self.current_since, self.pausing = now, None, None, False

    def _best(self, days: float | None) -> None:
        if days is not None and (self.best_days is None or days < self.best_days):
            self.best_days = days

    # --- what it says ------------------------------------------------------------------------------------

    def elapsed_s(self, now: float) -> float:
        if self.started_at is None:
            return 0.0
        return (self.ended_at if self.ended_at is not None else now) - self.started_at

    def trial_s(self, now: float) -> float | None:
        return None if self.current_since is None else now - self.current_since

    def can_still_win(self) -> int:
        """The queued combinations a guided search would still run: those with no prediction, or whose band's
        low end is faster than the best measured."""
        return sum(1 for k in self.queued
                   if self.best_days is None or k not in self.low_days or self.low_days[k] < self.best_days)

    def eta(self, now: float) -> tuple[float, bool] | None:
        """(seconds left, whether they start after the running trial): the mean of the trials finished times
        the queued combinations that can still win, plus what the mean leaves of the running trial, or after
        it where it has run longer than the mean. None before any trial finished and once the sweep ended."""
        if not self.durations or self.ended_at is not None:
            return None
        mean = sum(self.durations) / len(self.durations)
        rest = 0.0 if self.pausing else mean * self.can_still_win()
        trial = self.trial_s(now)
        if trial is None:
            return rest, False
        if trial >= mean:  # past the mean: how much longer it runs is not known
            return rest, True
        return mean - trial + rest, False

    def line(self, now: float) -> str:
        """'3/13 free-lunch 45s · 2m10s in · ~6m left', as markup (the label escaped)."""
        parts = [f"[b]{self.done}/{self.total}[/]" + (f" [dim]({self.resumed} resumed)[/]" if self.resumed else "")]
        trial = self.trial_s(now)
        if trial is not None:
            parts.append(f"{fmt.esc(self.current_label)} [b]{short_time(trial)}[/]")
        parts.append(f"{short_time(self.elapsed_s(now))} in")
        eta = self.eta(now)
        if self.pausing:
            parts.append("[yellow]pausing after this trial[/]")
        elif eta is not None:
            left, after = eta
            parts.append(("last trial" if after and not left else f"~{short_time(left)} left"
                          + (" after this trial" if after else "")))
        elif self.ended_at is None and self.queued and trial is not None:
            parts.append("[dim]time left: after a trial[/]")  # short: "(2 resumed)" shares the line at 80
        return " · ".join(parts)
