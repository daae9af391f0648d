"""tui-planner's headless core, in five packages that name its jobs (imports point down this list only):

    engine.data      presets, the DuckDB store, the paper's tables, the search space, formulas
    engine.predict   the memory model and the roofline predictor, validated leave-one-cell-out
    engine.plan      ranking what to buy, what a search found, the shipped database
    engine.bench     measuring on this machine: sweeps of trial processes, a typed event stream
    engine.recipe    the winner as training settings, and a training run that checks them

data imports nothing of ours; predict imports data; plan imports data and predict; bench imports data
and predict (the memory skip); recipe imports data and bench. Nothing under engine/ imports Textual or
tui_planner, and nothing on the browsing and ranking paths imports torch: torch is imported only inside
trial processes and the GPU probe (tests/test_architecture.py, tests/test_import_hygiene.py).
"""

__version__ = "0.1.0"
