"""tui-planner's headless core: presets, formulas, the DuckDB store and the benchmark engine.

Nothing under engine/ imports Textual, and nothing on the browsing and ranking paths imports torch:
torch is imported only inside trial processes and the GPU probe (tests/test_import_hygiene.py).
"""

__version__ = "0.1.0"
