#!/usr/bin/env bash
# Checks the two shipped units without systemd as PID 1 (this is what CI can run):
#   1. `systemd-analyze verify` of both units is clean: exit 0 and no message at all (an unknown
#      key or a bad value is only a warning to systemd, so any output fails the test);
#   2. `systemd-analyze security --offline=true` exposure: privhelper <= 2.0 (with and without
#      the microVM provider's drop-in, microvm.conf), agent <= 1.5;
#      the threshold check is itself checked on a weakened copy of the privhelper unit;
#   3. the facts that make the two units work together (docs/security.md, "privhelper's own privileges (the unit)").
# Without systemd-analyze the test skips loudly, except under CI=true, where it fails.
#   units_test.sh [DIR]   (DIR holds the two units; default: this script's directory)
set -euo pipefail

readonly PRIVHELPER_MAX=2.0
readonly AGENT_MAX=1.5
readonly PH=sandbox-node-privhelper.service
readonly AG=sandbox-node-agent.service
readonly MV=microvm.conf  # privhelper's drop-in for provider "microvm"

UNIT_DIR=${1:-$(dirname "$0")}
[ -f "$UNIT_DIR/$PH" ] && [ -f "$UNIT_DIR/$AG" ] || { echo "FAIL: units not found in $UNIT_DIR"; exit 1; }

# SN_SYSTEMD_ANALYZE names another binary (e.g. a missing one, to see the CI=true failure).
ANALYZE=${SN_SYSTEMD_ANALYZE:-$(PATH=/usr/bin:/bin:$PATH command -v systemd-analyze || true)}
if [ -z "$ANALYZE" ] || [ ! -x "$ANALYZE" ]; then
  if [ "${CI:-}" = true ]; then
    echo "FAIL: systemd-analyze is required under CI=true (Debian package systemd; tools/deps.sh)"
    exit 1
  fi
  echo "SKIPPED (not CI): systemd-analyze is not installed (apt-get install systemd)"
  exit 0
fi
echo "using $ANALYZE ($("$ANALYZE" --version | head -n1))"

FAILURES=0
fail() { echo "FAIL: $*"; FAILURES=$((FAILURES + 1)); }
TMP=$(mktemp -d "${TEST_TMPDIR:-/tmp}/units-XXXXXX")
trap 'rm -rf "$TMP"' EXIT

# --- 1. verify, in a scratch root: the units, stub executables at every Exec*= path, and the
# host's own unit directory (verify needs sysinit.target and friends).
ROOT="$TMP/root"
mkdir -p "$ROOT/etc/systemd/system" "$ROOT/usr/lib/systemd" "$ROOT/usr/bin"
ln -s usr/bin "$ROOT/bin"
ln -s usr/lib "$ROOT/lib"
cp -r /usr/lib/systemd/system "$ROOT/usr/lib/systemd/"
cp "$UNIT_DIR/$PH" "$UNIT_DIR/$AG" "$ROOT/etc/systemd/system/"
# Exec lines: ExecStart=[-@:+!]PATH ARGS...
sed -n 's/^Exec[A-Za-z]*=[-@:+!]*\([^ ]*\).*/\1/p' "$UNIT_DIR/$PH" "$UNIT_DIR/$AG" | sort -u |
  while read -r exe; do
    mkdir -p "$ROOT$(dirname "$exe")"
    printf '#!/bin/sh\n' >"$ROOT$exe"
    chmod 0755 "$ROOT$exe"
  done
if ! out=$("$ANALYZE" verify --root="$ROOT" "$AG" "$PH" 2>&1); then
  fail "systemd-analyze verify exited non-zero: $out"
elif [ -n "$out" ]; then
  fail "systemd-analyze verify is not clean: $out"
else
  echo "ok: systemd-analyze verify $PH $AG: clean"
fi
# The same with the microVM provider's drop-in (what the installer adds for it).
MROOT="$TMP/microvm-root"
cp -a "$ROOT" "$MROOT"
mkdir -p "$MROOT/etc/systemd/system/$PH.d"
cp "$UNIT_DIR/$MV" "$MROOT/etc/systemd/system/$PH.d/microvm.conf"
if ! out=$("$ANALYZE" verify --root="$MROOT" "$AG" "$PH" 2>&1) || [ -n "$out" ]; then
  fail "systemd-analyze verify with the microvm drop-in is not clean: $out"
else
  echo "ok: systemd-analyze verify $PH with $MV: clean"
fi

