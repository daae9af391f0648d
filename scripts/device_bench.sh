#!/usr/bin/env bash
# Run sweeps on a lent GPU machine (the `device` tool) and leave everything under $OUT.
#   bash scripts/device_bench.sh KIND DBNAME ITEM ...
# Each ITEM is one quoted word list:
#   "MODEL[:METHODS] [BENCH ARGS...] [VAR=VALUE...]"  one `tui-planner bench` (METHODS default all); VAR=VALUE
#                                                     words set that bench's environment (NCCL_SOCKET_IFNAME=lo)
#   "numerics MODEL --extras fp8 [NUMERICS ARGS...]"  `tui-planner numerics` (issue 42: the loss against bf16), stored
#                                                     on the database's rows of MODEL with that method, and written
#                                                     whole (curves and all) to $OUT/numerics-N.json; with 3 or 4
#                                                     cards visible its runs go side by side, one a card
#   "ddp MODEL GPUS [MB ACCUM] [VAR=VALUE...]"        scripts/plain_ddp.py on GPUS GPUs at MB x ACCUM, else at the
#                                                     micro-batch and accumulation of the database's free-lunch row
#                                                     of that cell on this card (same VAR words: the same
#                                                     interconnect); -> $OUT/plain_ddp.jsonl
# e.g. "pythia-1b --gpus 4" "pythia-1b --gpus 4 --no-p2p --only free-lunch zero1" "ddp pythia-1b 4"
#      "pythia-1b:free-lunch --extras fused fp8" "numerics pythia-1b --extras fp8"
#      "pythia-1b --gpus 2 --nodes 2 --launcher local-nodes --only free-lunch NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_SOCKET_IFNAME=lo"
# Installs the wheels carried in .whl/ (DeepSpeed, DuckDB, ...) into /tmp/site, records the machine
# (nvidia-smi, topo -m, NCCL and driver versions), then runs each item. The database lives in /tmp/DBNAME on
# the machine (a later call on the same machine resumes from it; on a fresh machine, from .resume/DBNAME if
# carried) and is copied to $OUT after each item. Env: TRIAL_TIMEOUT (s a launch of a trial), BENCH_ARGS (more
# bench options, every item), CALL_LIMIT (s: bench gets SIGTERM, and stops cleanly, this long after the script
# started; default 540, under the device tool's 600 s a call, so the copy to $OUT still happens), STOP_TAIL (s:
# with it, each bench starts no trial later than STOP_TAIL before CALL_LIMIT, so a trial in flight can end
# before the SIGTERM; set it to about the longest trial).
# The wheels to carry (the device image has torch, transformers, accelerate): deepspeed (built with
# DS_BUILD_OPS=0, pure Python) and its hjson, pydantic, pydantic_core, annotated_types, typing_inspection,
# typing_extensions; duckdb; for the app, textual, rich, platformdirs, mdit_py_plugins, linkify_it_py,
# uc_micro_py; for issue 42's methods, liger_kernel and torchao (0.18.0: built for torch 2.11, the image's).
# Without pydantic DeepSpeed does not import: the sweep then skips its ZeRO combinations and
# says why.
set -u
start=$SECONDS
kind=$1; db=$2; shift 2
# A call for one card may come back on the other (H100 <-> H200): the kind recorded is the one that came.
# The one-card kinds are nvidia-h100-x1 and nvidia-h200 (no -x1), the others nvidia-h100-xN and nvidia-h200-xN.
if nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | grep -q H200; then
  kind=${kind/h100/h200}; kind=${kind%-x1}
else
  kind=${kind/h200/h100}; [ "$kind" = nvidia-h100 ] && kind=nvidia-h100-x1
