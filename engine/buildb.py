"""Assemble the shipped database from committed data: the paper's tables and exported measured runs."""

from __future__ import annotations

from pathlib import Path

from engine import paperdb
from engine.presets import load_presets
from engine.store import Store


def build(path: Path, data_dir: Path) -> list[dict]:
    presets = load_presets(include_user=False)  # shipped presets only: the build must not depend on $HOME
    with Store.open(path, read_only=False) as store:
        paperdb.add_paper(store, data_dir / "paper", presets)
        measured = data_dir / "measured"
        if measured.is_dir():
            from engine.export import import_jsonl

            for f in sorted(measured.glob("*.jsonl")):
                import_jsonl(store, f)
        store.con.execute("CHECKPOINT")
        return store.summary()
