#!/usr/bin/env bash
# Runs both shipped units for real, under systemd as PID 1, in a container built from Debian's
# archive, and drives the quickstart flow against them (docs/operator-guide.md, "Running the
# units under systemd in a container"):
#   1. builds agent, privhelper, native_helper and devcore (Bazel, default configuration);
#   2. builds a Debian 12 root filesystem with debootstrap (systemd, curl and the shared
#      libraries the binaries link), `docker import`s it (cached by its package list);
#   3. starts it with systemd as PID 1, the host's docker.sock bind-mounted, no network;
#   4. installs the binaries, both units and configs, creates the user sandbox-node, starts
#      devcore (a transient unit), `systemctl start`s privhelper, enrolls, starts the agent;
#   5. create, exec "hello from sandbox", kill, inspect (absent), as tools/quickstart.sh, and
#      before the kill an exec with stdin, write_file and read_file;
#   6. shows `systemctl status`, the live `systemd-analyze security` scores, the processes'
#      capabilities, no_new_privs and seccomp mode, the socket's directory and mode, and that
#      another uid cannot connect and the agent cannot write /run/sandbox-node;
#   7. proves which capabilities privhelper needs: with CAP_SETGID or CAP_SETPCAP removed from
#      its bounding set (a drop-in), the run that needs it fails (PROVE_CAPS=0 skips this).
# Run as root on a host with dockerd; needs Debian's archive (debootstrap) on the first run.
# Prints everything and writes it to $LOG (default /tmp/sn-systemd-container.log). Exits 0 only
# if every check passed. KEEP=1 keeps the container; SKIP_BUILD=1 uses the existing binaries.
# VIA_INSTALLER=1 replaces step 4 by sandbox-node-install (tools/install): the binaries are
# published as the console's current host program release, and the installer, run once in the
# container, creates the user, installs binaries, configurations and units, enrolls, and
# enables and starts both units as systemd is PID 1; a second run must change nothing.
# PROVIDER=microvm (with VIA_INSTALLER=1) installs the microVM provider instead
# (--provider=microvm: the privhelper unit's drop-in, the VM store and user; qemu from
# Debian's packages in the container, TCG): the same flow runs in a VM, and the VM must
# survive `systemctl restart sandbox-node-privhelper` (the drop-in's KillMode=process) with
# its qemu unprivileged, no_new_privs and under seccomp.
set -euo pipefail
cd "$(dirname "$0")/../.."
REPO=$(pwd)
[ "$(id -u)" -eq 0 ] || exec sudo -E "$0" "$@"

LOG=${LOG:-/tmp/sn-systemd-container.log}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
PROVE_CAPS=${PROVE_CAPS:-1}
VIA_INSTALLER=${VIA_INSTALLER:-0}
PROVIDER=${PROVIDER:-docker}
case "$PROVIDER" in
  docker) ;;
  microvm)
    [ "$VIA_INSTALLER" = 1 ] || { echo "PROVIDER=microvm needs VIA_INSTALLER=1" >&2; exit 2; }
    # The capability proof below is the Docker provider's set; the microVM provider's is
    # checked by what privhelper keeps (CHECKS) and by the VM running at all.
    PROVE_CAPS=0 ;;
  *) echo "PROVIDER must be docker or microvm" >&2; exit 2 ;;
esac
CTR=sn-systemd-test-$$
PORT=8780
ORIGIN=http://127.0.0.1:$PORT
exec > >(tee "$LOG") 2>&1
T0=$(date +%s)

