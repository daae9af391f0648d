#!/usr/bin/env bash
# Run sweeps on a lent GPU machine (the `device` tool) and leave everything under $OUT.
#   bash scripts/device_bench.sh KIND DBNAME MODEL[:METHODS] ...
# Installs the wheels carried in .whl/ (DeepSpeed, DuckDB, ...) into /tmp/site, records the machine,
# then runs `tui-planner bench` per model. The database lives in /tmp/DBNAME on the machine (a later call
# on the same machine resumes from it; on a fresh machine, from .resume/DBNAME if carried) and is copied
# to $OUT after each model. Env: TRIAL_TIMEOUT (s a launch of a trial), BENCH_ARGS (more bench options),
# CALL_LIMIT (s: bench gets SIGTERM, and stops cleanly, this long after the script started; default 540,
# under the device tool's 600 s a call, so the copy to $OUT still happens; lower it with the call's limit),
# STOP_TAIL (s: with it, each model's bench starts no trial later than STOP_TAIL before CALL_LIMIT, so a
# trial in flight can end before the SIGTERM; set it to about the longest trial).
# The wheels to carry (the device image has torch, transformers, accelerate): deepspeed (built with
# DS_BUILD_OPS=0, pure Python) and its hjson, py-cpuinfo, ninja, msgpack, einops, pydantic, pydantic_core,
# annotated_types, typing_inspection; duckdb. Without pydantic DeepSpeed does not import: the sweep then
# skips its ZeRO combinations and says why.
set -u
start=$SECONDS
kind=$1; db=$2; shift 2
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
if ls .whl/*.whl >/dev/null 2>&1 && [ ! -f /tmp/site/.installed ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && touch /tmp/site/.installed || exit 1
fi
export PYTHONPATH=/tmp/site:$PWD
[ -f /tmp/site/.stamp ] || { nvidia-smi > "$OUT/nvidia-smi.txt"; nvidia-smi topo -m >> "$OUT/nvidia-smi.txt"; touch /tmp/site/.stamp; }
if [ ! -f "/tmp/$db" ] && [ -f ".resume/$db" ]; then cp .resume/"$db"* /tmp/; fi
for item in "$@"; do
  model=${item%%:*}; methods=all; [ "$item" != "$model" ] && methods=${item#*:}
  left=$(( ${CALL_LIMIT:-540} - (SECONDS - start) ))
  [ "$left" -gt 30 ] || { echo "=== no time left for $model"; break; }
  stop=(); if [ -n "${STOP_TAIL:-}" ]; then
    [ "$left" -gt "$STOP_TAIL" ] || { echo "=== too little time left for $model's trials"; break; }
    stop=(--stop-after $(( left - STOP_TAIL )))
  fi
  echo "=== $model ($methods) $(date -u +%FT%TZ), ${left} s left"
  timeout -s TERM -k 15 "$left" python3 -m tui_planner bench --model "$model" --methods "$methods" --db "/tmp/$db" \
    --device-kind "$kind" --timeout "${TRIAL_TIMEOUT:-600}" "${stop[@]}" ${BENCH_ARGS:-} 2>&1 | tee -a "$OUT/bench.log"
  python3 -c "import duckdb,sys; duckdb.connect(sys.argv[1]).execute('CHECKPOINT')" "/tmp/$db" && cp "/tmp/$db" "$OUT/$db"
done
[ -f "$OUT/$db" ] && python3 -m tui_planner results --db "$OUT/$db"
