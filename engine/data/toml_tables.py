"""Reading preset and config files: bounded, parsed once per content, merged in order, and read back through
typed tables whose every failure names the file that set the key, the key and what was expected
(engine.data.errors.PresetError). What the tables mean is engine/data/presets.py's."""

from __future__ import annotations

import collections
import math
import pickle
import sys
import threading
import datetime as dt
from pathlib import Path
from typing import Any, Iterable, Mapping

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

from engine.data.errors import PresetError


class Origins:
    """Which file set each key path, so an error can name the file a user must edit."""

    def __init__(self) -> None:
        self._by_path: dict[tuple[str, ...], str] = {}

    def set(self, path: tuple[str, ...], file: str) -> None:
        self._by_path[path] = file

    def file_for(self, path: tuple[str, ...]) -> str:
        while path:
            if path in self._by_path:
                return self._by_path[path]
            path = path[:-1]
        return "presets"


def merge(into: dict, new: Mapping, path: tuple[str, ...], origins: Origins, file: str) -> None:
    for key, value in new.items():
        here = path + (str(key),)
        if isinstance(value, Mapping) and isinstance(into.get(key), dict):
            merge(into[key], value, here, origins, file)
        else:
            into[key] = copy_value(value)
            mark(value, here, origins, file)


def copy_value(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: copy_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [copy_value(v) for v in value]
    return value


def mark(value: Any, path: tuple[str, ...], origins: Origins, file: str) -> None:
    origins.set(path, file)
    if isinstance(value, Mapping):
        for k, v in value.items():
            mark(v, path + (str(k),), origins, file)


class Table:
    """Typed access to one TOML table; every failure is a PresetError naming file and key."""

    def __init__(self, data: Mapping, path: tuple[str, ...], origins: Origins):
        if not isinstance(data, Mapping):
            raise PresetError(origins.file_for(path), ".".join(path), "a table", data)
        self.data, self.path, self.origins = data, path, origins
        self.used: set[str] = set()

    def _err(self, key: str, expected: str, got: object = None) -> PresetError:
        full = self.path + (key,)
        return PresetError(self.origins.file_for(full), ".".join(full), expected, got)

    def has(self, key: str) -> bool:
        return key in self.data

    def raw(self, key: str, expected: str, default: Any = ...) -> Any:
        self.used.add(key)
        if key not in self.data:
            if default is ...:
                file = self.origins.file_for(self.path)
                raise PresetError(file, ".".join(self.path + (key,)), f"{expected} (the key is missing)")
            return default
        return self.data[key]

    def str(self, key: str, default: Any = ..., choices: Iterable[str] | None = None) -> str:
        choices = tuple(choices) if choices else None
        expected = f"one of {', '.join(repr(c) for c in choices)}" if choices else "a string"
        value = self.raw(key, expected, default)
        if value is default and default is not ...:
            return value
        if not isinstance(value, str) or (choices and value not in choices) or (not choices and not value.strip()):
            raise self._err(key, expected if choices else "a non-empty string", value)
        return value

    def number(self, key: str, default: Any = ..., positive: bool = True, allow_zero: bool = False) -> float:
        expected = "a positive number" if positive and not allow_zero else "a number >= 0" if positive else "a number"
        value = self.raw(key, expected, default)
        if value is default and default is not ...:
            return value
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise self._err(key, expected, value)
        if positive and (value < 0 or (value == 0 and not allow_zero)):
            raise self._err(key, expected, value)
        return float(value)

    def int(self, key: str, default: Any = ...) -> int:
        value = self.raw(key, "a positive integer", default)
        if value is default and default is not ...:
            return value
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise self._err(key, "a positive integer", value)
        return value

    def bool(self, key: str, default: Any = ...) -> bool:
        value = self.raw(key, "true or false", default)
        if not isinstance(value, bool):
            raise self._err(key, "true or false", value)
        return value

    def date(self, key: str) -> dt.date:
        value = self.raw(key, "a date like 2024-09-21")
        if isinstance(value, dt.datetime):
            return value.date()
        if isinstance(value, dt.date):
            return value
        raise self._err(key, "a date like 2024-09-21 (TOML date, no quotes)", value)

    def table(self, key: str, default: Any = ...) -> "Table | Any":
        value = self.raw(key, "a table", default)
        if value is default and default is not ...:
            return value
        if not isinstance(value, Mapping):
            raise self._err(key, "a table", value)
        return Table(value, self.path + (key,), self.origins)

    def finish(self) -> None:
        extra = sorted(set(self.data) - self.used)
        if extra:
            raise self._err(extra[0], f"no such key here (known keys: {', '.join(sorted(self.used))})")


# Preset and config files are a few kilobytes; a bound keeps a wrong path (/dev/zero, a dataset) from
# being read into memory, and nesting beyond any real file's from exhausting the parser's recursion.
MAX_FILE_BYTES = 4 * 2**20


def read_bounded(path: Path) -> bytes:
    """The bytes of a regular file of at most MAX_FILE_BYTES; OSError (or ValueError: too large) else."""
    if not path.is_file():
        raise ValueError("a regular file" if path.exists() else "an existing file")
    with open(path, "rb") as f:
        data = f.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise ValueError(f"a file of at most {MAX_FILE_BYTES // 2**20} MiB")
    return data


_PARSED: "collections.OrderedDict[bytes, bytes]" = collections.OrderedDict()  # file bytes -> pickled parse
_PARSED_LOCK = threading.Lock()  # the app reads presets from worker threads too


def parse_toml(data: bytes) -> dict:
    """tomllib's parse of these bytes, a fresh copy each call: the presets are read again for every command
    the app or the CLI runs, and parsing them (~13 ms) is most of it. A file whose bytes changed is parsed
    again; a copy from the pickle costs a tenth of a parse."""
    with _PARSED_LOCK:
        saved = _PARSED.get(data)
        if saved is not None:
            _PARSED.move_to_end(data)
    if saved is not None:
        return pickle.loads(saved)
    parsed = tomllib.loads(data.decode("utf-8"))
    try:
        saved = pickle.dumps(parsed)
    except RecursionError:  # nested deeper than pickle goes: parsed again each time, as before
        return parsed
    with _PARSED_LOCK:
        _PARSED[data] = saved
        while len(_PARSED) > 32:
            _PARSED.popitem(last=False)
    return parsed


def load_toml(path: Path) -> dict:
    try:
        return parse_toml(read_bounded(path))
    except UnicodeDecodeError as e:
        raise PresetError(str(path), None, f"UTF-8 text (byte {e.start} is not UTF-8)") from None
    except tomllib.TOMLDecodeError as e:
        raise PresetError(str(path), None, f"valid TOML ({e})") from None
    except RecursionError:
        raise PresetError(str(path), None, "TOML nested no deeper than a preset needs") from None
    except ValueError as e:
        raise PresetError(str(path), None, str(e) if str(path) else "a TOML file") from None
    except OSError as e:
        raise PresetError(str(path), None, f"a readable file ({e.strerror})") from None
