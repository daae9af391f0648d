"""Describing data: what a model, a GPU, a machine and a price are (presets), where results live (the
DuckDB store, JSON-lines exchange, the paper's tables), the search space, and the formulas every figure is
computed with (FLOPs, MFU, days).

Owns: presets.py, store.py, jsonl.py, paperdb.py, space.py, formulas.py, errors.py, paths.py,
architecture.py (a model described from its config.json), built.py (one described by building it), and the build
worker it starts: describer.py, counting.py (its FLOP counts), lean.py (its trimmed imports), files.py.
May import: nothing of ours outside engine.data (tests/test_architecture.py). No torch, no Textual: torch and
transformers are imported only in the process built.py starts (`python -m engine.data.describer`).
"""
