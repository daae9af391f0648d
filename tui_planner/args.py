"""Numbers from the command line, checked when they are parsed: each flag's range is said in its error.

Each factory returns an argparse `type=` function; a value out of range raises ArgumentTypeError, which
argparse prints as `tui-planner CMD: error: argument --timeout: must be ...` and exits 2. `nan` and
`inf` are never numbers here, and sums of money stop at MAX_USD (a figure past it is a typo, and would
print as $inf). The app's typed values go through `number_in` with the same limits.
"""

from __future__ import annotations

import argparse
import math
from typing import Callable

MAX_USD = 1e9  # any price or budget
MAX_SECONDS = 1e6  # a timeout or a time limit: 11 days
MAX_DAYS = 1e6  # a deadline
MAX_YEARS = 100.0  # a hardware lifespan
MAX_KWH_USD = 100.0  # an electricity price per kWh
MAX_GPUS = 65_536  # GPUs or nodes in one request


def _num(x: float) -> str:
    """1e9 rather than 1e+09; 0.5 and 100 as themselves."""
    if x >= 1e5 and math.log10(x).is_integer():
        return f"1e{int(math.log10(x))}"
    return f"{x:,.0f}" if x >= 1e4 and x == int(x) else f"{x:g}"


def range_text(low: float, high: float, low_open: bool, unit: str = "", money: bool = False) -> str:
    """E.g. 'above 0 and at most 1e6 seconds', 'from $0 to $1e9'."""
    cur = "$" if money else ""
    tail = f" {unit}" if unit else ""
    if low_open:
        return f"above {cur}{_num(low)} and at most {cur}{_num(high)}{tail}"
    return f"from {cur}{_num(low)} to {cur}{_num(high)}{tail}"


def number_in(value: float, low: float, high: float, low_open: bool) -> bool:
    """Finite and within the range."""
    return math.isfinite(value) and (value > low if low_open else value >= low) and value <= high


def real(low: float, high: float, *, low_open: bool = False, unit: str = "", what: str = "a number",
         money: bool = False) -> Callable[[str], float]:
    """A finite number in [low, high] (or (low, high] with low_open)."""
    need = f"{what} {range_text(low, high, low_open, unit, money)}"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not number_in(value, low, high, low_open):
            raise argparse.ArgumentTypeError(f"must be {need}, not {text!r}")
        return value

    parse.__name__ = "number"
    return parse


def positive(high: float, unit: str = "", money: bool = False) -> Callable[[str], float]:
    """Above 0 and at most `high` (finite)."""
    return real(0, high, low_open=True, unit=unit, money=money, what="an amount" if money else "a number")


def non_negative(high: float, unit: str = "", money: bool = False) -> Callable[[str], float]:
    """0 or more, at most `high` (finite)."""
    return real(0, high, unit=unit, money=money, what="an amount" if money else "a number")


def fraction(low_open: bool = False) -> Callable[[str], float]:
    """A share between 0 and 1 (0 itself left out with low_open)."""
    return real(0, 1, low_open=low_open, what="a share")


