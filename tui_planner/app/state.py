"""What the Plan screen is asking, as one frozen value, and the keyboard nudges that change it; and the
handle of the sweep the Benchmark screen runs, so quitting can stop it.

No Textual here: the nudges and the verdict are plain functions, so they are tested without an app.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Sequence

from engine.data.errors import PlannerError
from tui_planner import args as arg
from tui_planner import format as fmt

BUDGET_STEP_USD = 10_000
DEADLINE_STEP_DAYS = 10
SOURCE_CHOICES = (
    ("all", ("measured", "paper", "predicted")),
    ("measured+paper", ("measured", "paper")),
    ("measured", ("measured",)),
    ("paper", ("paper",)),
    ("predicted", ("predicted",)),
)


@dataclass(frozen=True)
class PlanState:
    model: str
    budget_usd: float = 50_000
    deadline_days: float | None = 100  # the paper's "100 days"
    gpus_allowed: tuple[str, ...] = ()  # empty: every GPU with a price
    lifespan_years: float = 5.0
    kwh_price_usd: float | None = None
    price_overrides: tuple[tuple[str, float], ...] = ()
    sources: tuple[str, ...] = ("measured", "paper", "predicted")
    max_gpus: int = 8
    x_axis: str = "hardware"  # chart: "hardware" cost or cost per "experiment"

    def request(self) -> Any:
        from engine.plan.ranking import RankRequest

        return RankRequest(
            model=self.model, budget_usd=self.budget_usd, deadline_days=self.deadline_days,
            gpus_allowed=self.gpus_allowed, max_gpus=self.max_gpus, lifespan_years=self.lifespan_years,
            kwh_price_usd=self.kwh_price_usd, price_overrides=dict(self.price_overrides), sources=self.sources,
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
    """'h100=25000 a100=12k' -> (("h100", 25000.0), ("a100", 12000.0))."""
    out = []
    for item in text.replace(",", " ").split():
        gpu, sep, usd = item.partition("=")
        if not sep:
            raise PlannerError(f"prices: {item!r} should be GPU=USD, e.g. h100=25000")
        if gpu not in known:
            raise PlannerError(f"prices: no GPU called {gpu!r}; known: {', '.join(known)}")
        out.append((gpu, parse_money(usd, f"price of {gpu}")))
    return tuple(out)


def _option(r: dict) -> str:
    """An option as markup: its GPU id comes from a preset or a database."""
    return f"{r['num_gpus']} x {fmt.esc(r['gpu'].upper())}"


def _basis(r: dict) -> str:
    """Where the winner's figure comes from, as plain text (the caller escapes it)."""
    src = (r.get("source") or "").replace("paper-table", "paper Table ")
    flag = r.get("plausibility")
    if flag in fmt.FLAG_MARK:
        return f"{src}: MFU {fmt.mfu(r['mfu'])} is {flag}, expect longer"
    if src == "predicted":
        band = (f" ({fmt.days(r['days_low'])}-{fmt.days(r['days_high'])} days)"
                if r.get("days_low") and r.get("days_high") else "")
        return f"predicted, not measured{band}"
    return f"{src}, MFU {fmt.mfu(r['mfu'])}" if r.get("mfu") is not None else src


def verdict(rows: list[dict], s: PlanState) -> list[str]:
    """Which option wins and why, and what the runner-up trades: a few lines of rich markup, each value
    from a preset or the database in it escaped (the Plan screen shows it through app/text.content)."""
    usable = [r for r in rows if r.get("days") is not None]
    if not usable:
        return [f"[b]No results for {fmt.esc(s.model)}[/b] on the allowed GPUs and sources.",
                "Widen the GPUs or sources (s), or benchmark it (3)."]
    fits = [r for r in usable if r["within_budget"] and r["within_deadline"]]
    lines: list[str] = []
    if not fits:
        in_budget = [r for r in usable if r["within_budget"]]
        if in_budget:
            fastest = min(in_budget, key=lambda r: r["days"])
            lines.append(f"[b yellow]Nothing meets the deadline[/] within {fmt.usd(s.budget_usd)}: the fastest is "
                         f"{_option(fastest)} at {fmt.days(fastest['days'])} days ({fmt.usd(fastest['hardware_cost_usd'])}).")
        else:
            cheapest = min(usable, key=lambda r: r["hardware_cost_usd"])
            lines.append(f"[b yellow]Nothing fits the budget[/]: the cheapest option is {_option(cheapest)} at "
                         f"{fmt.usd(cheapest['hardware_cost_usd'])} ({fmt.days(cheapest['days'])} days).")
        faster = [r for r in usable if r["within_deadline"]]
        if faster:
            need = min(faster, key=lambda r: r["hardware_cost_usd"])
            lines.append(f"Meeting the deadline needs {fmt.usd(need['hardware_cost_usd'])}: {_option(need)}, "
                         f"{fmt.days(need['days'])} days.")
        return lines
    win = min(fits, key=lambda r: (r["days"], r["hardware_cost_usd"]))
    lines.append(f"[b green]Buy {_option(win)}[/] ({fmt.usd(win['hardware_cost_usd'])}): "
                 f"{fmt.days(win['days'])} days, {fmt.usd(win['cost_per_experiment_usd'])}/run; fastest that fits.")
    lines.append(f"[dim]{fmt.esc(_basis(win))}{'; ' + fmt.esc(win['config']) if win.get('config') else ''}.[/]")
    others = [r for r in fits if r is not win]
    if others:
        cheaper = [r for r in others if r["hardware_cost_usd"] < win["hardware_cost_usd"]]
        runner = min(cheaper or others, key=lambda r: (r["days"], r["hardware_cost_usd"]))
        saved = win["hardware_cost_usd"] - runner["hardware_cost_usd"]
        slower = runner["days"] - win["days"]
        trade = (f"saves {fmt.usd(saved)}" if saved > 0 else f"costs {fmt.usd(-saved)} more") + (
            f" but takes {fmt.days(slower)} more days" if slower > 0 else "")
        lines.append(f"Runner-up {_option(runner)}: {trade}.")
    return lines


@dataclass
class SweepHandle:
    """The sweep the Benchmark screen is running, so quitting can stop it."""

    stop: Any
    pause: Any
    worker: Any = None
    labels: list[str] = field(default_factory=list)
