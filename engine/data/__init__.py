"""Describing data: what a model, a GPU, a machine and a price are (presets), where results live (the
DuckDB store, JSON-lines exchange, the paper's tables), the search space, and the formulas every figure is
computed with (FLOPs, MFU, days).

Owns: presets.py, store.py, jsonl.py, paperdb.py, space.py, formulas.py, errors.py, paths.py,
architecture.py (a model described from its config.json) and built.py (one described by building it).
May import: nothing of ours outside engine.data (tests/test_architecture.py). No torch, no Textual: built.py
imports torch and transformers only in the process it starts (`python -m engine.data.describer`).
"""