# --- 2. exposure.
exposure() {  # exposure UNIT_FILE -> prints the overall exposure level, e.g. 1.0
  local out
  out=$("$ANALYZE" security --offline=true "$1" 2>&1) || true
  printf '%s\n' "$out" | sed -n 's/.*Overall exposure level for [^:]*: \([0-9][0-9.]*\).*/\1/p'
}
within() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 <= b + 0) }'; }
check_exposure() {  # check_exposure UNIT_FILE MAX
  local level
  level=$(exposure "$1")
  if [ -z "$level" ]; then
    fail "no exposure level for $(basename "$1"): $("$ANALYZE" security --offline=true "$1" 2>&1 | tail -n 3)"
    return 1
  fi
  if within "$level" "$2"; then
    echo "ok: $(basename "$1") exposure $level <= $2"
  else
    fail "$(basename "$1") exposure $level > $2"
    "$ANALYZE" security --offline=true "$1" 2>&1 | grep -v '^✓' || true
    return 1
  fi
}
check_exposure "$UNIT_DIR/$PH" "$PRIVHELPER_MAX" || true
check_exposure "$UNIT_DIR/$AG" "$AGENT_MAX" || true
# privhelper with the microVM drop-in (loaded from the scratch root): still <= 2.0.
mv_level=$("$ANALYZE" security --offline=true --root="$MROOT" "$PH" 2>&1 |
  sed -n 's/.*Overall exposure level for [^:]*: \([0-9][0-9.]*\).*/\1/p')
if [ -n "$mv_level" ] && within "$mv_level" "$PRIVHELPER_MAX"; then
  echo "ok: $PH with $MV exposure $mv_level <= $PRIVHELPER_MAX"
else
  fail "$PH with $MV exposure '${mv_level}' > $PRIVHELPER_MAX"
fi

# The check must be able to fail: the privhelper unit without its capability bounding set,
# system call filter and private network scores far above the threshold.
mkdir -p "$TMP/weak"
grep -v -e '^CapabilityBoundingSet=' -e '^SystemCallFilter=' -e '^PrivateNetwork=' \
  "$UNIT_DIR/$PH" >"$TMP/weak/$PH"
weak=$(exposure "$TMP/weak/$PH")
if [ -n "$weak" ] && ! within "$weak" "$PRIVHELPER_MAX"; then
  echo "ok: a weakened privhelper unit scores $weak and would fail"
else
  fail "the threshold check did not catch a weakened unit (exposure '${weak}')"
fi

# --- 3. facts that make the two units work together.
has() {  # has FILE REGEX WHAT
  if grep -Eq "$2" "$1"; then echo "ok: $3"; else fail "$3 (no line matching /$2/ in $(basename "$1"))"; fi
}
hasnt() {
  if grep -Eq "$2" "$1"; then fail "$3 (a line matches /$2/ in $(basename "$1"))"; else echo "ok: $3"; fi
}
P="$UNIT_DIR/$PH"
A="$UNIT_DIR/$AG"
has "$A" "^Requires=.*\\b$PH\\b" "the agent requires privhelper"
has "$A" "^After=.*\\b$PH\\b" "the agent starts after privhelper"
has "$A" '^User=sandbox-node$' "the agent runs as sandbox-node"
has "$A" '^Group=sandbox-node$' "the agent's primary group is sandbox-node (the socket's group)"
has "$A" '^CapabilityBoundingSet=$' "the agent has no capability"
hasnt "$P" '^(User|Group|DynamicUser)=' "privhelper runs as root"
has "$P" '^RuntimeDirectory=sandbox-node$' "privhelper's unit creates /run/sandbox-node"
has "$P" '^RuntimeDirectoryMode=0755$' "/run/sandbox-node is root-owned and writable by root only"
has "$P" '^ExecStartPost=.*-S /run/sandbox-node/privhelper\.sock' \
  "privhelper is ready only once its socket exists"
has "$P" '^CapabilityBoundingSet=CAP_SETGID CAP_SETPCAP$' \
  "privhelper keeps exactly CAP_SETGID and CAP_SETPCAP"
has "$P" '^RestrictAddressFamilies=AF_UNIX$' "privhelper has unix sockets only"
has "$P" '^PrivateNetwork=yes$' "privhelper has no network"
has "$P" '^LimitNOFILE=[0-9]+$' "privhelper's descriptor limit is set"
M="$UNIT_DIR/$MV"
has "$P" '^KillMode=mixed$' "privhelper's unit (Docker) stops what privhelper left"
has "$M" '^KillMode=process$' "with microVMs only privhelper is signalled: the VMs' supervisors outlive it"
has "$M" '^CapabilityBoundingSet=CAP_SETGID CAP_SETPCAP CAP_CHOWN CAP_SETUID$' \
  "with microVMs privhelper keeps exactly CAP_SETGID, CAP_SETPCAP, CAP_CHOWN and CAP_SETUID"
has "$M" '^DeviceAllow=/dev/kvm rw$' "with microVMs /dev/kvm is the one device added"

if [ "$FAILURES" -ne 0 ]; then
  echo "$FAILURES check(s) failed"
  exit 1
fi
echo "all unit checks passed"
