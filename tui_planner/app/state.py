"""What the Plan screen is asking, as one frozen value, and the keyboard nudges that change it; and the
handle of the sweep the Benchmark screen runs, so quitting can stop it.

No Textual here: the nudges and the verdict are plain functions, so they are tested without an app.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field, replace
from typing import Any, Sequence

from engine.data.errors import PlannerError
from tui_planner import args as arg
from tui_planner import views

BUDGET_STEP_USD = 10_000
DEADLINE_STEP_DAYS = 10
SOURCE_CHOICES = (
    ("all", ("measured", "predicted", "paper")),
    ("measured+paper", ("measured", "paper")),
    ("measured+predicted", ("measured", "predicted")),
    ("measured", ("measured",)),
    ("paper's view", ("paper",)),  # its rows with their flags, its 2024 prices and machines
    ("predicted", ("predicted",)),
)


@dataclass(frozen=True)
class PlanState:
    model: str
    budget_usd: float = 50_000
    deadline_days: float | None = 100  # the paper's "100 days"
    gpus_allowed: tuple[str, ...] = ()  # empty: every GPU with a price
    lifespan_years: float = 5.0
    kwh_price_usd: float | None = None  # None: the presets' dated default (0: no energy cost)
    price_overrides: tuple[tuple[str, float], ...] = ()  # GPU or system id, USD
    sources: tuple[str, ...] = ("measured", "predicted", "paper")
    max_gpus: int = 8
    x_axis: str = "hardware"  # chart: "hardware" cost or cost per "experiment"
    today: dt.date | None = None  # when prices turn stale; None: today

    def request(self) -> Any:
        from engine.plan.ranking import RankRequest

        return RankRequest(
            model=self.model, budget_usd=self.budget_usd, deadline_days=self.deadline_days,
            gpus_allowed=self.gpus_allowed, max_gpus=self.max_gpus, lifespan_years=self.lifespan_years,
            kwh_price_usd=self.kwh_price_usd, price_overrides=dict(self.price_overrides), sources=self.sources,
            today=self.today,
        )


def nudge_budget(s: PlanState, steps: int) -> PlanState:
    return replace(s, budget_usd=float(max(BUDGET_STEP_USD, s.budget_usd + steps * BUDGET_STEP_USD)))


def nudge_deadline(s: PlanState, steps: int) -> PlanState:
    current = s.deadline_days if s.deadline_days is not None else 100
    return replace(s, deadline_days=float(max(DEADLINE_STEP_DAYS, current + steps * DEADLINE_STEP_DAYS)))


def cycle(options: Sequence[str], current: str, step: int) -> str:
    if current not in options:
        return options[0]
    return options[(options.index(current) + step) % len(options)]


def cycle_sources(s: PlanState, step: int = 1) -> PlanState:
    values = [v for _, v in SOURCE_CHOICES]
    i = values.index(s.sources) if s.sources in values else -1
    return replace(s, sources=values[(i + step) % len(values)])


def sources_label(sources: tuple[str, ...]) -> str:
    return next((name for name, v in SOURCE_CHOICES if v == sources), ",".join(sources))


def _checked(value: float, text: str, what: str, most: float, low_open: bool = True, unit: str = "",
             money: bool = False) -> float:
    """The value, if finite and in range (the command line's limits, tui_planner/args.py); else why not."""
    if not arg.number_in(value, 0, most, low_open):
        raise PlannerError(f"{what} must be {arg.range_text(0, most, low_open, unit, money)}, not {text!r}")
    return value


def parse_money(text: str, what: str) -> float:
    cleaned = text.strip().replace("$", "").replace(",", "").replace("_", "").lower()
    mult = 1.0
    if cleaned.endswith("k"):
        cleaned, mult = cleaned[:-1], 1e3
    elif cleaned.endswith("m"):
        cleaned, mult = cleaned[:-1], 1e6
    try:
        value = float(cleaned) * mult
    except ValueError:
        raise PlannerError(f"{what}: {text!r} is not an amount (e.g. 50000, 50k, $1.2m)") from None
    return _checked(value, text, what, arg.MAX_USD, money=True)  # 'inf', 'nan' and '1e308' too


def parse_years(text: str, what: str) -> float:
    try:
        value = float(text.strip())
    except ValueError:
        raise PlannerError(f"{what}: {text!r} is not a number of years (e.g. 5)") from None
    return _checked(value, text, what, arg.MAX_YEARS, unit="years")


OPTIONAL_MOST = {"days": arg.MAX_DAYS, "USD/kWh": arg.MAX_KWH_USD}


def parse_optional(text: str, what: str, unit: str) -> float | None:
    if not text.strip():
        return None
    try:
        value = float(text.strip())
    except ValueError:
        raise PlannerError(f"{what}: {text!r} is not a number of {unit} (leave empty for none)") from None
    return _checked(value, text, what, OPTIONAL_MOST.get(unit, arg.MAX_DAYS), low_open=unit != "USD/kWh",
                    unit=unit)


def parse_prices(text: str, known: Sequence[str]) -> tuple[tuple[str, float], ...]:
    """'h100=25000 ws4=12k' -> (("h100", 25000.0), ("ws4", 12000.0)): a GPU's price (per GPU) or a system's
    (without its GPUs); `known` is the ids of both."""
    out = []
    for item in text.replace(",", " ").split():
        gpu, sep, usd = item.partition("=")
        if not sep:
            raise PlannerError(f"prices: {item!r} should be ID=USD, e.g. h100=25000")
        if gpu not in known:
            raise PlannerError(f"prices: no GPU or system called {gpu!r}; known: {', '.join(known)}")
        out.append((gpu, parse_money(usd, f"price of {gpu}")))
    return tuple(out)


def verdict(rows: list[dict], s: PlanState) -> list[str]:
    """Which option to buy and how sure that is, and what the fastest and the runner-up trade: a few lines of rich markup, each value from a preset or the database in it escaped (the
    Plan screen shows it through app/text.content; the line under its table shows the highlighted option's
    prices). engine/plan/verdict.py decides; views.py words it."""
    from engine.plan.verdict import decide

    return views.verdict_lines(decide(rows, s.deadline_days), s.model, s.budget_usd, s.deadline_days, brief=True)


@dataclass
class SweepHandle:
    """The sweep the Benchmark screen is running, so quitting can stop it."""

    stop: Any
    pause: Any
    worker: Any = None
    labels: list[str] = field(default_factory=list)
