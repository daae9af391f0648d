"""Completion for the model to load (Plan screen, `a`): a config.json's path, or a model id in the local
Hugging Face cache. Reads folder listings only (no file is opened, nothing downloaded); the Input shows the
first completion after the cursor and → takes it."""

from __future__ import annotations

import os
from pathlib import Path

from textual.suggester import Suggester

from engine.data.runs import hf_cache_dir

MAX_ENTRIES = 2000  # a folder listed for completion: no more than this many names looked at


def _cached_ids() -> list[str]:
    try:
        with os.scandir(hf_cache_dir()) as it:
            names = [e.name for _, e in zip(range(MAX_ENTRIES), it) if e.name.startswith("models--")]
    except OSError:
        return []
    return sorted(n.removeprefix("models--").replace("--", "/", 1) for n in names)


def complete(value: str) -> str | None:
    """The first completion of `value`: a folder (with its /) or a .json file in the folder it names, else a
    Hugging Face cache id it begins; None where there is none."""
    if not value:
        return None
    path_like = value.startswith(("/", "~", ".")) or value.endswith(".json") or os.sep in value
    if path_like:
        typed = Path(value).expanduser()
        folder, stem = (typed, "") if value.endswith("/") else (typed.parent, typed.name)
        try:
            with os.scandir(folder) as it:
                entries = sorted((e.name, e.is_dir()) for _, e in zip(range(MAX_ENTRIES), it))
        except OSError:
            entries = []
        for name, is_dir in entries:
            if name.startswith(stem) and not name.startswith(".") and (is_dir or name.endswith(".json")):
                rest = name[len(stem):] + ("/" if is_dir else "")
                if rest:
                    return value + rest
    for mid in _cached_ids():
        if mid.lower().startswith(value.lower()) and len(mid) > len(value):
            return value + mid[len(value):]
    return None


class ModelSuggester(Suggester):
    """Textual's suggester over `complete` (not cached: the folders change as files are written)."""

    def __init__(self) -> None:
        super().__init__(use_cache=False, case_sensitive=True)

    async def get_suggestion(self, value: str) -> str | None:
        return complete(value)
