#!/usr/bin/env bash
# A program answers --help and --version as its first argument (common/build_info.h;
# docs/operator-guide.md, "Every program's --help and --version"):
#   --help     its usage on standard output (a line starting "usage:"), nothing on standard
#              error, exit 0;
#   --version  exactly one line "<program> <release> (commit <sha>)" on standard output,
#              nothing on standard error, exit 0;
# and a usage error still goes to standard error with exit 2, nothing on standard output.
#   help_version_test.sh NAME BINARY [HELP_WORD...]
# NAME is the program's name (the node's executable picks its program by it: the binary is
# started through a hard link of that name); each HELP_WORD is another first argument that
# must answer exactly as --help does (the agent's `help`).
set -uo pipefail
NAME=$1
BINARY=$2
shift 2
FAILURES=0
bad() { echo "FAIL: $NAME: $*"; FAILURES=$((FAILURES + 1)); }
DIR=$(mktemp -d "${TEST_TMPDIR:-/tmp}/cli.XXXXXX")
trap 'rm -rf "$DIR"' EXIT
# A symbolic link: argv[0]'s last component is what the node's executable goes by.
ln -s "$(realpath "$BINARY")" "$DIR/$NAME"
# run ARG...: the program under its name, with an empty environment; sets RC, OUT, ERR.
run() {
  env -i "$DIR/$NAME" "$@" >"$DIR/out" 2>"$DIR/err" </dev/null
  RC=$?
  OUT=$(cat "$DIR/out")
  ERR=$(cat "$DIR/err")
}

for help in --help "$@"; do
  run "$help"
  [ "$RC" = 0 ] || bad "$help exited $RC, not 0: $ERR"
  grep -q '^usage:' "$DIR/out" || bad "$help printed no \"usage:\" line on standard output: $OUT"
  grep -qF -- "--version" "$DIR/out" || bad "$help does not name --version: $OUT"
  [ -z "$ERR" ] || bad "$help wrote to standard error: $ERR"
  if [ "$help" = --help ]; then
    HELP=$OUT
  elif [ "$OUT" != "$HELP" ]; then
    bad "$help printed other text than --help: $OUT"
  fi
done

run --version
[ "$RC" = 0 ] || bad "--version exited $RC, not 0: $ERR"
[ "$(wc -l <"$DIR/out")" = 1 ] || bad "--version printed $(wc -l <"$DIR/out") lines, not 1: $OUT"
release='[A-Za-z0-9._+-]{1,64}'
commit='([0-9a-f]{40}(-dirty)?|unknown)'
grep -qxE "$NAME $release \\(commit $commit\\)" "$DIR/out" ||
  bad "--version printed \"$OUT\", not \"$NAME <release> (commit <sha>)\""
[ -z "$ERR" ] || bad "--version wrote to standard error: $ERR"
VERSION=$OUT

# Only as the first argument, and a usage error is still one: standard error, exit 2.
run --no-such-flag --version
[ "$RC" = 2 ] || bad "a usage error exited $RC, not 2"
[ -z "$OUT" ] || bad "a usage error wrote to standard output: $OUT"
[ -n "$ERR" ] || bad "a usage error said nothing on standard error"

[ "$FAILURES" = 0 ] && echo "ok: $NAME --help; --version: $VERSION"
exit "$FAILURES"
