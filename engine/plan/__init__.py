"""Planning: what to buy and what a search found, from the figures in the store.

Owns: ranking.py (every hardware option for a model, one SQL query over the store: cost, days, budget and
deadline), findings.py (what a search found per model, GPU and count, beside the paper's pick), shipped.py
(the shipped database, assembled from data/ and the predictor).
May import: engine.data, engine.predict. Never engine.bench, engine.recipe, tui_planner; no torch.
"""
