#!/usr/bin/env bash
# The test command: installs what is missing, starts dockerd, then runs every test.
#   tools/test.sh [extra bazel test flags...]
# Tests that need root or dockerd skip loudly when they are missing, except under CI=true.
# .ci/run runs this script, with CI=true, as its first phase.
# Each step prints a header and, when it ends, the time it took.
set -euo pipefail
cd "$(dirname "$0")/.."
STEP_START=
step_done() {  # the time the current step took (and its exit status when not 0)
  [ -n "$STEP_START" ] || return 0
  local t=$(( (${EPOCHREALTIME/[.,]/} - STEP_START) / 100000 ))
  printf 'test.sh: done in %d.%d s%s\n' $((t / 10)) $((t % 10)) "${1:+ (exit $1)}"
  STEP_START=
}
step() { step_done; printf 'test.sh: %s\n' "$*"; STEP_START=${EPOCHREALTIME/[.,]/}; }

step "Debian packages (tools/deps.sh: installs what is missing)"
. tools/deps.sh
sn_install_packages
step "dockerd (started if it does not answer)"
sn_start_dockerd
step "bazel test //... $*"
rc=0
bazel test //... ${CI:+--test_env=CI="$CI"} "$@" || rc=$?
if [ "$rc" = 0 ]; then step_done; else step_done "$rc"; fi
exit "$rc"