# say HEADER: a phase's header; the phase before it ends with one line of the time it took.
PHASE_START=
say() {
  if [ -n "$PHASE_START" ]; then
    local t=$(( (${EPOCHREALTIME/[.,]/} - PHASE_START) / 100000 ))
    printf '    done in %d.%d s\n' $((t / 10)) $((t % 10))
  fi
  printf '\n==> %s\n' "$*"
  PHASE_START=${EPOCHREALTIME/[.,]/}
}
FAILURES=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; FAILURES=$((FAILURES + 1)); }
die() { echo "FAIL: $*"; exit 1; }
in_ctr() { docker exec -i "$CTR" "$@"; }
admin() {  # admin METHOD PATH [JSON] — devcore's admin API, from inside the container
  in_ctr curl -sS -f -X "$1" -H 'Content-Type: application/json' "$ORIGIN$2" ${3:+--data "$3"}
}
# The programs are one installed file (hard links), by hand as through the installer; with
# the microVM provider vm_supervisor is its fourth name.
check_one_file() {
  local names=(agent privhelper native_helper)
  [ "$PROVIDER" = microvm ] && names+=(vm_supervisor)
  if [ "$(in_ctr stat -c %i "${names[@]/#//usr/lib/sandbox-node/}" 2>/dev/null | sort -u | wc -l)" = 1 ] &&
     [ "$(in_ctr stat -c %h /usr/lib/sandbox-node/agent)" = "${#names[@]}" ]; then
    echo "ok: ${names[*]} are one installed file"
  else
    in_ctr ls -li /usr/lib/sandbox-node/ || true
    die "${names[*]} are not one installed file"
  fi
}
json() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }
# A devcore request answer: a response without "error_code" on success (kill has no result).
succeeded() {
  [ "$(echo "$1" | json 'd.get("type") == "response" and "error_code" not in d' 2>/dev/null)" = True ]
}
# The messages of privhelper's latest run (not systemd's), last N lines.
privhelper_log() {
  in_ctr sh -c "journalctl --no-pager -o cat _SYSTEMD_INVOCATION_ID=\$(systemctl show -p InvocationID --value sandbox-node-privhelper) _COMM=privhelper | tail -n $1"
}

WORK=$(mktemp -d /tmp/sn-systemd-XXXXXX)
INSTALLATION=
cleanup() {
  set +e
  if [ -n "$INSTALLATION" ]; then  # sandboxes this run left on the host's daemon
    docker ps -aq --filter "label=sn.installation=$INSTALLATION" | xargs -r docker rm -f >/dev/null
  fi
  if [ "${KEEP:-0}" = 1 ]; then
    echo "kept container $CTR (docker exec -it $CTR bash; docker rm -f $CTR)"
  else
    docker rm -f "$CTR" >/dev/null 2>&1
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

say "Tree under test: $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$REPO" diff --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes)')"

say "Packages (tools/deps.sh, debootstrap) and dockerd"
. tools/deps.sh
sn_install_packages
sn_install_extra debootstrap
sn_start_dockerd

say "Building agent, privhelper, native_helper, devcore"
MICROVM_TARGETS=()
[ "$PROVIDER" = microvm ] && MICROVM_TARGETS=(//tools/microvm:guest_initramfs //tools/microvm/kernel:vmlinux)
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  # Bazel's own progress, a line at most every 5 s (no curses: this output is a log).
  bazel build --curses=no --show_progress_rate_limit=5 \
    //agent //privhelper //privhelper/native:native_helper //tools/devcore \
    //tools/release //tools/install:sandbox-node-install "${MICROVM_TARGETS[@]}"
fi
BIN=$(bazel info bazel-bin 2>/dev/null)
BINARIES=("$BIN/agent/agent" "$BIN/privhelper/privhelper" "$BIN/privhelper/native/native_helper"
          "$BIN/tools/devcore/devcore")
for b in "${BINARIES[@]}" "$BIN/tools/release/release"; do
  [ -x "$b" ] || die "missing $b (build it, or unset SKIP_BUILD)"
done
# The console's release key (made for the occasion, on the host); both configurations name
# its public half.
RELEASE_KEY=$("$BIN/tools/release/release" keygen --private-key="$WORK/release.key") ||
  die "release keygen failed"

say "Debian 12 image with systemd (debootstrap, docker import)"
# The shared libraries the binaries link, as Debian packages, plus what the test uses.
INSTALLER="$BIN/tools/install/sandbox-node-install"
if [ "$VIA_INSTALLER" = 1 ]; then [ -x "$INSTALLER" ] || die "missing $INSTALLER"; fi
LIB_PACKAGES=$(for b in "${BINARIES[@]}"; do ldd "$b"; done | awk '/=> \//{print $3}' | sort -u |
  xargs -r realpath | while read -r f; do dpkg -S "$f" 2>/dev/null || dpkg -S "${f#/usr}"; done |
  cut -d: -f1 | sort -u | tr '\n' ' ')
VM_PACKAGES=
[ "$PROVIDER" = microvm ] && VM_PACKAGES="qemu-system-x86 qemu-utils"
PACKAGES=$(echo systemd dbus curl procps libseccomp2 $VM_PACKAGES $LIB_PACKAGES | tr ' ' '\n' | sort -u | paste -sd, -)
IMAGE=sn-systemd-test/debian12:$(echo "$PACKAGES" | sha256sum | cut -c1-12)
echo "packages: $PACKAGES"
if docker image inspect "$IMAGE" >/dev/null 2>&1; then
  echo "reusing $IMAGE"
else
  start=$(date +%s)
  debootstrap --variant=minbase --include="$PACKAGES" bookworm "$WORK/rootfs" "$MIRROR" \
    >"$WORK/debootstrap.log" 2>&1 || die "debootstrap failed: $(tail -n 5 "$WORK/debootstrap.log")"
  tar -C "$WORK/rootfs" -c . | docker import -c 'ENV container=docker' \
    -c 'CMD ["/lib/systemd/systemd"]' - "$IMAGE" >/dev/null
  rm -rf "$WORK/rootfs"
  echo "built $IMAGE in $(( $(date +%s) - start )) s"
fi

say "Starting the container with systemd as PID 1"
# --privileged asks for every capability runc knows; where dockerd's own bounding set lacks
# some (e.g. CAP_SYS_RESOURCE on these CI VMs) that fails, so: all capabilities dockerd has,
# no seccomp/AppArmor profile (systemd installs its own filters), /proc and /sys unmasked,
# the cgroup tree writable (v1, hybrid or v2) with the host's cgroup namespace.
CAP_NAMES=(CHOWN DAC_OVERRIDE DAC_READ_SEARCH FOWNER FSETID KILL SETGID SETUID SETPCAP
  LINUX_IMMUTABLE NET_BIND_SERVICE NET_BROADCAST NET_ADMIN NET_RAW IPC_LOCK IPC_OWNER SYS_MODULE
  SYS_RAWIO SYS_CHROOT SYS_PTRACE SYS_PACCT SYS_ADMIN SYS_BOOT SYS_NICE SYS_RESOURCE SYS_TIME
  SYS_TTY_CONFIG MKNOD LEASE AUDIT_WRITE AUDIT_CONTROL SETFCAP MAC_OVERRIDE MAC_ADMIN SYSLOG
  WAKE_ALARM BLOCK_SUSPEND AUDIT_READ PERFMON BPF CHECKPOINT_RESTORE)
DOCKERD_PID=$(pgrep -xo dockerd || echo 1)
BND=$((16#$(awk '/^CapBnd:/{print $2}' "/proc/$DOCKERD_PID/status")))
CAP_FLAGS=(--cap-add=ALL)
for i in "${!CAP_NAMES[@]}"; do
  (( (BND >> i) & 1 )) || CAP_FLAGS+=("--cap-drop=${CAP_NAMES[$i]}")
done
echo "capability flags: ${CAP_FLAGS[*]}"
docker run -d --name "$CTR" --hostname sn-systemd --network none \
  "${CAP_FLAGS[@]}" --security-opt seccomp=unconfined --security-opt apparmor=unconfined \
  --security-opt systempaths=unconfined \
  --cgroupns=host -v /sys/fs/cgroup:/sys/fs/cgroup:rw \
  --tmpfs /run --tmpfs /run/lock --tmpfs /tmp \
  -v /var/run/docker.sock:/run/docker.sock \
  "$IMAGE" >/dev/null
for _ in $(seq 1 100); do
  state=$(in_ctr systemctl is-system-running 2>/dev/null || true)
  case "$state" in running|degraded) break ;; esac
  sleep 0.2
done
echo "systemd in the container: ${state:-no answer} ($(in_ctr systemctl --version | head -n1))"
case "$state" in running|degraded) ;; *) die "systemd did not come up: $(docker logs "$CTR" 2>&1 | tail -n 5)" ;; esac

if [ "$VIA_INSTALLER" != 1 ]; then
say "Installing the binaries, the units, the user sandbox-node and the configurations"
in_ctr install -d -m 0755 /usr/lib/sandbox-node /etc/sandbox-node
# agent, privhelper and native_helper are one executable (the same bytes): copied once and
# hard-linked under the other two names, as the installer does (docs/operator-guide.md).
docker cp "$BIN/agent/agent" "$CTR:/usr/lib/sandbox-node/agent"
docker cp "$BIN/tools/devcore/devcore" "$CTR:/usr/lib/sandbox-node/devcore"
in_ctr sh -c 'ln /usr/lib/sandbox-node/agent /usr/lib/sandbox-node/privhelper
  ln /usr/lib/sandbox-node/agent /usr/lib/sandbox-node/native_helper'
docker cp tools/systemd/sandbox-node-privhelper.service "$CTR:/etc/systemd/system/"
docker cp tools/systemd/sandbox-node-agent.service "$CTR:/etc/systemd/system/"
in_ctr sh -c 'chown -R root:root /usr/lib/sandbox-node /etc/systemd/system/sandbox-node-*.service
  chmod 0755 /usr/lib/sandbox-node/*; chmod 0644 /etc/systemd/system/sandbox-node-*.service
  useradd --system --no-create-home --shell /usr/sbin/nologin sandbox-node'
AGENT_UID=$(in_ctr id -u sandbox-node)
in_ctr sh -c "cat >/etc/sandbox-node/privhelper.json" <<EOF
{"socket": "/run/sandbox-node/privhelper.sock", "agent_uid": $AGENT_UID, "state_dir": "/var/lib/sandbox-node/privhelper", "provider": "docker", "docker_socket": "/var/run/docker.sock", "release_public_key": "$RELEASE_KEY"}
EOF
in_ctr sh -c "cat >/etc/sandbox-node/agent.json" <<EOF
{"core_origin": "$ORIGIN", "state_dir": "/var/lib/sandbox-node/agent", "privhelper_socket": "/run/sandbox-node/privhelper.sock", "insecure_allow_http": true, "release_public_key": "$RELEASE_KEY"}
EOF
in_ctr chmod 0644 /etc/sandbox-node/privhelper.json /etc/sandbox-node/agent.json
in_ctr systemctl daemon-reload
else
  # Only devcore is put in place by hand (beside where the installer puts the node's binaries).
  in_ctr install -d -m 0755 /usr/lib/sandbox-node
  docker cp "$BIN/tools/devcore/devcore" "$CTR:/usr/lib/sandbox-node/devcore"
  docker cp "$INSTALLER" "$CTR:/usr/local/sbin/sandbox-node-install"
  in_ctr chown root:root /usr/lib/sandbox-node/devcore /usr/local/sbin/sandbox-node-install
fi

say "The sandbox image (busybox-static) and the specification devcore serves ($PROVIDER)"
ROOTFS="$WORK/busybox"
mkdir -p "$ROOTFS/bin" "$ROOTFS/tmp" "$ROOTFS/etc" "$ROOTFS/proc" "$ROOTFS/dev" "$ROOTFS/root"
cp /bin/busybox "$ROOTFS/bin/busybox"
for tool in sh echo cat ls sleep uname id; do ln -sf busybox "$ROOTFS/bin/$tool"; done
echo "root:x:0:0:root:/:/bin/sh" >"$ROOTFS/etc/passwd"
mkdir -p "$WORK/release-src" "$WORK/releases"
# artifact NAME KIND: the §6 artifact entry of $WORK/release-src/NAME.
artifact() {
  printf '{"name":"%s","kind":"%s","sha256":"%s","size":%s}' "$1" "$2" \
    "$(sha256sum "$WORK/release-src/$1" | cut -d' ' -f1)" "$(stat -c %s "$WORK/release-src/$1")"
}
if [ "$PROVIDER" = docker ]; then
  tar -C "$ROOTFS" -cf "$WORK/busybox.tar" .
  docker import "$WORK/busybox.tar" sn-systemd-test/busybox:1 >/dev/null
  IMAGE_ID=$(docker image inspect -f '{{.Id}}' sn-systemd-test/busybox:1)
  # The release artifact is the image archive `docker save` writes (what privhelper loads).
  curl -sS -f --unix-socket /var/run/docker.sock \
    "http://localhost/images/sn-systemd-test/busybox:1/get" >"$WORK/release-src/busybox.tar" ||
    die "docker save of the image failed"
  IMAGE_ARTIFACT=busybox.tar
  RUNTIME_FILES=(image="$WORK/release-src/busybox.tar")
  RUNTIME_ARTIFACTS=$(artifact busybox.tar image)
else
  # The root filesystem as an ext4 image (its sha256 is its identity), the repository's guest
  # kernel, guest agent and qemu seccomp policy, the host's microvm firmware: every byte the VM
  # runs is signed.
  "$BIN/tools/release/release" rootfs --output="$WORK/release-src/busybox.ext4" --dir="$ROOTFS" \
    --size-mib=64 || die "release rootfs failed"
  IMAGE_ID="sha256:$(sha256sum "$WORK/release-src/busybox.ext4" | cut -d' ' -f1)"
  install -m 0644 "$BIN/tools/microvm/kernel/vmlinux-sandbox-node" "$WORK/release-src/vmlinux"
  install -m 0644 "$BIN/tools/microvm/guest_initramfs.cpio" "$WORK/release-src/guest-agent.cpio"
  install -m 0644 /usr/share/qemu/bios-microvm.bin "$WORK/release-src/bios-microvm.bin"
  install -m 0644 tools/microvm/qemu-seccomp.json "$WORK/release-src/qemu-seccomp.json"
  IMAGE_ARTIFACT=busybox.ext4
  RUNTIME_FILES=(image="$WORK/release-src/busybox.ext4" kernel="$WORK/release-src/vmlinux"
                 guest_agent="$WORK/release-src/guest-agent.cpio"
                 firmware="$WORK/release-src/bios-microvm.bin"
                 seccomp="$WORK/release-src/qemu-seccomp.json")
  RUNTIME_ARTIFACTS="$(artifact busybox.ext4 image),$(artifact vmlinux kernel),$(artifact guest-agent.cpio guest_agent),$(artifact bios-microvm.bin firmware),$(artifact qemu-seccomp.json seccomp)"
fi
"$BIN/tools/release/release" publish --releases-dir="$WORK/releases" --source=systemd-test-1 \
  --private-key="$WORK/release.key" --make-current "${RUNTIME_FILES[@]}" ||
  die "release publish failed"
if [ "$VIA_INSTALLER" = 1 ]; then
  # The host program release, current (published after the Runtime's).
  "$BIN/tools/release/release" publish --releases-dir="$WORK/releases" --source=systemd-host-1 \
    --private-key="$WORK/release.key" --make-current agent="$BIN/agent/agent" \
    privhelper="$BIN/privhelper/privhelper" native_helper="$BIN/privhelper/native/native_helper" ||
    die "release publish of the host program failed"
fi
in_ctr install -d -m 0700 /var/lib/devcore
docker cp "$WORK/releases" "$CTR:/var/lib/devcore/releases"
printf '{"schema":1,"generation":1,"provider":"%s","runtime":{"source":"systemd-test-1","artifacts":[%s]},"images":[{"name":"busybox","artifact":"%s","identities":["%s"]}]}' \
  "$PROVIDER" "$RUNTIME_ARTIFACTS" "$IMAGE_ARTIFACT" "$IMAGE_ID" |
  in_ctr sh -c 'cat >/var/lib/devcore/spec.json'
echo "image id: $IMAGE_ID; release systemd-test-1 published"

say "Starting devcore (a transient unit) on $ORIGIN"
in_ctr systemd-run --unit=sn-devcore --quiet /usr/lib/sandbox-node/devcore \
  --listen=127.0.0.1:$PORT --state-dir=/var/lib/devcore --specification=/var/lib/devcore/spec.json \
  --releases-dir=/var/lib/devcore/releases
for _ in $(seq 1 100); do admin GET /admin/v1/nodes >/dev/null 2>&1 && break; sleep 0.1; done
admin GET /admin/v1/nodes >/dev/null || die "devcore did not answer: $(in_ctr journalctl -u sn-devcore --no-pager | tail -n 5)"

if [ "$VIA_INSTALLER" != 1 ]; then
say "systemctl start sandbox-node-privhelper"
if in_ctr systemctl start sandbox-node-privhelper; then
  ok "privhelper started and its socket exists (ExecStartPost)"
else
  in_ctr systemctl status --no-pager -l sandbox-node-privhelper || true
  die "privhelper did not start"
fi

say "Enrolling as sandbox-node (agent enroll), then systemctl start sandbox-node-agent"
in_ctr install -d -o sandbox-node -g sandbox-node -m 0700 /var/lib/sandbox-node/agent
TOKEN=$(admin POST /admin/v1/enrollment-tokens '{}' | json 'd["token"]')
# The token on the agent's standard input (--token-file=-), never on a command line (every
# local user reads /proc/<pid>/cmdline); `docker exec -i` passes stdin through.
printf '%s\n' "$TOKEN" | in_ctr runuser -u sandbox-node -- /usr/lib/sandbox-node/agent enroll \
  --config=/etc/sandbox-node/agent.json --token-file=- || die "enroll failed"
else
  say "sandbox-node-install (systemd is PID 1: it enables and starts both units)"
  TOKEN=$(admin POST /admin/v1/enrollment-tokens '{}' | json 'd["token"]')
  # The token in a file of root's alone (--token-file refuses one open to group or others).
  printf '%s\n' "$TOKEN" | in_ctr sh -c 'umask 077 && cat > /root/enrollment-token' \
    || die "could not write the token file"
  in_ctr /usr/local/sbin/sandbox-node-install --core-origin="$ORIGIN" \
    --token-file=/root/enrollment-token --release-public-key="$RELEASE_KEY" \
    --insecure-allow-http --provider="$PROVIDER" || die "sandbox-node-install failed"
  for unit in sandbox-node-privhelper sandbox-node-agent; do
    if in_ctr systemctl is-enabled --quiet "$unit" && in_ctr systemctl is-active --quiet "$unit"; then
      ok "$unit enabled and active"
    else
      bad "$unit is not enabled and active"
    fi
  done
  AGAIN=$(in_ctr /usr/local/sbin/sandbox-node-install --core-origin="$ORIGIN" \
    --token-file=/root/enrollment-token --release-public-key="$RELEASE_KEY" \
    --insecure-allow-http --provider="$PROVIDER") || die "the second run failed"
  in_ctr rm -f /root/enrollment-token
  echo "$AGAIN"
  case "$AGAIN" in *"nothing changed"*) ok "a second run changes nothing" ;; *) bad "second run" ;; esac
fi
check_one_file
NODE_ID=$(in_ctr cat /var/lib/sandbox-node/agent/node/identity.json | json 'd["node_id"]')
INSTALLATION=$(in_ctr cat /var/lib/sandbox-node/agent/node/identity.json | json 'd["installation_id"]')
echo "node id: $NODE_ID, installation: $INSTALLATION"
if [ "$VIA_INSTALLER" != 1 ]; then
  in_ctr systemctl start sandbox-node-agent || die "the agent did not start"
fi
presence() {
  admin GET /admin/v1/nodes | json "[n for n in d['nodes'] if n['node_id']=='$NODE_ID'][0]['presence']"
}
for _ in $(seq 1 300); do [ "$(presence 2>/dev/null)" = connected ] && break; sleep 0.1; done
if [ "$(presence)" = connected ]; then ok "the agent (a systemd unit) connected to devcore"; else
  in_ctr journalctl -u sandbox-node-agent --no-pager | tail -n 20
  die "the agent did not connect"
fi

say "The quickstart flow against the two units"
request() {  # request OPERATION ARGUMENTS_JSON
  admin POST "/admin/v1/nodes/$NODE_ID/requests" \
    "{\"generation\":1,\"operation\":\"$1\",\"timeout_ms\":60000,\"arguments\":$2}"
}
SANDBOX=$(python3 -c 'import uuid; print(uuid.uuid4())')
OUT=$(request create "{\"sandbox_id\":\"$SANDBOX\",\"image\":\"busybox\",\"command\":[\"sleep\",\"3600\"],\"cpu_millis\":500,\"memory_bytes\":67108864}" || true)
echo "create: $OUT"
succeeded "$OUT" && ok "create succeeded" || bad "create"
OUT=$(request exec "{\"sandbox_id\":\"$SANDBOX\",\"argv\":[\"sh\",\"-c\",\"echo hello from sandbox; uname -s\"],\"output_limit_bytes\":65536}" || true)
echo "exec: $OUT"
STDOUT=$(echo "$OUT" | python3 -c 'import json,sys,base64; print(base64.b64decode(json.load(sys.stdin)["result"]["stdout"]).decode(), end="")' 2>/dev/null || true)
printf 'stdout: %s\n' "$STDOUT"
case "$STDOUT" in "hello from sandbox"*) ok "exec printed hello from sandbox" ;; *) bad "exec" ;; esac
# Beyond the quickstart: the native helper's other paths (stdin, file transfer) under the
# unit's system call filter.
NOTE=$(printf 'written through both units\n' | base64 -w0)
OUT=$(request exec "{\"sandbox_id\":\"$SANDBOX\",\"argv\":[\"cat\"],\"stdin\":\"$NOTE\",\"output_limit_bytes\":1024}" || true)
[ "$(echo "$OUT" | json 'd["result"]["stdout"]' 2>/dev/null)" = "$NOTE" ] && ok "exec with stdin echoed it" \
  || bad "exec with stdin: $OUT"
OUT=$(request write_file "{\"sandbox_id\":\"$SANDBOX\",\"path\":\"/tmp/note\",\"mode\":384,\"content\":\"$NOTE\"}" || true)
succeeded "$OUT" && ok "write_file succeeded" || bad "write_file: $OUT"
OUT=$(request read_file "{\"sandbox_id\":\"$SANDBOX\",\"path\":\"/tmp/note\",\"max_bytes\":1024}" || true)
[ "$(echo "$OUT" | json 'd["result"]["content"]' 2>/dev/null)" = "$NOTE" ] && ok "read_file read it back" \
  || bad "read_file: $OUT"
if [ "$PROVIDER" = microvm ]; then
  say "The VM under the units: its kernel, qemu's credentials, and a restart of privhelper"
  OUT=$(request exec "{\"sandbox_id\":\"$SANDBOX\",\"argv\":[\"uname\",\"-r\"],\"output_limit_bytes\":1024}" || true)
  GUEST=$(echo "$OUT" | python3 -c 'import json,sys,base64; print(base64.b64decode(json.load(sys.stdin)["result"]["stdout"]).decode().strip())' 2>/dev/null || true)
  echo "guest kernel: $GUEST (the container's: $(in_ctr uname -r))"
  [ -n "$GUEST" ] && [ "$GUEST" != "$(in_ctr uname -r)" ] && ok "exec ran in the guest's own kernel" \
    || bad "exec in the guest: $OUT"
  VM_UID=$(in_ctr id -u sandbox-node-vm)
  QEMU=$(in_ctr pgrep -o -f '^/usr/bin/qemu-system-x86_64 ' || true)
  if [ -n "$QEMU" ]; then
    QSTATUS=$(in_ctr cat "/proc/$QEMU/status")
    echo "$QSTATUS" | grep -E '^(Uid|Gid|Groups|CapEff|CapBnd|NoNewPrivs|Seccomp):'
    [ "$(echo "$QSTATUS" | awk '/^Uid:/{print $2 $3 $4 $5}')" = "$VM_UID$VM_UID$VM_UID$VM_UID" ] &&
      [ "$(echo "$QSTATUS" | awk '/^CapEff:/{print $2}')" = 0000000000000000 ] &&
      [ "$(echo "$QSTATUS" | awk '/^CapBnd:/{print $2}')" = 0000000000000000 ] &&
      [ "$(echo "$QSTATUS" | awk '/^NoNewPrivs:/{print $2}')" = 1 ] &&
      [ "$(echo "$QSTATUS" | awk '/^Seccomp:/{print $2}')" = 2 ] &&
      ok "qemu runs as sandbox-node-vm ($VM_UID), no capability (bounding set empty), no_new_privs, seccomp filter" ||
      bad "qemu's credentials"
    # Its CPU quota: exactly the create's cpu_millis (500: 50000 µs per 100000 µs), in the
    # VM's own cgroup (vm_cgroup.h), v1 or v2 as the host has it.
    QCG=$(in_ctr cat "/proc/$QEMU/cgroup" | grep -m1 "sandbox-node-vms/$SANDBOX" | cut -d: -f3- || true)
    BW=""; QCG_DIR=""
    for root in /sys/fs/cgroup/cpu /sys/fs/cgroup/cpu,cpuacct /sys/fs/cgroup; do
      [ -z "$QCG" ] && break
      QCG_DIR="$root$QCG"
      if in_ctr test -e "$root$QCG/cpu.cfs_quota_us"; then
        BW="$(in_ctr cat "$root$QCG/cpu.cfs_quota_us") $(in_ctr cat "$root$QCG/cpu.cfs_period_us")"; break
      elif in_ctr test -e "$root$QCG/cpu.max"; then
        BW="$(in_ctr cat "$root$QCG/cpu.max")"; break
      fi
    done
    echo "qemu's cgroup: ${QCG:-none}, bandwidth: ${BW:-none}"
    [ "$BW" = "50000 100000" ] && ok "qemu runs in its own cgroup with a CPU quota of exactly cpu_millis 500" \
      || bad "qemu's CPU quota (cgroup ${QCG:-none}, bandwidth ${BW:-none})"
  else
    bad "no qemu runs in the container"
  fi
  in_ctr systemctl restart sandbox-node-privhelper || bad "systemctl restart sandbox-node-privhelper"
  [ -n "$QEMU" ] && in_ctr kill -0 "$QEMU" 2>/dev/null \
    && ok "the VM's qemu ($QEMU) survived systemctl restart sandbox-node-privhelper (KillMode=process)" \
    || bad "the VM did not survive a restart of privhelper"
  for _ in $(seq 1 300); do
    OUT=$(request exec "{\"sandbox_id\":\"$SANDBOX\",\"argv\":[\"cat\",\"/tmp/note\"],\"output_limit_bytes\":1024}" || true)
    succeeded "$OUT" && break
    sleep 0.2
  done
  [ "$(echo "$OUT" | json 'd["result"]["stdout"]' 2>/dev/null)" = "$NOTE" ] \
    && ok "after the restart the same VM answers (its file kept)" || bad "exec after the restart: $OUT"
  in_ctr journalctl --no-pager -o cat _COMM=privhelper | grep -m1 'microvm usability probe' || true
fi
OUT=$(request kill "{\"sandbox_id\":\"$SANDBOX\"}" || true)
echo "kill: $OUT"
succeeded "$OUT" && ok "kill succeeded" || bad "kill"
OUT=$(request inspect "{\"sandbox_id\":\"$SANDBOX\"}" || true)
echo "inspect: $OUT"
[ "$(echo "$OUT" | json 'd["result"]["state"]' 2>/dev/null)" = absent ] && ok "inspect after kill: absent" \
  || bad "inspect after kill is not absent"
if [ "$PROVIDER" = microvm ] && [ -n "${QCG_DIR:-}" ]; then
  in_ctr test ! -e "$QCG_DIR" && ok "the VM's cgroup went with it" || bad "the VM's cgroup $QCG_DIR is left"
fi

say "systemctl status"
in_ctr systemctl status --no-pager -l sandbox-node-privhelper sandbox-node-agent || true

say "systemd-analyze security (live, systemd as PID 1)"
for u in sandbox-node-privhelper sandbox-node-agent; do
  in_ctr systemd-analyze security --no-pager "$u.service" | grep -v '^✓' || true
done
level() { in_ctr systemd-analyze security --no-pager "$1" | sed -n 's/.*exposure level for [^:]*: \([0-9.]*\).*/\1/p'; }
lp=$(level sandbox-node-privhelper.service)
la=$(level sandbox-node-agent.service)
awk -v a="$lp" 'BEGIN{exit !(a+0 <= 2.0 && a != "")}' && ok "privhelper exposure $lp <= 2.0" || bad "privhelper exposure $lp"
awk -v a="$la" 'BEGIN{exit !(a+0 <= 1.5 && a != "")}' && ok "agent exposure $la <= 1.5" || bad "agent exposure $la"

say "What the processes hold (capabilities, no_new_privs, seccomp)"
in_ctr bash -s <<'EOF'
show() {  # show NAME PID
  [ -n "$2" ] || { echo "$1: not running"; return; }
  printf '%s (pid %s, uid %s):' "$1" "$2" "$(awk '/^Uid:/{print $2}' /proc/$2/status)"
  awk '/^(CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp):/{printf " %s %s", $1, $2}' /proc/$2/status
  echo
}
show privhelper "$(systemctl show -p MainPID --value sandbox-node-privhelper)"
show agent "$(systemctl show -p MainPID --value sandbox-node-agent)"
for p in $(pgrep -x native_helper); do show native_helper "$p"; done
echo "CAP_SETGID is bit 6 (0x40), CAP_SETPCAP bit 8 (0x100): the unit grants 0x140, privhelper keeps 0x100."
ls -ld /run/sandbox-node
ls -ln /run/sandbox-node/privhelper.sock
EOF
# The unit grants CAP_SETGID and CAP_SETPCAP; once its socket is bound privhelper keeps only
# CAP_SETPCAP (for the helpers' spawn), in every thread and in every set. With the microVM
# provider (the drop-in grants them) also CAP_CHOWN, CAP_SETGID and CAP_SETUID (the overlay's
# owner, the supervisor's drop of qemu to the VM's uid): 0x1c1.
KEPT=0000000000000100 KEPT_NAMES=CAP_SETPCAP
[ "$PROVIDER" = microvm ] && KEPT=00000000000001c1 KEPT_NAMES="CAP_CHOWN CAP_SETGID CAP_SETUID CAP_SETPCAP"
CHECKS=$(in_ctr env KEPT="$KEPT" KEPT_NAMES="$KEPT_NAMES" bash -s <<'EOF'
ph=$(systemctl show -p MainPID --value sandbox-node-privhelper)
for t in /proc/$ph/task/*; do
  for set in CapBnd CapPrm CapEff; do
    v=$(awk -v s="$set:" '$1==s{print $2}' "$t/status")
    [ "$v" = "$KEPT" ] || echo "FAIL: privhelper thread ${t##*/} $set is $v"
  done
done
[ "$(awk '/^CapBnd:/{print $2}' /proc/$ph/status)" = "$KEPT" ] \
  && echo "ok: privhelper keeps exactly $KEPT_NAMES after start (bounding, permitted, effective)" \
  || echo "FAIL: privhelper's bounding set is $(awk '/^CapBnd:/{print $2}' /proc/$ph/status)"
[ "$(stat -c '%U:%G %a' /run/sandbox-node)" = "root:root 755" ] \
  && echo "ok: /run/sandbox-node is root:root 0755" || echo "FAIL: /run/sandbox-node is $(stat -c '%U:%G %a' /run/sandbox-node)"
[ "$(stat -c '%U:%G %a %F' /run/sandbox-node/privhelper.sock)" = "root:sandbox-node 660 socket" ] \
  && echo "ok: the socket is root:sandbox-node 0660" \
  || echo "FAIL: the socket is $(stat -c '%U:%G %a %F' /run/sandbox-node/privhelper.sock)"
if runuser -u sandbox-node -- touch /run/sandbox-node/planted 2>/dev/null; then
  echo "FAIL: the agent's uid can create entries in /run/sandbox-node"
else
  echo "ok: the agent's uid cannot create entries in /run/sandbox-node"
fi
runuser -u nobody -- curl -s --max-time 2 --unix-socket /run/sandbox-node/privhelper.sock http://x/ >/dev/null 2>&1
[ $? -eq 7 ] && echo "ok: another uid cannot connect to the socket" \
  || echo "FAIL: another uid reached the socket"
for p in $(pgrep -x native_helper); do
  [ "$(awk '/^CapEff:/{print $2}' /proc/$p/status)" = 0000000000000000 ] \
    && echo "ok: native_helper $p has no capability" || echo "FAIL: native_helper $p holds capabilities"
done
EOF
)
echo "$CHECKS"
FAILURES=$((FAILURES + $(grep -c '^FAIL: ' <<<"$CHECKS" || true)))

