"""Measuring: benchmark a model on this machine's GPUs (or the CPU) over the paper's search space.

Owns: sweep.py (the one engine API: run_sweep, a typed event stream, one writer to the store),
launcher.py (each trial in its own torchrun process, with a timeout), agent.py (torchrun's agent, ending
without Python's teardown), trial.py (the trial process:
batch search, synchronized timing, MFU), steppers.py and modeling.py (building the model and applying
the memory-saving methods), environment.py (what the machine has; the trial's environment), events.py
(the typed events).
May import: engine.data, engine.predict (the memory skip). Never engine.plan, engine.recipe, tui_planner;
torch only inside trial processes and the GPU probe.
"""
