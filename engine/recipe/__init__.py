"""Recipes: the winner as training settings a user can run, and a real training run that checks them.

Owns: export.py (pick a measured setting; Hugging Face TrainingArguments, DeepSpeed JSON, launch.sh,
EXPLAIN.txt, plan.json), verify.py (train those settings under torchrun and compare the step time),
verify_worker.py (the training process).
May import: engine.data, engine.bench (verify trains as a trial builds and times). Never engine.plan,
tui_planner; torch only inside the worker process.
"""
