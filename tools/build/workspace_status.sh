#!/usr/bin/env bash
# Bazel's --workspace_status_command (.bazelrc): the release and commit every program's
# `--version` prints (//common:build_info; docs/build.md, "Stamping").
#   STABLE_SN_COMMIT   `git rev-parse HEAD`, with "-dirty" when the tree has changes to
#                      tracked files; "unknown" outside a git checkout
#   STABLE_SN_RELEASE  $SN_RELEASE (the release being built, e.g. the name it is published
#                      under), default "dev"; letters, digits and . _ + - only, 1-64 bytes
# Both are STABLE_ keys: a change of either regenerates and recompiles //common:build_info's
# one generated file and relinks the programs, nothing else.
set -euo pipefail

release=${SN_RELEASE:-dev}
if ! [[ "$release" =~ ^[A-Za-z0-9._+-]{1,64}$ ]]; then
  echo "workspace_status.sh: SN_RELEASE must be 1-64 of A-Z a-z 0-9 . _ + -" >&2
  exit 1
fi

commit=unknown
if head=$(git rev-parse --verify -q HEAD 2>/dev/null) && [[ "$head" =~ ^[0-9a-f]{40}$ ]]; then
  commit=$head
  # Tracked files only (build outputs and scratch files are not a change of the tree); no
  # optional locks: a build never writes the index under a concurrent git command.
  if [ -n "$(git --no-optional-locks status --porcelain --untracked-files=no 2>/dev/null)" ]; then
    commit=$head-dirty
  fi
fi

echo "STABLE_SN_COMMIT $commit"
echo "STABLE_SN_RELEASE $release"
