#!/usr/bin/env bash
# The seeded simulation's CI budget (issue #27; docs/reliability.md, "Seeded simulation"):
# seeds 1..10 at 100,000 steps each, 1,000,000 steps in all, split over two processes (one per
# core), built with -c opt. The seeds are fixed, so a CI run is reproducible; a violation
# fails the phase and explore prints the seed, the step, the invariant and the command that
# replays it.
#
#   tools/ci/simulate.sh                      # the CI budget
#   SIM_FIRST_SEED=1000 SIM_SEEDS=40 tools/ci/simulate.sh   # a longer campaign
#
# SIM_FIRST_SEED (1), SIM_SEEDS (10), SIM_STEPS (100000 per seed), SIM_JOBS (2 processes).
set -euo pipefail
cd "$(dirname "$0")/../.."
first=${SIM_FIRST_SEED:-1}
seeds=${SIM_SEEDS:-10}
steps=${SIM_STEPS:-100000}
jobs=${SIM_JOBS:-2}

bazel build -c opt //tests/sim:explore
bin="$(bazel info -c opt bazel-bin 2>/dev/null)/tests/sim/explore"
[ -x "$bin" ] || { echo "simulate: $bin was not built"; exit 1; }

logdir=$(mktemp -d)
trap 'rm -rf "$logdir"' EXIT
start=$(date +%s%N)
pids=()
per=$(( (seeds + jobs - 1) / jobs ))
s=$first
left=$seeds
j=0
while [ "$left" -gt 0 ]; do
  n=$(( left < per ? left : per ))
  "$bin" --seed="$s" --seeds="$n" --steps="$steps" >"$logdir/$j.log" 2>&1 &
  pids+=($!)
  s=$(( s + n ))
  left=$(( left - n ))
  j=$(( j + 1 ))
done
rc=0
for k in "${!pids[@]}"; do
  if ! wait "${pids[$k]}"; then rc=1; fi
done
ms=$(( ($(date +%s%N) - start) / 1000000 ))
cat "$logdir"/*.log
total=$(( seeds * steps ))
echo "simulate: seeds $first..$(( first + seeds - 1 )), $total steps in all, $j processes," \
  "$(( ms / 1000 )).$(( ms % 1000 / 100 )) s wall ($(( total * 1000 / (ms + 1) )) steps/s)"
if [ "$rc" -ne 0 ]; then
  echo "simulate: an invariant failed (above: the seed, the step and the replay command)"
fi
exit "$rc"