fi
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
if ls .whl/*.whl >/dev/null 2>&1 && [ ! -f /tmp/site/.installed ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && touch /tmp/site/.installed || exit 1
fi
export PYTHONPATH=/tmp/site:$PWD
if [ ! -f /tmp/site/.stamp ]; then
  { nvidia-smi; nvidia-smi topo -m; python3 -c "import torch; print('torch', torch.__version__, 'nccl', torch.cuda.nccl.version())"
    env | grep -E '^(NCCL|NVSHMEM|TORCH_SYMM)' ; } > "$OUT/machine.txt" 2>&1
  touch /tmp/site/.stamp
fi
if [ ! -f "/tmp/$db" ] && [ -f ".resume/$db" ]; then cp .resume/"$db"* /tmp/; fi
n_json=0
for item in "$@"; do
  read -ra words <<< "$item"
  vars=(); args=()
  for w in "${words[@]}"; do
    if [[ $w =~ ^[A-Z][A-Z0-9_]*= ]]; then vars+=("$w"); else args+=("$w"); fi
  done
  left=$(( ${CALL_LIMIT:-540} - (SECONDS - start) ))
  [ "$left" -gt 30 ] || { echo "=== no time left for $item"; break; }
  if [ "${args[0]}" = ddp ]; then
    model=${args[1]}; n=${args[2]}
    gpu=h100; nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200 && gpu=h200
    row=$(python3 - "/tmp/$db" "$model" "$n" "${vars[*]}" "$gpu" <<'EOF'
import duckdb, sys
db, model, n, vars_, gpu = sys.argv[1:]
staged = "NCCL_P2P_DISABLE=1" in vars_
con = duckdb.connect(db, read_only=True)
r = con.execute("SELECT micro_batch, grad_accum FROM trials WHERE source='measured' AND model=? AND num_gpus=? "
                "AND gpu=? AND num_nodes=1 AND key LIKE '%|free-lunch|cuda' || ? AND feasible AND days IS NOT NULL "
                "ORDER BY created_at DESC LIMIT 1", [model, int(n), gpu, "|host-staged" if staged else ""]).fetchone()
print(f"{r[0]} {r[1]}" if r else "")
EOF
)
    [ ${#args[@]} -ge 5 ] && row="${args[3]} ${args[4]}"
    [ -n "$row" ] || { echo "=== ddp $model x$n: no free-lunch row to match"; continue; }
    read -r mb accum <<< "$row"
    echo "=== plain DDP $model x$n at micro-batch $mb x $accum ${vars[*]} $(date -u +%FT%TZ), ${left} s left"
    steps=3; [ "$accum" -gt 32 ] && steps=2
    # The model's own shape from its preset (plain_ddp.py's default is Pythia-1B's).
    cfg=/tmp/plain_ddp_config.json
    seq=$(python3 - "$model" "$cfg" <<'EOF2'
import json, sys, transformers
from engine.data.presets import load_presets
m = load_presets().model(sys.argv[1])
cfg = {"model_type": getattr(transformers, m.config_class).model_type, **dict(m.config)}
json.dump(cfg, open(sys.argv[2], "w"))
print(m.seq_len)
EOF2
) || { echo "=== ddp $model: no config from its preset"; continue; }
    env "${vars[@]}" timeout -s TERM -k 15 "$left" torchrun --standalone --nproc-per-node "$n" scripts/plain_ddp.py \
      --config "$cfg" --seq-len "$seq" --micro-batch "$mb" --accum "$accum" --steps "$steps" --warmup 1 --out "$OUT/plain_ddp.jsonl" 2>&1 \
      | grep -v "^\[rank\|UserWarning\|warnings.warn" | tail -5 | tee -a "$OUT/bench.log"
    continue
  fi
  if [ "${args[0]}" = numerics ]; then
    echo "=== numerics ${args[*]:1} $(date -u +%FT%TZ), ${left} s left"
    n_json=$((n_json + 1))
    timeout -s TERM -k 15 "$left" python3 -m tui_planner numerics --model "${args[1]}" --db "/tmp/$db" \
      --json "$OUT/numerics-$n_json.json" "${args[@]:2}" \
      2>&1 | grep -v "UserWarning\|warnings.warn" | tail -5 | tee -a "$OUT/bench.log"
    python3 -c "import duckdb,sys; duckdb.connect(sys.argv[1]).execute('CHECKPOINT')" "/tmp/$db" && cp "/tmp/$db" "$OUT/$db"
    continue
  fi
  model=${args[0]%%:*}; methods=all; [ "${args[0]}" != "$model" ] && methods=${args[0]#*:}
  stop=(); if [ -n "${STOP_TAIL:-}" ]; then
    [ "$left" -gt "$STOP_TAIL" ] || { echo "=== too little time left for $item"; break; }
    stop=(--stop-after $(( left - STOP_TAIL )))
  fi
  echo "=== $item $(date -u +%FT%TZ), ${left} s left"
  env "${vars[@]}" timeout -s TERM -k 15 "$left" python3 -m tui_planner bench --model "$model" --methods "$methods" \
    --db "/tmp/$db" --device-kind "$kind" --timeout "${TRIAL_TIMEOUT:-600}" "${stop[@]}" "${args[@]:1}" ${BENCH_ARGS:-} \
    2>&1 | tee -a "$OUT/bench.log"
  python3 -c "import duckdb,sys; duckdb.connect(sys.argv[1]).execute('CHECKPOINT')" "/tmp/$db" && cp "/tmp/$db" "$OUT/$db"
done
[ -f "$OUT/$db" ] && python3 -m tui_planner results --db "$OUT/$db"
