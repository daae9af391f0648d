"""The verdict on a ranking: what to buy for the budget and the deadline, and how sure that is.

The options are the ranked rows with a figure and a system (status 'ok'). Against the deadline each has
a band verdict (engine/plan/uncertainty.py). The verdict names the fastest option within budget and, when
that one is not sure (its band reaches past the deadline), the fastest sure one; when nothing within
budget meets the deadline, what meeting it would cost. The outcome is 'met' (an option within budget
meets the deadline even at its band's top), 'at risk' (the best within budget straddles it), 'missed',
'over budget' (no option is within budget), 'no deadline' or 'no results'. Text is the caller's: the app
and `rank` word it (tui_planner/views.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.plan.uncertainty import AT_RISK, MET

Row = dict[str, Any]


@dataclass(frozen=True)
class Verdict:
    outcome: str
    fastest: Row | None = None  # the fastest option within budget
    sure: Row | None = None  # the fastest option within budget that meets the deadline even at its band's top
    runner_up: Row | None = None  # the fastest option cheaper than the one to buy
    to_meet: Row | None = None  # nothing within budget meets: the cheapest option that does (over budget)
    cheapest: Row | None = None  # nothing within budget: the cheapest option there is
    as_good: Row | None = None  # a cheaper option whose interval overlaps the pick's so much it is as good a bet

    @property
    def buy(self) -> Row | None:
        """The option to buy: the sure one where there is one, else the fastest within budget."""
        return self.sure or self.fastest


def options(rows: list[Row]) -> list[Row]:
    return [r for r in rows if r.get("days") is not None and r.get("system") is not None]


def _fast(r: Row) -> tuple:
    return (r["days"], r["hardware_cost_usd"])


def decide(rows: list[Row], deadline: float | None) -> Verdict:
    usable = options(rows)
    if not usable:
        return Verdict("no results")
    in_budget = [r for r in usable if r["within_budget"]]
    if not in_budget:
        cheapest = min(usable, key=lambda r: (r["hardware_cost_usd"], r["days"]))
        sure = [r for r in usable if r.get("deadline_verdict") == MET]
        return Verdict("over budget", cheapest=cheapest,
                       to_meet=min(sure, key=lambda r: (r["hardware_cost_usd"], r["days"])) if sure else None)
    fastest = min(in_budget, key=_fast)
    if deadline is None:
        return Verdict("no deadline", fastest=fastest, runner_up=_runner_up(in_budget, fastest),
                       as_good=as_good_a_bet(in_budget, fastest))
    sure_in = [r for r in in_budget if r.get("deadline_verdict") == MET]
    sure = min(sure_in, key=_fast) if sure_in else None
    if sure is not None:
        return Verdict(MET, fastest=fastest, sure=sure, runner_up=_runner_up(in_budget, sure),
                       as_good=as_good_a_bet(in_budget, sure))
    over = [r for r in usable if not r["within_budget"] and r.get("deadline_verdict") == MET]
    to_meet = min(over, key=lambda r: (r["hardware_cost_usd"], r["days"])) if over else None
    outcome = AT_RISK if fastest.get("deadline_verdict") == AT_RISK else "missed"
    return Verdict(outcome, fastest=fastest, to_meet=to_meet, as_good=as_good_a_bet(in_budget, fastest))


def _runner_up(pool: list[Row], win: Row) -> Row | None:
    """What saving money costs: the fastest option cheaper than the one to buy (its own deadline verdict
    says whether it still makes it); None when nothing is cheaper."""
    cheaper = [r for r in pool if r is not win and r["hardware_cost_usd"] < win["hardware_cost_usd"]]
    return min(cheaper, key=_fast) if cheaper else None


def as_good_a_bet(pool: list[Row], pick: Row) -> Row | None:
    """The cheapest option cheaper than the pick whose interval overlaps the pick's so much that it is as good a
    bet: each one's figure lies inside the other's interval (the difference between them is smaller than what
    either is known to), and against a deadline it has the same verdict. None when no cheaper option is that
    close, or the pick has no interval (measured: its figure is known)."""
    lo, hi = pick.get("days_low"), pick.get("days_high")
    if lo is None or hi is None or lo == hi:
        return None
    close = []
    for r in pool:
        if r is pick or r["hardware_cost_usd"] >= pick["hardware_cost_usd"]:
            continue
        rlo, rhi = r.get("days_low"), r.get("days_high")
        if rlo is None or rhi is None:
            rlo = rhi = r["days"]
        if lo <= r["days"] <= hi and rlo <= pick["days"] <= rhi and \
                r.get("deadline_verdict") == pick.get("deadline_verdict"):
            close.append(r)
    return min(close, key=lambda r: (r["hardware_cost_usd"], r["days"])) if close else None
