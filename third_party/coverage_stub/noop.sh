#!/bin/sh
# Offline stand-in for Bazel's coverage tools: writes an empty report where one is asked for.
for a in "$@"; do
  case "$a" in --output_file=*) : > "${a#--output_file=}" ;; esac
done
exit 0
