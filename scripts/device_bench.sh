#!/usr/bin/env bash
# Run sweeps on a lent GPU machine (the `device` tool) and leave everything under $OUT.
#   bash scripts/device_bench.sh KIND DBNAME MODEL[:METHODS] ...
# Installs the wheels carried in .whl/ (DeepSpeed, DuckDB, ...) into /tmp/site, records the machine,
# then runs `tui-planner bench` per model. Results land in $OUT/DBNAME as each trial finishes.
set -u
kind=$1; db=$2; shift 2
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
fi
export PYTHONPATH=/tmp/site:$PWD
[ -f /tmp/site/.stamp ] || { nvidia-smi > "$OUT/nvidia-smi.txt"; nvidia-smi topo -m >> "$OUT/nvidia-smi.txt"; touch /tmp/site/.stamp; }
# Resume: the database the last call left on this machine (the newest), else one carried in .resume/.
if [ -f "/tmp/$db" ]; then cp "/tmp/$db" "$OUT/$db"; elif [ -f ".resume/$db" ]; then cp .resume/"$db"* "$OUT/"; fi
for item in "$@"; do
  model=${item%%:*}; methods=all; [ "$item" != "$model" ] && methods=${item#*:}
  echo "=== $model ($methods) $(date -u +%FT%TZ)"
  python3 -m tui_planner bench --model "$model" --methods "$methods" --db "$OUT/$db" --device-kind "$kind" \
    --timeout "${TRIAL_TIMEOUT:-600}" ${BENCH_ARGS:-} 2>&1 | tee -a "$OUT/bench.log"
  python3 -c "import duckdb,sys; duckdb.connect(sys.argv[1]).execute('CHECKPOINT')" "$OUT/$db"
  cp "$OUT/$db" "/tmp/$db"
done
python3 -m tui_planner results --db "$OUT/$db"
