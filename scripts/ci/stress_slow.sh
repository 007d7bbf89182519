#!/usr/bin/env bash
# Run the slow scenarios several times in a row with every core busy, stopping at the first
# failure: a test that waits on a fixed sleep or a wall-clock budget tuned on a quiet machine
# fails here, where it would pass in a quiet CI run.
#
#   scripts/ci/stress_slow.sh                      # 5 runs of `pytest -m slow`
#   RUNS=3 scripts/ci/stress_slow.sh tests/proofnet/test_serving.py -m slow
#
# Environment: RUNS (default 5), LOAD_WORKERS (default: one per core), PYTEST_WORKERS
# (default 2, the team's ceiling), PYTEST (default .venv/bin/pytest). Arguments replace the
# default pytest selection (`-m slow`). The load comes from Debian's `stress`, else
# `stress-ng`, else one `yes > /dev/null` per core; it is stopped on exit, whatever happens.
# Prints one line per run and a summary; exits 1 at the first failing run.
set -uo pipefail
cd "$(dirname "$0")/../.."

RUNS="${RUNS:-5}"
LOAD_WORKERS="${LOAD_WORKERS:-$(nproc)}"
PYTEST_WORKERS="${PYTEST_WORKERS:-2}"
PYTEST="${PYTEST:-.venv/bin/pytest}"
if [ "$#" -gt 0 ]; then SELECTION=("$@"); else SELECTION=(-m slow); fi

case "$RUNS" in '' | *[!0-9]*) echo "RUNS must be a whole number, got '$RUNS'" >&2; exit 2 ;; esac
case "$LOAD_WORKERS" in '' | *[!0-9]*) echo "LOAD_WORKERS must be a whole number, got '$LOAD_WORKERS'" >&2; exit 2 ;; esac
[ -x "$PYTEST" ] || { echo "no $PYTEST: run 'make install' first" >&2; exit 2; }

load_pids=()
stop_load() {
  local pid
  for pid in "${load_pids[@]}"; do
    kill "$pid" 2>/dev/null
  done
  for pid in "${load_pids[@]}"; do
    wait "$pid" 2>/dev/null
  done
  load_pids=()
}
trap stop_load EXIT
trap 'exit 130' INT TERM

start_load() {
  [ "$LOAD_WORKERS" -gt 0 ] || { echo "load: none (LOAD_WORKERS=0)"; return; }
  if command -v stress >/dev/null 2>&1; then
    stress --cpu "$LOAD_WORKERS" >/dev/null 2>&1 &
    load_pids+=("$!")
    echo "load: stress --cpu $LOAD_WORKERS (pid $!)"
  elif command -v stress-ng >/dev/null 2>&1; then
    stress-ng --cpu "$LOAD_WORKERS" >/dev/null 2>&1 &
    load_pids+=("$!")
    echo "load: stress-ng --cpu $LOAD_WORKERS (pid $!)"
  else
    local i
    for i in $(seq "$LOAD_WORKERS"); do
      yes >/dev/null &
      load_pids+=("$!")
    done
    echo "load: $LOAD_WORKERS x 'yes > /dev/null' (no stress or stress-ng installed)"
  fi
}

echo "stress_slow: $(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) cores, $RUNS run(s) of: pytest -n $PYTEST_WORKERS ${SELECTION[*]}"
start_load

results=()
status=0
for run in $(seq "$RUNS"); do
  started=$(date +%s)
  "$PYTEST" -n "$PYTEST_WORKERS" -x -q -p no:cacheprovider "${SELECTION[@]}"
  rc=$?
  took=$(($(date +%s) - started))
  if [ "$rc" -eq 0 ]; then verdict=pass; else verdict="FAIL (pytest exit $rc)"; fi
  results+=("run $run/$RUNS: $verdict in ${took}s")
  echo "stress_slow: ${results[-1]}"
  if [ "$rc" -ne 0 ]; then
    status=1
    break
  fi
done

stop_load
echo "stress_slow: summary ($(date -u +%Y-%m-%dT%H:%M:%SZ))"
printf '  %s\n' "${results[@]}"
exit "$status"
