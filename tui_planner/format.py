"""How numbers read on screen: the same in the CLI's tables and the app; and how text from outside is shown.

Text from outside (a database cell, a preset, a file name, a flag, an exception's message) is data: it
goes into rich markup only through `esc`, into a table cell or a widget as `text` (a rich Text, never
parsed), and never reaches the terminal with a control character in it (`visible`). Results files get
shared: a cell holding `[/]` or an escape sequence must show as those characters, not act.
"""

from __future__ import annotations

import csv
import io
import json
import re
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.text import Text

# C0 and C1 controls (escape sequences, carriage return, backspace, bell...) and the bidirectional
# overrides that reorder what a terminal shows. A tab is harmless and stays.
_CONTROL = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r"}


def visible(value: Any, newlines: bool = False) -> str:
    """A value as text a terminal shows and never acts on: each control character written out as an
    escape (ESC as \\x1b, a carriage return as \\r); a newline kept where the text may run over lines
    (`newlines`), written \\n where it may not (a table cell, a title)."""

    def sub(m: re.Match) -> str:
        c = m.group()
        if c == "\n" and newlines:
            return c
        return _NAMED.get(c) or (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")

    return _CONTROL.sub(sub, str(value))


def csv_text(fields: Any, rows: Any) -> str:
    """Rows as CSV (a header of `fields`, then one line a row) with no raw control character anywhere: the
    same text whether it lands on a terminal (an OSC 52 clipboard write, a clear-screen, a title or a
    hyperlink in a shared results file must not act) or in a file for a program. Each control character is
    written out as `visible` writes it, a newline as \\n and a tab as \\t, so a cell stays one line."""

    def clean(value: Any) -> Any:
        return value if value is None or isinstance(value, (bool, int, float)) else \
            visible(value).replace("\t", "\\t")

    out = io.StringIO()
    w = csv.writer(out)
    w.writerow([clean(f) for f in fields])
    w.writerows([clean(r.get(f)) for f in fields] for r in rows)
    return out.getvalue()


def esc(value: Any, newlines: bool = False) -> str:
    """A value from outside, to put inside rich markup of ours: shown verbatim, never read as markup."""
    return escape(visible(value, newlines))


def text(value: Any, style: str = "", newlines: bool = False) -> Text:
    """A value from outside as a rich Text (a table cell, a widget's label): never parsed as markup."""
    return Text(visible(value, newlines), style=style)


def cell(markup: str) -> Text:
    """Rich markup of ours (values in it through `esc`) as a one-line Text: a DataTable cell, read as the
    table would read a str cell, less emoji codes."""
    t = Text.from_markup(markup, emoji=False, end="")
    t.no_wrap = True
    return t


def console(**kw: Any) -> Console:
    """The console the commands print through: markup is ours (values go in through `esc`), and no
    `:name:` in a value turns into an emoji."""
    return Console(emoji=False, **kw)


FLAG_MARK = {"implausible": "!", "impossible": "!!"}
# A predicted MFU held at its GPU generation's plausible line (engine/predict/predictor.py): the model came
# out faster than any synchronized training on that generation, so the figure is the line, not an estimate.
CAPPED_MARK = "^"


# Past this many days (2,700 years) a figure is a broken row or a joke, not a plan: shown in scientific
# notation, never as hundreds of digits (a shared file may say 1e308 days).
HUGE_DAYS = 1e6


def days(value: float | None) -> str:
    if value is None:
        return "—"
    if value >= HUGE_DAYS:
        return f"{value:.1e}"
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.1f}" if value >= 1 else f"{value:.2g}"


def mfu(value: float | None, flag: str | None = None, capped: bool = False) -> str:
    """'56%', '65%!' (above its generation's plausible line), '60%^' (a prediction capped at that line)."""
    if value is None:
        return "—"
    text = f"{value:.0%}" if value >= 0.1 else f"{value:.1%}"
    if flag in FLAG_MARK:
        return f"{text}{FLAG_MARK[flag]}"
    return f"{text}{CAPPED_MARK}" if capped else text


def duration(seconds: float) -> str:
    """Wall time as minutes and seconds, e.g. '17m 47s'."""
    return f"{int(seconds // 60)}m {seconds % 60:02.0f}s"


