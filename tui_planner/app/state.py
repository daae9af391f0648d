"""What the Plan screen is asking, as one frozen value, and the keyboard nudges that change it; and the
handle of the sweep the Benchmark screen runs, so quitting can stop it.

No Textual here: the nudges and the verdict are plain functions, so they are tested without an app.
"""

from __future__ import annotations

import datetime as dt
import re
import threading
from dataclasses import dataclass, field, replace
from typing import Any, Sequence

from engine.data.errors import PlannerError
from engine.data.runs import MAX_BATCH, MAX_SEQ, MAX_TOKENS, RunFlags
from tui_planner import args as arg
from tui_planner import views

BUDGET_STEP_USD = 10_000
DEADLINE_STEP_DAYS = 10
TOKENS_FACTOR = 2  # t / T: twice or half the tokens
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
    # Your run (engine/data/runs.py): tokens, global batch (sequences), sequence length, and the precision
    # and optimizer --precision / --optimizer gave; None keeps the model's own. `model` stays the preset.
    run: RunFlags = RunFlags()

    def request(self, on_run: Any = None) -> Any:
        """The ranking request; `on_run` is the model on this state's run (run_model), whose id and steps it
        asks for (a run of another length keeps the id: its days scale with the steps)."""
        from engine.plan.ranking import RankRequest

        return RankRequest(
            model=self.model if on_run is None else on_run.id, budget_usd=self.budget_usd,
            deadline_days=self.deadline_days, gpus_allowed=self.gpus_allowed, max_gpus=self.max_gpus,
            lifespan_years=self.lifespan_years, kwh_price_usd=self.kwh_price_usd,
            price_overrides=dict(self.price_overrides), sources=self.sources, today=self.today,
            steps=None if on_run is None else on_run.training.steps,
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


# --- your run -----------------------------------------------------------------------------------------


def run_model(presets: Any, s: PlanState) -> tuple[Any, Any]:
    """(the presets with the model on the state's run, that model): engine.data.runs.model_for. Raises
    PlannerError (RunError) for a run the model cannot have (tokens for an image model, say)."""
    from engine.data.runs import model_for

    return model_for(presets, s.model, s.run)


def plain_run(presets: Any, model_id: str, flags: RunFlags | None) -> RunFlags:
    """The command line's run as the Plan screen's fields hold it: --steps and --tokens-per-param become the
    tokens they come to, --batch-tokens the batch in sequences (the same model either way); --precision and
    --optimizer stay. Raises PlannerError for a run that cannot be."""
    from engine.data.runs import model_for, tokens

    flags = flags or RunFlags()
    _, model = model_for(presets, model_id, flags)
    if flags.steps is not None or flags.tokens_per_param is not None:
        flags = replace(flags, tokens=float(tokens(model)), steps=None, tokens_per_param=None)
    if flags.batch_tokens is not None:
        flags = replace(flags, batch=model.training.batch_size, batch_tokens=None)
    return flags


def _quantity(text: str, what: str, most: float, whole_number: bool, example: str) -> float | None:
    import argparse

    t = text.strip()
    if not t:
        return None
    if t[-1] in "mbgt":  # 100b, 1.5t, 1m as people type them
        t = t[:-1] + t[-1].upper()
    try:
        return arg.quantity(most, what, whole_number)(t)
    except argparse.ArgumentTypeError:
        need = "a whole number" if whole_number else "a number"
        raise PlannerError(f"{what.split()[-1]}: {text!r} is not {need} above 0 and at most {arg._num(most)} "
                           f"(e.g. {example}; empty: the model's own)") from None


def parse_tokens(text: str) -> float | None:
    """'100e9', '100B', '1.5T', '300,000,000,000' -> tokens; empty -> None (the model's own)."""
    return _quantity(text, "tokens", MAX_TOKENS, False, "100e9, 100B, 1.5T")


def parse_batch(text: str) -> int | None:
    """The global batch in sequences (images, for an image model); empty -> None (the model's own)."""
    value = _quantity(text, "batch", MAX_BATCH, True, "512, 1k")
    return None if value is None else int(value)


def parse_seq_len(text: str) -> int | None:
    """Tokens a sequence; empty -> None (the model's own)."""
    value = _quantity(text, "sequence", MAX_SEQ, True, "2048, 4096")
    return None if value is None else int(value)


def tokens_text(value: float | None) -> str:
    """Tokens as the field shows them, read back exactly by parse_tokens: 300B, 1.5T, 52.5B, 1234567."""
    if value is None:
        return ""
    for div, unit in ((1e12, "T"), (1e9, "B"), (1e6, "M")):
        short = f"{value / div:.12g}"
        if value >= div and "e" not in short and float(short) * div == value:
            return f"{short}{unit}"
    return f"{value:.0f}" if value == int(value) else f"{value:g}"


def tokens_short(value: float) -> str:
    """Tokens in three figures, for a hint: 300B, 23.5B, 1.5T."""
    from engine.data.runs import short_count

    return short_count(value)


def with_tokens(s: PlanState, value: float | None) -> PlanState:
    """The run on `value` tokens (None: the model's own length)."""
    return replace(s, run=replace(s.run, tokens=value, steps=None, tokens_per_param=None))


def with_batch(s: PlanState, value: int | None) -> PlanState:
    return replace(s, run=replace(s.run, batch=value, batch_tokens=None))


def with_seq_len(s: PlanState, value: int | None) -> PlanState:
    return replace(s, run=replace(s.run, seq_len=value))


def nudge_tokens(s: PlanState, on_run: Any, factor: float) -> PlanState:
    """Twice (or half, ...) the tokens of the run now (`on_run`: the model on it), at least one step's and at
    most MAX_TOKENS; an image model's run is counted in steps, so it keeps its length."""
    from engine.data.runs import is_image, tokens, units_per_sample

    if is_image(on_run):
        return s
    step = on_run.training.batch_size * units_per_sample(on_run)
    return with_tokens(s, float(min(MAX_TOKENS, max(step, tokens(on_run) * factor))))


# A price whose source says first that the card is second-hand: used, refurbished, or off the secondary
# market ("used: ...", "estimate: secondary-market range ..."). A new card's source may mention used prices
# later on ("new retail ... (used $1,400-1,700)"): that is not its price.
SECOND_HAND = re.compile(r"^\s*(?:estimate:\s*)?(?:used|refurbished|secondary[- ]market)\b", re.IGNORECASE)
USED_MARK = "u"


def second_hand(source: Any) -> bool:
    """Whether a price's source says it is for a used or refurbished card."""
    return bool(source) and bool(SECOND_HAND.search(str(source)))


def second_hand_gpus(presets: Any, s: PlanState) -> set[str]:
    """The GPU types whose price the ranking uses is second-hand (not your own price, not the paper's)."""
    yours = dict(s.price_overrides)
    return {g.id for g in presets.gpus.values()
            if g.id not in yours and s.sources != ("paper",) and g.price and second_hand(g.price.source)}


def toggle_second_hand(s: PlanState, presets: Any) -> tuple[PlanState, bool]:
    """Leave out the GPU types priced second-hand, or bring them back; (the state, whether they are out)."""
    used = second_hand_gpus(presets, s)
    allowed = set(s.gpus_allowed) or set(presets.gpus)
    out = bool(used & allowed)
    allowed = allowed - used if out else allowed | used
    return replace(s, gpus_allowed=() if allowed >= set(presets.gpus) else tuple(sorted(allowed))), out


def run_line(on_run: Any) -> str:
    """The run a ranking answers for, in words (plain text: the caller escapes it)."""
    from engine.data.runs import describe_run

    return describe_run(on_run)


def verdict(rows: list[dict], s: PlanState) -> list[str]:
    """Which option to buy and how sure that is, and what the fastest and the runner-up trade: a few lines of rich markup, each value from a preset or the database in it escaped (the
    Plan screen shows it through app/text.content; the line under its table shows the highlighted option's
    prices). engine/plan/verdict.py decides; views.py words it."""
    from engine.plan.verdict import decide

    return views.verdict_lines(decide(rows, s.deadline_days), s.model, s.budget_usd, s.deadline_days, brief=True)


@dataclass
class SweepHandle:
    """The sweep the Benchmark screen is running, so quitting (or a lost terminal: app/hangup.py) can stop it:
    `done` is set when the sweep's thread returns, `store` is the database it writes."""

    stop: Any
    pause: Any
    worker: Any = None
    labels: list[str] = field(default_factory=list)
    done: Any = field(default_factory=threading.Event)
    store: Any = None
