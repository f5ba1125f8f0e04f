#!/usr/bin/env bash
# Builds the microVM guest kernel (an ELF vmlinux with a PVH entry note) from Debian's
# linux-source-6.1 tarball: `make tinyconfig`, the fragment merged on top, `make olddefconfig`,
# a check that every line of the fragment is in the final .config, then `make vmlinux`.
#   build_kernel.sh TARBALL FRAGMENT OUT_VMLINUX [OUT_CONFIG]
# Quiet on success; on failure prints the tail of the step's log. Deterministic: fixed build
# timestamp, user, host and version, C locale, no host-dependent release suffix, and the
# source extracted into a fresh temporary directory (no paths of it reach the image:
# no debug info, and Kbuild maps source paths in __FILE__ to relative ones).
set -euo pipefail

if [ "$#" -lt 3 ] || [ "$#" -gt 4 ]; then
  echo "usage: $0 TARBALL FRAGMENT OUT_VMLINUX [OUT_CONFIG]" >&2
  exit 2
fi
TARBALL=$(realpath -- "$1")
FRAGMENT=$(realpath -- "$2")
OUT=$(realpath -m -- "$3")
OUT_CONFIG=${4:+$(realpath -m -- "$4")}

export LC_ALL=C TZ=UTC
export ARCH=x86_64
export KBUILD_BUILD_TIMESTAMP='2000-01-01 00:00:00 UTC'
export KBUILD_BUILD_USER=sandbox-node KBUILD_BUILD_HOST=build KBUILD_BUILD_VERSION=1
# Set but empty: scripts/setlocalversion then appends nothing (no "+" for a source tree
# that happens to sit inside a git checkout); the release suffix is CONFIG_LOCALVERSION's.
export LOCALVERSION=
unset KCONFIG_CONFIG KBUILD_OUTPUT O CROSS_COMPILE CC LD 2>/dev/null || true

WORK=$(mktemp -d "${TMPDIR:-/tmp}/sn-kernel.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
LOG=$WORK/build.log
SRC=$WORK/src

# run STEP CMD...: runs CMD with its output in the log; on failure prints the log's tail.
run() {
  local step=$1
  shift
  echo "=== $step: $*" >>"$LOG"
  if ! "$@" >>"$LOG" 2>&1; then
    echo "build_kernel.sh: $step failed; last lines of its log:" >&2
    tail -n 80 "$LOG" >&2
    exit 1
  fi
}

mkdir "$SRC"
run extract tar -xf "$TARBALL" -C "$SRC" --strip-components=1 --no-same-owner
cd "$SRC"
run tinyconfig make tinyconfig
run merge scripts/kconfig/merge_config.sh -m .config "$FRAGMENT"
run olddefconfig make olddefconfig

# Every assignment of the fragment must be in the final .config as written, and every
# "# CONFIG_X is not set" must have no CONFIG_X= line: Kconfig drops an option whose
# dependencies are unmet with no more than a warning, and that must fail the build.
missing=()
while IFS= read -r line; do
  case $line in
    CONFIG_*=*)
      grep -qxF -- "$line" .config || missing+=("$line (final: $(grep -E "^(# )?${line%%=*}[= ]" .config || echo absent))")
      ;;
    "# CONFIG_"*" is not set")
      sym=${line#"# "}
      sym=${sym%" is not set"}
      if grep -qE "^${sym}=" .config; then
        missing+=("$line (final: $(grep -E "^${sym}=" .config))")
      fi
      ;;
  esac
done <"$FRAGMENT"
if [ "${#missing[@]}" -gt 0 ]; then
  echo "build_kernel.sh: the final .config does not have these lines of $FRAGMENT" \
    "(a dependency is missing or the symbol does not exist):" >&2
  printf '  %s\n' "${missing[@]}" >&2
  exit 1
fi

run vmlinux make -j"$(nproc)" vmlinux

# Not stripped: `strip` would save ~1 MB of 17 MB on disk (.symtab/.strtab only; a stripped
# copy keeps its PVH note and boots) and nothing in guest memory (qemu loads only the PT_LOAD
# segments), while the symbols let a guest oops be read with addr2line/nm (README.md, "Size").
mkdir -p "$(dirname "$OUT")"
cp vmlinux "$OUT"
if [ -n "$OUT_CONFIG" ]; then
  mkdir -p "$(dirname "$OUT_CONFIG")"
  cp .config "$OUT_CONFIG"
fi
