#!/usr/bin/env bash
# The node's one executable (//:sandbox-node) runs the program its name picks, exactly, and
# //agent, //privhelper and //privhelper/native:native_helper are that executable's very
# bytes (docs/architecture.md, "One executable, three programs").
#   program_names_test.sh SANDBOX_NODE AGENT PRIVHELPER NATIVE_HELPER
set -uo pipefail
ONE=$1
shift
FAILURES=0
bad() { echo "FAIL: $*"; FAILURES=$((FAILURES + 1)); }
for copy in "$@"; do
  cmp -s "$ONE" "$copy" || bad "$copy is not the bytes of $ONE"
done
DIR=$(mktemp -d "${TEST_TMPDIR:-/tmp}/names.XXXXXX")
trap 'rm -rf "$DIR"' EXIT
cp "$ONE" "$DIR/sandbox-node"
# expect NAME STATUS TEXT: started as NAME with no arguments, it exits STATUS and says TEXT.
expect() {
  local name=$1 want=$2 text=$3 got
  [ -e "$DIR/$name" ] || ln "$DIR/sandbox-node" "$DIR/$name"
  "$DIR/$name" >"$DIR/out" 2>"$DIR/err"
  got=$?
  [ "$got" = "$want" ] || bad "$name exited $got, not $want: $(cat "$DIR/err")"
  grep -qF -- "$text" "$DIR/err" || bad "$name did not say \"$text\": $(cat "$DIR/err")"
}
expect sandbox-node 2 'started as "sandbox-node"; run it as agent, privhelper, native_helper or vm_supervisor'
expect agent 2 'agent: missing subcommand'
expect privhelper 2 'usage: privhelper --config=FILE'
expect native_helper 2 'native_helper: bad arguments'
# Only the exact names: a prefix, a suffix or another case is refused, never guessed.
for other in agentx Agent privhelper.bak native; do
  expect "$other" 2 "started as \"$other\""
done
# The name is argv[0]'s last component, whatever the directory.
mkdir "$DIR/agent.d"
ln "$DIR/sandbox-node" "$DIR/agent.d/privhelper"
"$DIR/agent.d/privhelper" >/dev/null 2>"$DIR/err"
grep -qF 'usage: privhelper --config=FILE' "$DIR/err" || bad "agent.d/privhelper: $(cat "$DIR/err")"
[ "$FAILURES" = 0 ] && echo "ok: one executable, three exact program names"
exit "$FAILURES"
