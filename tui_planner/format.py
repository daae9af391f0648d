"""How numbers read on screen: the same in the CLI's tables and the app."""

from __future__ import annotations

import json

FLAG_MARK = {"implausible": "!", "impossible": "!!"}


def days(value: float | None) -> str:
    if value is None:
        return "—"
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.1f}" if value >= 1 else f"{value:.2g}"


def mfu(value: float | None, flag: str | None = None) -> str:
    if value is None:
        return "—"
    text = f"{value:.0%}" if value >= 0.1 else f"{value:.1%}"
    return f"{text}{FLAG_MARK[flag]}" if flag in FLAG_MARK else text


def duration(seconds: float) -> str:
    """Wall time as minutes and seconds, e.g. '17m 47s'."""
    return f"{int(seconds // 60)}m {seconds % 60:02.0f}s"


def usd(value: float | None) -> str:
    return "—" if value is None else f"${value:,.0f}"


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
