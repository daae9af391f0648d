#!/usr/bin/env bash
# Run several scripts/device_bench.sh groups at once on one lent multi-GPU machine, each group on its own cards,
# with its own database and its own folder under $OUT: a 4-GPU machine costs the same device time whether one
# sweep uses it or four do.
#   bash scripts/device_parallel.sh KIND CARDS:DBNAME ITEM ... [-- CARDS:DBNAME ITEM ...] ...
# e.g. bash scripts/device_parallel.sh nvidia-h100-x4 \
#        0,1:multi.duckdb "pythia-6.9b --gpus 2 --only fsdp3 fp8+fsdp3" -- \
#        2:single2.duckdb "pythia-1b:free-lunch --only free-lunch fused" -- \
#        3:single3.duckdb "llama-3.2-1b:free-lunch --only free-lunch fused"
# Group N's log and database land in $OUT/gN/ (bench.log, DBNAME: two files a group, as the device tool returns
# at most 8), the end of its output in this script's; the machine's record (nvidia-smi, topo -m, NCCL) at the end
# of $OUT/g0/bench.log. The groups share the host's CPUs, memory and PCIe, not
# their cards: each row's provenance says the machine kind, and the closing notes say which rows ran side by side.
# CALL_LIMIT, STOP_TAIL, TRIAL_TIMEOUT and BENCH_ARGS pass through to every group (see device_bench.sh).
set -u
kind=$1; shift
top=$OUT
groups=(); current=""
for arg in "$@"; do
  if [ "$arg" = "--" ]; then [ -n "$current" ] && groups+=("$current"); current=""; continue; fi
  current+="$(printf '%q ' "$arg")"
done
[ -n "$current" ] && groups+=("$current")
# Every group checked before any starts: a bad one later must not leave earlier ones running unwaited.
used=","
for g in "${groups[@]}"; do
  eval "set -- $g"
  spec=$1; cards=${spec%%:*}; db=${spec#*:}
  [[ $spec == *:* && $cards =~ ^[0-9]+(,[0-9]+)*$ ]] || { echo "group '$spec': cards must be a list like 0,1 before ':'"; exit 2; }
  [[ $db =~ ^[A-Za-z0-9_.-]+$ ]] || { echo "group '$spec': database name '$db' has characters other than A-Z a-z 0-9 _ . -"; exit 2; }
  for c in ${cards//,/ }; do
    [[ $used == *",$c,"* ]] && { echo "card $c is in two groups"; exit 2; }
    used+="$c,"
  done
done
# Install the carried wheels and record the machine once, before the groups race for it.
bash scripts/device_bench.sh "$kind" none.duckdb
if ls .whl/*.whl >/dev/null 2>&1 && [ ! -f /tmp/site/.installed ]; then echo "the carried wheels did not install"; exit 1; fi
# Each group counts its CALL_LIMIT from its own start: what the install took comes off it.
export CALL_LIMIT=$(( ${CALL_LIMIT:-540} - SECONDS ))
pids=(); i=0
for g in "${groups[@]}"; do
  eval "set -- $g"
  spec=$1; shift
  cards=${spec%%:*}; db=${spec#*:}
  mkdir -p "$top/g$i"
  echo "=== group $i on cards $cards -> $db: $*"
  ( CUDA_VISIBLE_DEVICES=$cards OUT=$top/g$i bash scripts/device_bench.sh "$kind" "$db" "$@" > "/tmp/g$i.log" 2>&1 ) &
  pids+=($!); i=$((i + 1))
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=$?; done
# The device tool returns at most 8 files: the machine's record goes into group 0's log (4 groups x 2 files).
if [ -f "$top/machine.txt" ] && [ "$i" -gt 0 ]; then
  { echo "=== the machine"; cat "$top/machine.txt"; } >> "$top/g0/bench.log" && rm -f "$top/machine.txt"
fi
for j in $(seq 0 $((i - 1))); do echo "=== group $j"; grep -v "^ *$" "/tmp/g$j.log" | tail -30; done
exit $rc
