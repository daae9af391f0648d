#!/usr/bin/env python3
"""What activation checkpointing runs again, per model preset: the FLOPs it adds to a forward + backward
pass as a share of it, counted with torch.utils.flop_counter on the meta device (no weights, no compute,
no GPU; a few seconds a model). The predictor reads the share from the preset (`checkpoint_recompute`);
this prints what today's torch and transformers count beside it.

    python scripts/recompute_share.py                 # every model preset
    python scripts/recompute_share.py pythia-1b vit-large --check   # exit 1 where a preset disagrees

Mamba is counted at 128 positions (its slow path, the one the meta device can trace, loops over them;
its counted FLOPs are linear in them, so the share is the same at 2048).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

TOLERANCE = 0.005  # a share printed to three places, and Mamba's short-sequence count


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="*", help="model preset ids (default: all)")
    ap.add_argument("--check", action="store_true", help=f"exit 1 if a preset is off by more than {TOLERANCE}")
    args = ap.parse_args()

    from engine.bench.modeling import checkpoint_recompute_share
    from engine.data.presets import load_presets

    presets = load_presets(include_user=False)
    bad = 0
    print(f"{'model':16} {'counted':>8} {'preset':>8}")
    for mid in args.models or list(presets.models):
        model = presets.model(mid)
        seq = 128 if model.hf_class.startswith("Mamba") else None
        share = checkpoint_recompute_share(model, seq_len=seq)
        have = model.checkpoint_recompute
        off = have is None or abs(have - share) > TOLERANCE
        bad += off
        print(f"{mid:16} {share:8.3f} {'—' if have is None else f'{have:.3f}':>8}{'  <- differs' if off else ''}")
    return 1 if args.check and bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
