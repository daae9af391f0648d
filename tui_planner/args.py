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
