#!/usr/bin/env bash
# On a lent GPU machine (the `device` tool): export the best measured setting and verify it by training.
#   bash scripts/device_verify.sh DB NAME EXPORT-ARGS...
# DB: a results file ($OUT/DB when it exists there, else the path as given, e.g. db/tui-planner.duckdb).
# Writes $OUT/NAME/ (the exported files, verify.json) and $OUT/NAME.log. Env VERIFY_STEPS (default 5, at
# most 5: a Pythia-1B step is ~30 s on one H100, and a device call has 10 minutes). One warm-up step
# (compilation) is timed apart and not compared.
set -u
db=$1; name=$2; shift 2
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
if [ ! -f /tmp/site/.installed ] && ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && touch /tmp/site/.installed || exit 1
fi
export PYTHONPATH=/tmp/site:$PWD
[ -f "$OUT/$db" ] && db="$OUT/$db"
steps=${VERIFY_STEPS:-5}; [ "$steps" -gt 5 ] && steps=5
{
  echo "=== export $* from $db $(date -u +%FT%TZ)"
  python3 -m tui_planner export --db "$db" "$@" --out "$OUT/$name" &&
  echo "=== verify $(date -u +%FT%TZ)" &&
  python3 -m tui_planner verify "$OUT/$name" --steps "$steps" --warmup 1 --timeout 420 -v
  echo "=== exit $? $(date -u +%FT%TZ)"
} 2>&1 | tee "$OUT/$name.log" | grep -v "^\[rank" | tail -60