sigsys=$(in_ctr journalctl --no-pager | grep -c 'status=31/SYS' || true)
[ "$sigsys" -eq 0 ] && ok "no process was killed by a unit's system call filter" \
  || bad "$sigsys process(es) killed by a system call filter (status=31/SYS)"

say "Journal of both units"
in_ctr journalctl --no-pager -o short-monotonic -u sandbox-node-privhelper -u sandbox-node-agent | tail -n 40

if [ "$PROVE_CAPS" = 1 ]; then
  say "Which capabilities privhelper needs: each run with one removed from the bounding set"
  try_caps() {  # try_caps "CAPS" -> prints the outcome of start + create
    in_ctr sh -c "mkdir -p /run/systemd/system/sandbox-node-privhelper.service.d &&
      printf '[Service]\nCapabilityBoundingSet=\nCapabilityBoundingSet=%s\n' '$1' \
        >/run/systemd/system/sandbox-node-privhelper.service.d/caps.conf && systemctl daemon-reload"
    in_ctr systemctl reset-failed sandbox-node-privhelper sandbox-node-agent 2>/dev/null || true
    if ! in_ctr systemctl restart sandbox-node-privhelper 2>/dev/null; then
      echo "bounding set '${1:-(empty)}': privhelper does not start:"
      privhelper_log 2 | sed 's/^/    /'
      return 1
    fi
    in_ctr systemctl start sandbox-node-agent
    for _ in $(seq 1 300); do [ "$(presence 2>/dev/null)" = connected ] && break; sleep 0.1; done
    local sb out
    sb=$(python3 -c 'import uuid; print(uuid.uuid4())')
    out=$(request create "{\"sandbox_id\":\"$sb\",\"image\":\"busybox\",\"command\":[\"sleep\",\"60\"],\"cpu_millis\":100,\"memory_bytes\":33554432}" || true)
    request kill "{\"sandbox_id\":\"$sb\"}" >/dev/null 2>&1 || true
    if succeeded "$out"; then
      echo "bounding set '${1:-(empty)}': privhelper starts and create succeeds"
      return 0
    fi
    echo "bounding set '${1:-(empty)}': privhelper starts, create fails: $out"
    privhelper_log 2 | sed 's/^/    /'
    return 1
  }
  try_caps "" && bad "privhelper works with no capability at all?" || ok "no capability: fails"
  try_caps "CAP_SETPCAP" && bad "CAP_SETGID is not needed?" || ok "without CAP_SETGID: fails"
  try_caps "CAP_SETGID" && bad "CAP_SETPCAP is not needed?" || ok "without CAP_SETPCAP: fails"
  try_caps "CAP_SETGID CAP_SETPCAP" && ok "CAP_SETGID CAP_SETPCAP: works" || bad "the unit's own set fails"
  in_ctr sh -c 'rm -rf /run/systemd/system/sandbox-node-privhelper.service.d && systemctl daemon-reload'
fi

say "Result"
if [ "$FAILURES" -eq 0 ]; then
  echo "all checks passed in $(( $(date +%s) - T0 )) s (log: $LOG)"
else
  echo "$FAILURES check(s) failed in $(( $(date +%s) - T0 )) s (log: $LOG)"
  exit 1
fi