def usd(value: float | None) -> str:
    if value is None:
        return "—"
    return f"${value:.2e}" if abs(value) >= 1e15 else f"${value:,.0f}"  # no hundreds of digits


def methods(row: dict) -> str:
    """One short string for a trial's method settings: e.g. 'FL ckpt zero3 off'."""
    if row.get("free_lunch") is None and row.get("sharding") is None:
        return "?"
    parts = ["FL" if row.get("free_lunch") else "naive"]
    if row.get("activation_checkpointing"):
        parts.append("ckpt")
    elif row.get("activation_checkpointing") is None and row.get("free_lunch"):
        parts.append("ckpt?")
    sharding = row.get("sharding")
    if sharding and sharding != "none":
        parts.append(sharding)
    elif sharding is None and row.get("free_lunch"):
        parts.append("shard?")
    if row.get("offloading"):
        parts.append("offload")
    if row.get("fused"):
        parts.append("fused")
    if row.get("fp8"):  # another training's maths: marked wherever it is shown (SETTING_LEGEND says so)
        parts.append(f"fp8{NUMERICS_SHORT}")
    return " ".join(parts)


def change(fraction: float) -> str:
    """A signed whole percentage, e.g. '+19%', '-6%'; a change that rounds to nothing reads '+0%', never '-0%'."""
    return f"{round(fraction, 2) + 0.0:+.0%}"


def dense_mask(row: dict) -> bool:
    """A measured time from compiled causal attention that got a dense mask (the engine before its
    2026-11-23 fixes, recorded in provenance): today's engine is faster there."""
    text = row.get("provenance")
    if not text or "causal_mask" not in str(text):
        return False
    try:
        prov = json.loads(text) if isinstance(text, str) else text
    except ValueError:
        return False
    return isinstance(prov, dict) and prov.get("causal_mask") == "dense mask"


def compact_days(value: float) -> str:
    """Days in at most 4 characters, for a band: 4.1, 28, 182, 1.8k; '>1M' from a million days."""
    if value >= 999_950:
        return ">1M"
    if value >= 1000:
        return f"{value / 1000:.1f}k"
    if value < 1 and float(f"{value:.1g}") < 1:
        return f"{value:.1g}"
    return f"{value:.0f}" if round(value, 1) >= 10 else f"{value:.1f}"


def band(low: float | None, high: float | None) -> str:
    """A figure's low-high band in at most 7 characters, '28-47', '2.4-4.2', '515-871', '1k-2k'; '' when it
    has none (a measured or paper figure)."""
    if low is None or high is None or low == high:
        return ""

    def c(v: float) -> str:
        return f"{v / 1000:.0f}k" if 999.5 <= v < 999_500 else compact_days(v)

    lo, hi = c(low), c(high)
    return lo if lo == hi else f"{lo}-{hi}"


def date(value: Any) -> str:
    """A price's date as YYYY-MM-DD; '—' for none."""
    if value is None:
        return "—"
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


def short_source(text: Any, limit: int = 48) -> str:
    """A price's source cut to `limit` characters at a word, for a line that also carries its date."""
    s = " ".join(str(text or "").split())
    if len(s) <= limit:
        return s
    cut = s[: limit - 1].rsplit(" ", 1)[0].rstrip(",;:(")
    return cut + "…"


STALE_MARK = "°"


def priced(usd_value: float | None, when: Any, stale: bool) -> str:
    """'$27,500 (2026-05-04)', with ', stale' when the price is older than 12 months."""
    return f"{usd(usd_value)} ({date(when)}{', stale' if stale else ''})"


NUMERICS_MARK = " (changes numerics)"
NUMERICS_SHORT = "≈"  # in a table's narrow column, with NUMERICS_NOTE under the table
NUMERICS_NOTE = "≈ changes numerics: FP8 matrix products, not bf16's (tui-planner numerics measures the loss)"


def setting(label: str, changes_numerics: bool, short: bool = False) -> str:
    """A setting's label as shown: one that changes the maths (fp8: its matrix products in FP8, glossary
    'changes numerics') says so beside its name, wherever it is shown, so a faster row is never read as the
    same training. short: a table's mark (≈), which NUMERICS_NOTE explains under the table."""
    if not changes_numerics:
        return label
    return f"{label}{NUMERICS_SHORT}" if short else f"{label}{NUMERICS_MARK}"
