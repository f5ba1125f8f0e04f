#!/usr/bin/env bash
# The test command: installs what is missing, starts dockerd, then runs every test.
#   tools/test.sh [extra bazel test flags...]
# Tests that need root or dockerd skip loudly when they are missing, except under CI=true.
# .ci/run runs this script, with CI=true, as its first phase.
set -euo pipefail
cd "$(dirname "$0")/.."
. tools/deps.sh
sn_install_packages
sn_start_dockerd
exec bazel test //... ${CI:+--test_env=CI="$CI"} "$@"
