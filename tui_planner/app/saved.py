"""The last plan, kept between runs of the app: model, run, budget, deadline, lifespan, electricity price,
sources, GPU types and price overrides, in the user config directory ($XDG_CONFIG_HOME/tui-planner).

Written atomically (a temporary file in the same folder, then os.replace), so a crash or a second app never
leaves half a file. Read back field by field against the presets and the command line's limits: a field that
is not valid here (a GPU type since removed, an amount out of range) is left out and named; a file that is not
ours, or not JSON, is ignored with a note. Never an exception: the app opens on its defaults instead.
No Textual here.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from engine.data.errors import PlannerError
from engine.data.runs import RunFlags
from tui_planner import args as arg
from tui_planner.app import state as st

KIND = "tui-planner last plan"
VERSION = 1


def path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "tui-planner" / "last-plan.json"


def to_json(s: st.PlanState, model_config: str | None = None) -> dict[str, Any]:
    return {
        "kind": KIND, "version": VERSION, "model": s.model, "model_config": model_config,
        "run": {"tokens": s.run.tokens, "batch": s.run.batch, "seq_len": s.run.seq_len,
                "precision": s.run.precision, "optimizer": s.run.optimizer},
        "budget_usd": s.budget_usd, "deadline_days": s.deadline_days, "lifespan_years": s.lifespan_years,
        "kwh_price_usd": s.kwh_price_usd, "sources": list(s.sources), "gpus_allowed": list(s.gpus_allowed),
        "price_overrides": {k: v for k, v in s.price_overrides},
    }


def save(s: st.PlanState, model_config: str | None = None, where: Path | None = None) -> None:
    """Write the plan atomically. Raises OSError where the folder cannot be written (the caller says so)."""
    target = where or path()
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".last-plan.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(to_json(s, model_config), f, indent=1)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _number(value: Any, most: float, low_open: bool = True) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not arg.number_in(value, 0, most, low_open):
        raise ValueError(value)
    return float(value)


def _optional(value: Any, most: float, low_open: bool = True) -> float | None:
    return None if value is None else _number(value, most, low_open)


def _fields(data: dict[str, Any], presets: Any) -> tuple[dict[str, Any], list[str]]:
    """The PlanState fields the file holds that are valid with these presets, and the names of the others."""
    out: dict[str, Any] = {}
    bad: list[str] = []
    known_prices = {*presets.gpus, *presets.systems}
    source_sets = {v for _, v in st.SOURCE_CHOICES}
    readers = {
        "budget_usd": lambda v: _number(v, arg.MAX_USD),
        "deadline_days": lambda v: _optional(v, arg.MAX_DAYS),
        "lifespan_years": lambda v: _number(v, arg.MAX_YEARS),
        "kwh_price_usd": lambda v: _optional(v, arg.MAX_KWH_USD, low_open=False),
        "sources": lambda v: _member(tuple(v), source_sets),
        "gpus_allowed": lambda v: tuple(sorted(_each(v, presets.gpus))),
        "price_overrides": lambda v: tuple((k, _number(usd, arg.MAX_USD)) for k, usd in v.items()
                                           if _member(k, known_prices)),
    }
    for name, read in readers.items():
        if name not in data:
            continue
        try:
            out[name] = read(data[name])
        except (ValueError, TypeError, AttributeError, KeyError):
            bad.append(name.split("_")[0])
    return out, bad


def _member(value: Any, allowed: Any) -> Any:
    if value not in allowed:
        raise ValueError(value)
    return value


def _each(values: Any, allowed: Any) -> list[str]:
    if not isinstance(values, list):
        raise TypeError(values)
    return [_member(v, allowed) for v in values]


def _run(data: Any) -> RunFlags:
    if not isinstance(data, dict):
        raise TypeError(data)
    tokens, batch, seq = data.get("tokens"), data.get("batch"), data.get("seq_len")
    for v in (tokens, batch, seq):
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
            raise TypeError(v)
    for v in (data.get("precision"), data.get("optimizer")):
        if v is not None and not isinstance(v, str):
            raise TypeError(v)
    return RunFlags(tokens=None if tokens is None else float(tokens),
                    batch=None if batch is None else int(batch), seq_len=None if seq is None else int(seq),
                    precision=data.get("precision"), optimizer=data.get("optimizer"))


def load(presets: Any, where: Path | None = None) -> tuple[dict[str, Any], str | None]:
    """What the saved plan says, as {"model", "model_config", "run", and PlanState fields}, valid with these
    presets (a model that is not one, or a run it cannot have, is left out), and a note for the person (plain
    text: the caller escapes it) when the file or some of its fields were ignored. ({}, None): no file."""
    target = where or path()
    try:
        text = target.read_text()
    except FileNotFoundError:
        return {}, None
    except (OSError, UnicodeDecodeError) as e:
        return {}, f"Ignored the saved plan {target}: cannot read it ({e})"
    try:
        data = json.loads(text)
    except ValueError:
        return {}, f"Ignored the saved plan {target}: not JSON"
    if not isinstance(data, dict) or data.get("kind") != KIND or data.get("version") != VERSION:
        return {}, f"Ignored the saved plan {target}: not a plan this version of tui-planner wrote"
    out, bad = _fields(data, presets)
    config = data.get("model_config")
    model = data.get("model")
    if isinstance(config, str) and config:
        out["model_config"] = config  # read again by the app (the config may have changed or gone)
    elif isinstance(model, str) and model in presets.models:
        out["model"] = model
    elif model is not None:
        bad.append("model")
    if "run" in data:
        try:
            flags = _run(data["run"])
            if "model" in out:
                st.plain_run(presets, out["model"], flags)  # a run the model cannot have: left out
            out["run"] = flags
        except (TypeError, ValueError, PlannerError):
            bad.append("run")
    note = None
    if bad:
        note = f"The saved plan's {', '.join(bad)} did not apply here (left at the defaults): {target}"
    return out, note


def apply(s: st.PlanState, fields: dict[str, Any]) -> st.PlanState:
    """The state with the saved PlanState fields (not model, model_config or run: the app applies those)."""
    return replace(s, **{k: v for k, v in fields.items() if k not in ("model", "model_config", "run")})
