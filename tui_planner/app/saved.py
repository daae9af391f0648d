"""The last plan, kept between runs of the app: model, run, budget, deadline, lifespan, electricity price,
sources, GPU types and price overrides, in the user config directory ($XDG_CONFIG_HOME/tui-planner).

Written atomically (a temporary file in the same folder, then os.replace), so a crash or a second app never
leaves half a file. Read back bounded (a regular file only, opened without blocking so a FIFO cannot hang
the start, at most MAX_BYTES, nested at most MAX_DEPTH, no Infinity or NaN), then field by field against the
presets and the command line's limits: a field that is not valid here (a GPU type since removed, an amount
out of range) is left out and named; a file that is not ours, or not JSON, is ignored with a note. Never an
exception: the app opens on its defaults instead. No Textual here.
"""

from __future__ import annotations

import json
import math
import os
import stat
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
# A plan is a few hundred bytes and three levels deep: the bounds keep a wrong file (/dev/zero, a dataset, a
# file nested 200,000 deep) from using the memory or the recursion the app needs.
MAX_BYTES = 256 * 1024
MAX_DEPTH = 16
MAX_CONFIG_PATH = 4096


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
        except (ValueError, TypeError, AttributeError, KeyError, OverflowError):
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
    """The run flags the file holds, each in the command line's range (RunFlags.check); else an error."""
    if not isinstance(data, dict):
        raise TypeError(data)
    tokens, batch, seq = data.get("tokens"), data.get("batch"), data.get("seq_len")
    for v in (tokens, batch, seq):
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)):
            raise TypeError(v)
    for v in (batch, seq):
        if v is not None and v != int(v):
            raise ValueError(v)
    for v in (data.get("precision"), data.get("optimizer")):
        if v is not None and not isinstance(v, str):
            raise TypeError(v)
    flags = RunFlags(tokens=tokens, batch=batch, seq_len=seq, precision=data.get("precision"),
                     optimizer=data.get("optimizer"))
    flags.check()  # in range: only then made whole numbers
    return RunFlags(tokens=None if tokens is None else float(tokens),
                    batch=None if batch is None else int(batch), seq_len=None if seq is None else int(seq),
                    precision=flags.precision, optimizer=flags.optimizer)


class _NotFinite(ValueError):
    pass


def _no_constant(name: str) -> Any:
    raise _NotFinite(f"{name} is not a number a plan holds")


def _too_deep(text: str) -> bool:
    """Whether the JSON text nests deeper than MAX_DEPTH (brackets inside strings do not count)."""
    depth, in_string, escaped = 0, False, False
    for c in text:
        if in_string:
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
        elif c in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return True
        elif c in "]}":
            depth -= 1
    return False


def _read(target: Path) -> bytes:
    """The file's bytes: a regular file (following a link) of at most MAX_BYTES, opened without blocking (a
    FIFO with no writer must not hang the app's start); OSError or ValueError (why) else."""
    fd = os.open(target, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as f:
        mode = os.fstat(f.fileno()).st_mode
        if not stat.S_ISREG(mode):
            kind = ("a FIFO" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
                    else "a folder" if stat.S_ISDIR(mode) else "a special file")
            raise ValueError(f"{kind}, not a regular file")
        data = f.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise ValueError(f"larger than {MAX_BYTES // 1024} KiB, which no plan is")
    return data


def load(presets: Any, where: Path | None = None) -> tuple[dict[str, Any], str | None]:
    """What the saved plan says, as {"model", "model_config", "run", and PlanState fields}, valid with these
    presets (a model that is not one, or a run it cannot have, is left out), and a note for the person (plain
    text: the caller escapes it) when the file or some of its fields were ignored. ({}, None): no file."""
    target = where or path()
    try:
        text = _read(target).decode("utf-8")
    except FileNotFoundError:
        return {}, None
    except UnicodeDecodeError as e:
        return {}, f"Ignored the saved plan {target}: cannot read it (byte {e.start} is not UTF-8)"
    except OSError as e:
        return {}, f"Ignored the saved plan {target}: cannot read it ({e.strerror or e})"
    except ValueError as e:
        return {}, f"Ignored the saved plan {target}: {e}"
    if _too_deep(text):
        return {}, f"Ignored the saved plan {target}: nested deeper than a plan is ({MAX_DEPTH} levels)"
    try:
        data = json.loads(text, parse_constant=_no_constant)
    except _NotFinite as e:
        return {}, f"Ignored the saved plan {target}: not JSON ({e})"
    except (ValueError, RecursionError):
        return {}, f"Ignored the saved plan {target}: not JSON"
    if not isinstance(data, dict) or data.get("kind") != KIND or data.get("version") != VERSION:
        return {}, f"Ignored the saved plan {target}: not a plan this version of tui-planner wrote"
    out, bad = _fields(data, presets)
    config = data.get("model_config")
    model = data.get("model")
    if isinstance(config, str) and 0 < len(config) <= MAX_CONFIG_PATH and "\x00" not in config:
        out["model_config"] = config  # read again by the app (the config may have changed or gone)
    elif isinstance(model, str) and model in presets.models:
        out["model"] = model
    elif model is not None or config:
        bad.append("model")
    if "run" in data:
        try:
            flags = _run(data["run"])
            if "model" in out:
                st.plain_run(presets, out["model"], flags)  # a run the model cannot have: left out
            out["run"] = flags
        except (TypeError, ValueError, OverflowError, PlannerError):
            bad.append("run")
    note = None
    if bad:
        note = f"The saved plan's {', '.join(bad)} did not apply here (left at the defaults): {target}"
    return out, note


def apply(s: st.PlanState, fields: dict[str, Any]) -> st.PlanState:
    """The state with the saved PlanState fields (not model, model_config or run: the app applies those)."""
    return replace(s, **{k: v for k, v in fields.items() if k not in ("model", "model_config", "run")})
