#!/usr/bin/env bash
# The shipped Prometheus files are valid and the alerts fire when they should: promtool (from
# Debian's prometheus package) checks the rules and the example configuration, and runs
# alerts_test.yml. Under CI=true a missing promtool fails; elsewhere it skips loudly.
set -euo pipefail
PROMTOOL=$(command -v promtool || true)
if [ -z "$PROMTOOL" ]; then
  if [ "${CI:-}" = true ]; then echo "FAIL: promtool is not installed" >&2; exit 1; fi
  echo "SKIPPED: promtool is not installed (apt-get install prometheus)" >&2
  exit 0
fi
DIR=$(dirname "$(readlink -f "$0")")
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cp "$DIR/alerts.yml" "$DIR/alerts_test.yml" "$DIR/prometheus.yml" "$WORK/"
cd "$WORK"
"$PROMTOOL" check rules alerts.yml
"$PROMTOOL" check config prometheus.yml
"$PROMTOOL" test rules alerts_test.yml
