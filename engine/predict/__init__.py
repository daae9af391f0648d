"""Predicting: training days for a model on a GPU type and count nobody measured, and how good that is.

Owns: memory.py (the bytes a GPU holds, the largest micro-batch that fits), calibration.py (kappa from the
measured fits; the sweep's memory skip), terms.py (the roofline's terms: FLOPs, memory-bound bytes,
communication, offloading's copies), fit.py (basis rows, the least-squares fit, the error band),
predictor.py (one prediction with every term), validate.py (leave-one-cell-out, bands, the report),
stored.py (predictions as store rows).
May import: engine.data. Never engine.bench, engine.plan, engine.recipe, tui_planner; no torch.

The names below are the package's API (what the CLI, the planner and the shipped-database build use).
"""

from engine.predict.fit import Band, BasisRow, Fit, basis_row, distinct, fit_rows
from engine.predict.predictor import Prediction, Predictor
from engine.predict.stored import measured_cells, predict_missing, trial_of, write_predictions
from engine.predict.terms import (DEFAULT_CPU_ADAM_S_PER_PARAM, GROUPS, MAX_COMPUTE_FRACTION, PredictError, arch_of,
                                  attention_flops_per_sample, comm_bytes, compute_flops_per_sample,
                                  compute_peak_flops, flops_per_sample, group_of, host_bytes,
                                  host_bytes_per_s, host_transfers, link_bytes_per_s, optimizer_bytes, recompute,
                                  traffic_terms)
from engine.predict.validate import Check, Validation, bands_for, build_predictor, leave_one_out, validation_report

__all__ = [
    "Band", "BasisRow", "Check", "DEFAULT_CPU_ADAM_S_PER_PARAM", "Fit", "GROUPS", "MAX_COMPUTE_FRACTION",
    "PredictError", "Prediction", "Predictor", "Validation", "arch_of", "bands_for", "basis_row", "build_predictor",
    "attention_flops_per_sample", "comm_bytes", "compute_flops_per_sample", "compute_peak_flops", "distinct", "fit_rows", "flops_per_sample", "group_of", "host_bytes",
    "host_bytes_per_s", "host_transfers", "leave_one_out", "link_bytes_per_s", "measured_cells", "optimizer_bytes",
    "predict_missing", "recompute", "traffic_terms", "trial_of", "validation_report", "write_predictions",
]
