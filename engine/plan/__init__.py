"""Planning: what to buy and what a search found, from the figures in the store.

Owns: ranking.py (every option for a model: a GPU type x count in a system sold to hold it, one SQL query
over the store: dated prices, days, budget and deadline), uncertainty.py (an option's band, its deadline
verdict, whether its figure is extrapolated to a GPU generation nobody measured), verdict.py (what to buy
and how sure), findings.py (what a search found per model, GPU and count, beside the paper's pick), shipped.py
(the shipped database, assembled from data/ and the predictor).
May import: engine.data, engine.predict. Never engine.bench, engine.recipe, tui_planner; no torch.
"""
