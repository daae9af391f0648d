#!/usr/bin/env bash
# Text captures of the app's four screens at 80x24, for the README and docs/screens/ (needs tmux).
#   bash scripts/capture_screens.sh [DB]     (default: the shipped database)
set -euo pipefail
cd "$(dirname "$0")/.."
out=docs/screens
mkdir -p "$out"
cmd=(.venv/bin/tui-planner)
[ -x "${cmd[0]}" ] || cmd=(tui-planner)
[ $# -ge 1 ] && cmd+=(--db "$1")
cmd+=(app --fresh)  # the defaults, not the plan this user left last time
session="tui-planner-capture-$$"
tmux new-session -d -s "$session" -x 80 -y 24 "$(printf '%q ' "${cmd[@]}")"
trap 'tmux kill-session -t "$session" 2>/dev/null || true' EXIT
busy() {  # a screen still working: its ranking, a prediction, the GPU probe
  case "$1" in *ranking…*|*predicting…*|*"looking for GPUs…"*|*loading…*) return 0 ;; esac
  return 1
}
last=""
capture() {  # wait until the screen has changed from the last one kept, is done and stops changing; keep it
  local prev="" now
  for _ in $(seq 60); do
    sleep 0.5
    now=$(tmux capture-pane -p -t "$session")
    [ "$now" = "$prev" ] && [ -n "$now" ] && [ "$now" != "$last" ] && ! busy "$now" && break
    prev=$now
  done
  printf '%s\n' "$now" > "$out/$1.txt"
  last=$now
}
capture plan
for key_name in 2:chart 3:bench 4:results; do
  tmux send-keys -t "$session" "${key_name%%:*}"
  capture "${key_name#*:}"
done
tmux send-keys -t "$session" q
echo "wrote $out/{plan,chart,bench,results}.txt"