def whole(least: int = 1, most: int = MAX_GPUS) -> Callable[[str], int]:
    """A whole number in [least, most]."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or not least <= value <= most:
            raise argparse.ArgumentTypeError(f"must be a whole number, at least {least} and at most {_num(most)}, "
                                             f"not {text!r}")
        return value

    parse.__name__ = "whole number"
    return parse


def gpu_price(text: str) -> tuple[str, float]:
    """`--price GPU=USD`: a GPU id and a price above $0 and at most MAX_USD."""
    gpu, sep, usd = text.partition("=")
    if not sep or not gpu.strip():
        raise argparse.ArgumentTypeError(f"takes GPU=USD (e.g. h100=25000), not {text!r}")
    try:
        value = positive(MAX_USD, money=True)(usd)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"the price in GPU=USD must be an amount {range_text(0, MAX_USD, True, money=True)}, not {text!r}"
        ) from None
    return gpu.strip(), value


gpu_price.__name__ = "GPU=USD"


# --- your training run (engine/data/runs.py) -----------------------------------------------------------

_SUFFIX = {"k": 1e3, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12}


def quantity(high: float, what: str, whole_number: bool = False) -> Callable[[str], float]:
    """A count like 100e9, 100B, 1M, 2.5T or 4096: above 0, at most `high`."""

    def parse(text: str) -> float:
        t = text.strip().replace("_", "").replace(",", "")
        scale = 1.0
        if t and t[-1] in _SUFFIX:
            t, scale = t[:-1], _SUFFIX[t[-1]]
        try:
            value = float(t) * scale
        except ValueError:
            value = math.nan
        if not number_in(value, 0, high, True) or (whole_number and value != int(value)):
            raise argparse.ArgumentTypeError(
                f"must be {what} above 0 and at most {_num(high)} (e.g. 100e9, 100B, 1M), not {text!r}")
        return int(value) if whole_number else value

    parse.__name__ = what
    return parse


RUN_EPILOG = """your run (a preset's or a config.json's; what you leave out stays the model's):
  --tokens 100e9 | --tokens-per-param 20 | --steps N   its length (one of them)
  --batch 512 | --batch-tokens 1M     global batch: sequences, or tokens a step
  --seq-len 4096  --precision bf16  --optimizer adamw
A config.json alone: sequence 2,048, about 1M tokens a step, 20 tokens a
parameter (compute-optimal), bf16, AdamW."""


def add_run_flags(p: argparse.ArgumentParser) -> None:
    """The flags that make the model's run yours; --model takes a preset id or a config.json path."""
    g = p.add_argument_group("your run (default: the model's own)")
    g.add_argument("--tokens", type=quantity(1e15, "a token count"), metavar="N",
                   help="tokens to train on, e.g. 100e9 or 100B")
    g.add_argument("--tokens-per-param", type=quantity(1e6, "tokens a parameter"), metavar="X",
                   help="tokens as a multiple of the parameters (20: compute-optimal)")
    g.add_argument("--steps", type=quantity(1e9, "a step count", whole_number=True), metavar="N",
                   help="optimizer steps (instead of --tokens)")
    g.add_argument("--batch", type=quantity(2**24, "a batch of sequences", whole_number=True), metavar="N",
                   help="global batch in sequences (images for an image model)")
    g.add_argument("--batch-tokens", type=quantity(2**46, "tokens a step"), metavar="N",
                   help="global batch in tokens, e.g. 1M (rounded to whole sequences)")
    g.add_argument("--seq-len", type=quantity(2**22, "a sequence length", whole_number=True), metavar="N",
                   help="tokens a sequence (keeps the tokens a step unless --batch says otherwise)")
    g.add_argument("--precision", choices=("bf16", "fp16", "fp32"), help="training precision")
    g.add_argument("--optimizer", choices=("adamw", "adam"), help="optimizer")


def run_flags(args: argparse.Namespace):
    from engine.data.runs import RunFlags

    return RunFlags(**{k: getattr(args, k, None) for k in ("tokens", "tokens_per_param", "steps", "batch",
                                                           "batch_tokens", "seq_len", "precision", "optimizer")})


def resolve_model(args: argparse.Namespace, presets):
    """(presets with the model on your run, that model) for `--model` and the run flags. A --seq-len past the
    context a config declares for rotary positions is planned, and said on stderr (past learned positions,
    model_for refuses it)."""
    import sys

    from engine.data.runs import model_for, position_note
    from tui_planner.format import visible

    flags = run_flags(args)
    presets, model = model_for(presets, args.model, flags)
    note = position_note(model, flags.seq_len)  # the run's model has the config of the one it was made from
    if note:
        print(f"note: {visible(note)}", file=sys.stderr)
    return presets, model
