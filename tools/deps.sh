#!/usr/bin/env bash
# Installs (idempotently, quietly) the Debian packages the build, the tests and the quickstart
# need (systemd only for systemd-analyze, which //tools/systemd:units_test runs; systemd need not
# be PID 1), and starts dockerd when it is not answering. Sourced by tools/test.sh,
# tools/quickstart.sh and .ci/run; safe to run again.
set -euo pipefail

SN_PACKAGES=(
  bazel-bootstrap bazel-rules-java
  libgrpc++-dev protobuf-compiler-grpc protobuf-compiler libprotobuf-dev libabsl-dev
  nlohmann-json3-dev libgtest-dev libgmock-dev libbenchmark-dev libssl-dev libboost-dev
  libseccomp-dev libarchive-dev
  clang libclang-rt-14-dev libfuzzer-14-dev
  docker.io busybox-static openssl ca-certificates curl python3 procps util-linux
  systemd
  # The microVM provider: qemu (TCG here), its disk tool, the guest's filesystems, and the
  # guest kernel's sources and build tools (tools/microvm/kernel).
  qemu-system-x86 qemu-utils e2fsprogs erofs-utils libarchive-tools
  linux-source-6.1 bc flex bison libelf-dev
  # The metrics: a real Prometheus scrapes the agent in //tests/e2e:metrics_test, and promtool
  # checks the shipped alerting rules (//tools/prometheus:rules_test).
  prometheus
)

sn_as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

sn_install_packages() {
  sn_install_extra "${SN_PACKAGES[@]}"
}

# sn_install_extra PACKAGE...: installs the named packages if missing (tools that only one
# script needs, e.g. debootstrap for tools/systemd/systemd_container_test.sh).
sn_install_extra() {
  local missing=()
  for p in "$@"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$p")
    fi
  done
  if [ "${#missing[@]}" -gt 0 ]; then
    echo "deps: installing ${missing[*]}" >&2
    sn_as_root apt-get update -qq
    sn_as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
      --no-install-recommends "${missing[@]}" >/dev/null
  fi
}

sn_docker_ready() {
  curl -sf --max-time 2 --unix-socket /var/run/docker.sock http://localhost/_ping >/dev/null 2>&1
}

sn_start_dockerd() {
  if sn_docker_ready; then return 0; fi
  echo "deps: starting dockerd (log: /var/log/dockerd.log)" >&2
  sn_as_root sh -c 'nohup dockerd >/var/log/dockerd.log 2>&1 &'
  for _ in $(seq 1 60); do
    if sn_docker_ready; then return 0; fi
    sleep 0.5
  done
  echo "deps: dockerd did not answer on /var/run/docker.sock; see /var/log/dockerd.log" >&2
  return 1
}
