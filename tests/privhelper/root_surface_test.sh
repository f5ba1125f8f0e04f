#!/usr/bin/env bash
# What the code that runs as root links (issue #23, docs/security.md "The code that runs as
# root"): the transitive dependencies of //privhelper:main and //privhelper/native:main, as
# :root_surface lists them, hold none of the frame codec. privhelper checks requests with
# //common/wire:validate and reads the specification document and the release manifest with
# //common/wire:http_bodies; the frame structs and their Decode/Encode are the agent's.
#   root_surface_test.sh ROOT_SURFACE_LABELS
set -uo pipefail
LIST=$1
FAILURES=0
bad() { echo "FAIL: $*"; FAILURES=$((FAILURES + 1)); }

# The query must have run over privhelper.
for want in //privhelper:main //privhelper/native:main; do
  grep -qxF -- "$want" "$LIST" || bad "$want is not among the root surface's dependencies"
done

# The frame codec, by target and by source file (so that moving a codec source into another
# target is caught too).
for banned in //common/wire:frames //common/wire:codec \
              //common/wire:frames.h //common/wire:frames.cc \
              //common/wire:codec.h //common/wire:codec.cc //common/wire:decoders.h \
              //common/wire:decode_control.cc //common/wire:decode_request.cc \
              //common/wire:decode_response.cc //common/wire:encode.cc; do
  if grep -qxF -- "$banned" "$LIST"; then
    bad "the root surface links $banned (privhelper must not link the frame codec)"
  fi
done

# Nothing of the agent, devcore or the other tools.
others=$(grep -E '^//(agent|tools/devcore|tools/wirecheck)[:/]' "$LIST")
[ -z "$others" ] || bad "the root surface links the agent's or devcore's code: $others"

if [ "$FAILURES" -ne 0 ]; then
  echo "$FAILURES failure(s); the root surface's dependencies are in $LIST"
  exit 1
fi
echo "ok: $(grep -c '^//' "$LIST") labels of this repository, none of the frame codec"
