#!/bin/sh
# Runs the system protoc (Debian's protobuf-compiler); exists so the genrule names one tool.
exec protoc "$@"
