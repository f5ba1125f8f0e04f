#!/usr/bin/env bash
# Quickstart: the whole node on one machine, narrated.
#   1. installs what is missing and builds the three programs;
#   2. builds a small busybox image from Debian's busybox-static (no registry) in dockerd, and
#      publishes its image archive (what `docker save` writes) as a signed console release
#      with tools/release (a release key made for the occasion);
#   3. starts devcore (Core for development, serving that release), privhelper (root) and the
#      agent (an unprivileged user) on loopback, enrolls the node — which prepares its
#      generation from the release: verified metadata, the archive streamed into privhelper,
#      imported through the Engine API — and waits for it to connect;
#   4. asks Core to create a sandbox, runs a command in it, prints the output, kills it;
#   5. shuts everything down.
# With ROLLOUT=1 the node manages its generations (agent `generation_management`) and, between
# 4's exec and kill, the script narrates a rollout: it publishes a second image as the signed
# release quickstart-2, adds generation 2 to Core (POST /admin/v1/generations), targets it
# (PUT /admin/v1/nodes/{id}/deployment) while the sandbox of generation 1 keeps answering,
# waits for the node to report 2 ready, switches serving to 2, creates a sandbox on 2 and runs
# a command in both.
# With PROVIDER=microvm the sandbox is a microVM instead of a container (issue 25): the script
# also builds the guest kernel (from Debian's linux-source-6.1: minutes on 2 cores) and the
# guest agent, makes the root filesystem an ext4 image (`release rootfs`), publishes it with the
# kernel, the guest agent, qemu's seccomp policy (tools/microvm/qemu-seccomp.json) and the
# host's microvm firmware as the signed release, runs privhelper with provider "microvm" (qemu
# under TCG, or KVM where it runs guests), prints the guest's own kernel release from inside
# the sandbox, and leaves no qemu running however it ends.
# Run as root (or through sudo) on Debian 12. Everything it creates lives in one temporary
# directory, which it removes unless KEEP=1.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)

# say HEADER: a phase's header; the phase before it ends with one line of the time it took.
PHASE_START=
phase_done() {
  [ -n "$PHASE_START" ] || return 0
  local t=$(( (${EPOCHREALTIME/[.,]/} - PHASE_START) / 100000 ))
  printf '    done in %d.%d s\n' $((t / 10)) $((t % 10))
  PHASE_START=
}
say() { phase_done; printf '\n==> %s\n' "$*"; PHASE_START=${EPOCHREALTIME/[.,]/}; }
die() { printf '\nquickstart: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || exec sudo -E "$0" "$@"
PROVIDER=${PROVIDER:-docker}
case "$PROVIDER" in docker|microvm) ;; *) die "PROVIDER must be docker or microvm, not $PROVIDER";; esac
[ "$PROVIDER" = docker ] || [ "${ROLLOUT:-0}" != 1 ] || die "ROLLOUT=1 is narrated with the Docker provider only"

say "Installing missing Debian packages (idempotent) and starting dockerd if needed"
. tools/deps.sh
sn_install_packages
sn_start_dockerd

say "Building agent, privhelper, native helper, devcore and the release tool with Bazel"
MICROVM_TARGETS=()
if [ "$PROVIDER" = microvm ]; then
  MICROVM_TARGETS=(//tools/microvm:guest_initramfs //tools/microvm/kernel:vmlinux)
  echo "(microvm: also the guest agent and the guest kernel)"
fi
# Bazel's own progress, a line at most every 5 s (no curses: readable in a log too).
bazel build --curses=no --show_progress_rate_limit=5 \
  //agent //privhelper //privhelper/native:native_helper //tools/devcore //tools/release \
  "${MICROVM_TARGETS[@]}"

WORK=$(mktemp -d /tmp/sn-quickstart-XXXXXX)
chmod 755 "$WORK"
PIDS=()
cleanup() {
  set +e
  say "Shutting down"
  for pid in "${PIDS[@]}"; do kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null; done
  # A VM's supervisor is in a session of its own (it outlives privhelper by design): kill the
  # ones of this run's store; qemu dies with its supervisor.
  if [ "$PROVIDER" = microvm ]; then
    pkill -KILL -f "vm_supervisor --vm-dir=$WORK/vm/" 2>/dev/null
    for _ in $(seq 1 50); do pgrep -f "$WORK/vm/" >/dev/null || break; sleep 0.1; done
    pgrep -af "qemu-system.*$WORK/vm/" && echo "quickstart: a qemu of this run is still running" >&2
  fi
  if [ "${KEEP:-0}" = 1 ]; then echo "kept $WORK (logs: $WORK/*.log)"; else rm -rf "$WORK"; fi
  phase_done
}
trap cleanup EXIT

mkdir -p "$WORK/bin"
for b in agent/agent tools/devcore/devcore tools/release/release; do
  install -m 0755 "bazel-bin/$b" "$WORK/bin/"
done
# agent, privhelper, native_helper and vm_supervisor are one executable under four names,
# installed once and hard-linked, so the processes share its pages (docs/architecture.md);
# privhelper starts each VM's supervisor from beside its own executable.
for b in privhelper native_helper vm_supervisor; do ln "$WORK/bin/agent" "$WORK/bin/$b"; done

DOCKER_SOCK=/var/run/docker.sock
api() { curl -sf --unix-socket "$DOCKER_SOCK" "$@"; }

say "Building the root filesystem of sn-quickstart/busybox:1 from /bin/busybox (busybox-static)"
ROOTFS="$WORK/rootfs"
mkdir -p "$ROOTFS/bin" "$ROOTFS/tmp" "$ROOTFS/etc" "$ROOTFS/proc" "$ROOTFS/dev" "$ROOTFS/root"
cp /bin/busybox "$ROOTFS/bin/busybox"
for tool in sh echo cat ls sleep uname id hostname env true; do ln -sf busybox "$ROOTFS/bin/$tool"; done
echo "root:x:0:0:root:/:/bin/sh" > "$ROOTFS/etc/passwd"
# import_rootfs TAG: $ROOTFS as the image sn-quickstart/busybox:TAG; prints its image ID.
import_rootfs() {
  tar -C "$ROOTFS" -cf "$WORK/busybox-rootfs-$1.tar" .
  api -X POST -H 'Content-Type: application/x-tar' --data-binary "@$WORK/busybox-rootfs-$1.tar" \
    "http://localhost/images/create?fromSrc=-&repo=sn-quickstart/busybox&tag=$1" >/dev/null \
    || die "image import failed"
  api "http://localhost/images/sn-quickstart/busybox:$1/json" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Id"])'
}
mkdir -p "$WORK/release-src" "$WORK/releases" "$WORK/devcore"
RELEASE_KEY=$("$WORK/bin/release" keygen --private-key="$WORK/release.key") || die "release keygen failed"
echo "release public key (the nodes' release_public_key): $RELEASE_KEY"
# artifact NAME KIND: the §6 artifact entry of $WORK/release-src/NAME.
artifact() {
  printf '{"name":"%s","kind":"%s","sha256":"%s","size":%s}' "$1" "$2" \
    "$(sha256sum "$WORK/release-src/$1" | cut -d' ' -f1)" "$(stat -c %s "$WORK/release-src/$1")"
}
if [ "$PROVIDER" = docker ]; then
  IMAGE_ID=$(import_rootfs 1)
  echo "image id: $IMAGE_ID"
  say "Publishing the image archive as the signed release quickstart-1 (tools/release)"
  # GET /images/{name}/get is what `docker save` calls: the image archive privhelper will load.
  api "http://localhost/images/sn-quickstart/busybox:1/get" > "$WORK/release-src/busybox.tar" \
    || die "docker save failed"
  "$WORK/bin/release" publish --releases-dir="$WORK/releases" --source=quickstart-1 \
    --private-key="$WORK/release.key" --make-current image="$WORK/release-src/busybox.tar" \
    || die "release publish failed"
  IMAGE_ARTIFACT=busybox.tar
  RUNTIME_ARTIFACTS=$(artifact busybox.tar image)
else
  say "Making the root filesystem an ext4 image (release rootfs: deterministic, its sha256 is its identity)"
  "$WORK/bin/release" rootfs --output="$WORK/release-src/busybox.ext4" --dir="$ROOTFS" --size-mib=64 \
    || die "release rootfs failed"
  IMAGE_ID="sha256:$(sha256sum "$WORK/release-src/busybox.ext4" | cut -d' ' -f1)"
  echo "image identity: $IMAGE_ID"
  install -m 0644 bazel-bin/tools/microvm/kernel/vmlinux-sandbox-node "$WORK/release-src/vmlinux"
  install -m 0644 bazel-bin/tools/microvm/guest_initramfs.cpio "$WORK/release-src/guest-agent.cpio"
  install -m 0644 /usr/share/qemu/bios-microvm.bin "$WORK/release-src/bios-microvm.bin"
  install -m 0644 tools/microvm/qemu-seccomp.json "$WORK/release-src/qemu-seccomp.json"
  say "Publishing the image, the guest kernel, the guest agent, qemu's seccomp policy and the firmware as the signed release quickstart-1"
  "$WORK/bin/release" publish --releases-dir="$WORK/releases" --source=quickstart-1 \
    --private-key="$WORK/release.key" --make-current image="$WORK/release-src/busybox.ext4" \
    kernel="$WORK/release-src/vmlinux" guest_agent="$WORK/release-src/guest-agent.cpio" \
    firmware="$WORK/release-src/bios-microvm.bin" seccomp="$WORK/release-src/qemu-seccomp.json" \
    || die "release publish failed"
  IMAGE_ARTIFACT=busybox.ext4
  RUNTIME_ARTIFACTS="$(artifact busybox.ext4 image),$(artifact vmlinux kernel),$(artifact guest-agent.cpio guest_agent),$(artifact bios-microvm.bin firmware),$(artifact qemu-seccomp.json seccomp)"
fi

say "Writing the deployment specification (generation 1, provider $PROVIDER) that devcore serves"
printf '{"schema":1,"generation":1,"provider":"%s","runtime":{"source":"quickstart-1","artifacts":[%s]},"images":[{"name":"busybox","artifact":"%s","identities":["%s"]}]}' \
  "$PROVIDER" "$RUNTIME_ARTIFACTS" "$IMAGE_ARTIFACT" "$IMAGE_ID" > "$WORK/devcore/spec.json"

say "Starting devcore on loopback"
setsid "$WORK/bin/devcore" --listen=127.0.0.1:0 --state-dir="$WORK/devcore" \
  --specification="$WORK/devcore/spec.json" --releases-dir="$WORK/releases" \
  >"$WORK/devcore.out" 2>"$WORK/devcore.log" &
PIDS+=($!)
for _ in $(seq 1 100); do grep -q '^listening on ' "$WORK/devcore.out" 2>/dev/null && break; sleep 0.1; done
ORIGIN=$(head -n1 "$WORK/devcore.out" | sed 's/^listening on //')
[ -n "$ORIGIN" ] || die "devcore did not start: $(tail -n 5 "$WORK/devcore.log")"
echo "devcore: $ORIGIN"
admin() { curl -sf -X "$1" -H 'Content-Type: application/json' "$ORIGIN$2" ${3:+--data "$3"}; }

say "Creating the unprivileged user sn-agent for the agent (if missing)"
id sn-agent >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin sn-agent
AGENT_UID=$(id -u sn-agent)
AGENT_GID=$(id -g sn-agent)

say "Starting privhelper as root (serves uid $AGENT_UID only; at most 16 running and 64 retained sandboxes)"
mkdir -p -m 0700 "$WORK/privhelper/state"
PROVIDER_CONFIG=
if [ "$PROVIDER" = microvm ]; then
  # qemu runs as nobody:nogroup (never root, never the agent), with a store of its own.
  PROVIDER_CONFIG=", \"microvm\": {\"store_dir\": \"$WORK/vm\", \"vm_uid\": $(id -u nobody), \"vm_gid\": $(getent group nogroup | cut -d: -f3), \"accel\": \"auto\", \"free_space_floor_bytes\": 0}"
fi
cat > "$WORK/privhelper/config.json" <<EOF
{"socket": "$WORK/privhelper/ph.sock", "agent_uid": $AGENT_UID, "state_dir": "$WORK/privhelper/state", "provider": "$PROVIDER", "max_active": 16, "max_retained": 64, "release_public_key": "$RELEASE_KEY"$PROVIDER_CONFIG}
EOF
setsid "$WORK/bin/privhelper" --config="$WORK/privhelper/config.json" 2>"$WORK/privhelper.log" &
PIDS+=($!)
for _ in $(seq 1 100); do [ -S "$WORK/privhelper/ph.sock" ] && break; sleep 0.1; done
[ -S "$WORK/privhelper/ph.sock" ] || die "privhelper did not start: $(tail -n 5 "$WORK/privhelper.log")"

ROLLOUT=${ROLLOUT:-0}
GENERATION_MANAGEMENT=
if [ "$ROLLOUT" = 1 ]; then
  GENERATION_MANAGEMENT=', "generation_management": true'
  say "Enrolling the node (agent enroll, as sn-agent) with generation management: it prepares generation 1 once connected, from the signed release"
else
  say "Enrolling the node (agent enroll, as sn-agent): Core enrolls it, and it prepares generation 1 from the signed release"
fi
mkdir -p "$WORK/agent"
chown sn-agent:sn-agent "$WORK/agent"
chmod 700 "$WORK/agent"
cat > "$WORK/agent/config.json" <<EOF
{"core_origin": "$ORIGIN", "state_dir": "$WORK/agent/state", "privhelper_socket": "$WORK/privhelper/ph.sock", "insecure_allow_http": true, "release_public_key": "$RELEASE_KEY"$GENERATION_MANAGEMENT}
EOF
chown sn-agent:sn-agent "$WORK/agent/config.json"
TOKEN=$(admin POST /admin/v1/enrollment-tokens '{}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])')
as_agent() { setpriv --reuid="$AGENT_UID" --regid="$AGENT_GID" --clear-groups "$@"; }
# The token goes on the agent's standard input (--token-file=-), never on its command line:
# every local user can read /proc/<pid>/cmdline. (printf is a builtin: no process shows it.)
printf '%s\n' "$TOKEN" | as_agent "$WORK/bin/agent" enroll --config="$WORK/agent/config.json" \
  --token-file=- 2>"$WORK/enroll.log" || die "enroll failed: $(tail -n 5 "$WORK/enroll.log")"
NODE_ID=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["node_id"])' "$WORK/agent/state/node/identity.json")
echo "node id: $NODE_ID"

say "Starting the agent (agent run, as sn-agent) and waiting for it to connect"
setsid setpriv --reuid="$AGENT_UID" --regid="$AGENT_GID" --clear-groups \
  "$WORK/bin/agent" run --config="$WORK/agent/config.json" 2>"$WORK/agent.log" &
PIDS+=($!)
node_field() { admin GET /admin/v1/nodes | python3 -c "import json,sys; n=[x for x in json.load(sys.stdin)['nodes'] if x['node_id']=='$NODE_ID'][0]; print(json.dumps(n$1))"; }
for _ in $(seq 1 300); do [ "$(node_field '["presence"]' 2>/dev/null)" = '"connected"' ] && break; sleep 0.1; done
[ "$(node_field '["presence"]')" = '"connected"' ] || die "the agent did not connect: $(tail -n 5 "$WORK/agent.log")"
echo "connected; health: $(node_field '["last_health"]')"

# observed GENERATION: the state the node's last hello/heartbeat reported for it ("" if none).
observed() {
  admin GET /admin/v1/nodes | python3 -c "import json,sys; n=[x for x in json.load(sys.stdin)['nodes'] if x['node_id']=='$NODE_ID'][0]; print(' '.join(o['state'] + ('/' + o['diagnostic'] if 'diagnostic' in o else '') for o in (n.get('last_generations') or []) if o['generation']==$1))"
}
if [ "$ROLLOUT" = 1 ]; then
  say "Waiting for the node to report generation 1 ready (heartbeats every 10 s)"
  for _ in $(seq 1 120); do [ "$(observed 1)" = ready ] && break; sleep 1; done
  [ "$(observed 1)" = ready ] || die "generation 1 was not reported ready: $(tail -n 5 "$WORK/agent.log")"
  echo "observations: $(node_field '["last_generations"]')"
fi

GEN=1
request() {  # request OPERATION ARGUMENTS_JSON  (on generation $GEN)
  admin POST "/admin/v1/nodes/$NODE_ID/requests" \
    "{\"generation\":$GEN,\"operation\":\"$1\",\"timeout_ms\":60000,\"arguments\":$2}"
}
SANDBOX=$(python3 -c 'import uuid; print(uuid.uuid4())')

say "create sandbox $SANDBOX (busybox, 500 millicores, 64 MiB)"
request create "{\"sandbox_id\":\"$SANDBOX\",\"image\":\"busybox\",\"command\":[\"sleep\",\"3600\"],\"cpu_millis\":500,\"memory_bytes\":67108864}"
echo

say "exec: sh -c 'echo hello from sandbox; uname -s' inside the sandbox"
OUT=$(request exec "{\"sandbox_id\":\"$SANDBOX\",\"argv\":[\"sh\",\"-c\",\"echo hello from sandbox; uname -s\"],\"output_limit_bytes\":65536}")
echo "$OUT"
printf 'stdout: '
echo "$OUT" | python3 -c 'import json,sys,base64; r=json.load(sys.stdin); print(base64.b64decode(r["result"]["stdout"]).decode(), end="")'
if [ "$PROVIDER" = microvm ]; then
  OUT=$(request exec "{\"sandbox_id\":\"$SANDBOX\",\"argv\":[\"uname\",\"-r\"],\"output_limit_bytes\":1024}")
  printf 'guest kernel: '
  echo "$OUT" | python3 -c 'import json,sys,base64; r=json.load(sys.stdin); print(base64.b64decode(r["result"]["stdout"]).decode(), end="")'
  echo "host kernel: $(uname -r)"
fi

if [ "$ROLLOUT" = 1 ]; then
  say "Rollout: building sn-quickstart/busybox:2 (the same root filesystem and /etc/generation) and publishing it as the signed release quickstart-2"
  echo "generation 2" > "$ROOTFS/etc/generation"
  IMAGE_ID_2=$(import_rootfs 2)
  mkdir -p "$WORK/release-src-2"
  api "http://localhost/images/sn-quickstart/busybox:2/get" > "$WORK/release-src-2/busybox-2.tar" \
    || die "docker save failed"
  # The node must import it itself, through the Engine API, from the verified release.
  api -X DELETE 'http://localhost/images/sn-quickstart/busybox:2' >/dev/null || die "could not remove the image"
  "$WORK/bin/release" publish --releases-dir="$WORK/releases" --source=quickstart-2 \
    --private-key="$WORK/release.key" --make-current image="$WORK/release-src-2/busybox-2.tar" \
    || die "release publish failed"
  echo "image id: $IMAGE_ID_2"

  say "Adding generation 2 to Core (POST /admin/v1/generations)"
  TAR2_SHA=$(sha256sum "$WORK/release-src-2/busybox-2.tar" | cut -d' ' -f1)
  TAR2_SIZE=$(stat -c %s "$WORK/release-src-2/busybox-2.tar")
  printf '{"schema":1,"generation":2,"provider":"docker","runtime":{"source":"quickstart-2","artifacts":[{"name":"busybox-2.tar","kind":"image","sha256":"%s","size":%s}]},"images":[{"name":"busybox","artifact":"busybox-2.tar","identities":["%s"]}]}' \
    "$TAR2_SHA" "$TAR2_SIZE" "$IMAGE_ID_2" > "$WORK/spec-2.json"
  curl -sf -X POST -H 'Content-Type: application/json' --data-binary "@$WORK/spec-2.json" \
    "$ORIGIN/admin/v1/generations" || die "POST /admin/v1/generations failed"
  echo

  say "Targeting generation 2, serving stays 1 (PUT /admin/v1/nodes/$NODE_ID/deployment): the next heartbeat_ack announces it"
  admin PUT "/admin/v1/nodes/$NODE_ID/deployment" '{"generation":2,"serving_generation":1}' \
    || die "PUT deployment failed"
  echo
  say "Waiting for the node to report generation 2 ready; the sandbox on generation 1 keeps answering"
  for i in $(seq 1 180); do
    STATE2=$(observed 2)
    P=$WORK/agent/state/generations/2.progress.json
    PROGRESS=$([ ! -f "$P" ] || python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); print("%s %s %s/%s bytes" % (p["state"], p["phase"], p["bytes_done"], p["bytes_total"]))' "$P")
    OUT=$(request exec "{\"sandbox_id\":\"$SANDBOX\",\"argv\":[\"true\"],\"output_limit_bytes\":0}")
    LINE="generation 2 reported: ${STATE2:-(not yet)}  agent's progress: ${PROGRESS:-(none)}  exec on generation 1: $(echo "$OUT" | python3 -c 'import json,sys; r=json.load(sys.stdin); print(r.get("error_code") or "exit %d" % r["result"]["exit_code"])')"
    [ "$LINE" = "${LAST:-}" ] || echo "  t=${i}s  $LINE"  # a line when something changed
    LAST=$LINE
    [ "$STATE2" = ready ] && break
    case "$STATE2" in failed*) die "generation 2 failed: $STATE2 ($(tail -n 5 "$WORK/agent.log"))";; esac
    sleep 1
  done
  [ "$STATE2" = ready ] || die "generation 2 was not reported ready"

  say "Switching serving to generation 2 (PUT deployment {2, 2}); the node moves its durable pin"
  admin PUT "/admin/v1/nodes/$NODE_ID/deployment" '{"generation":2,"serving_generation":2}' \
    || die "PUT deployment failed"
  echo
  for _ in $(seq 1 30); do
    SERVING=$(python3 -c 'import json,sys; print((json.load(open(sys.argv[1])).get("serving") or {}).get("generation"))' "$WORK/agent/state/node/deployment.json" 2>/dev/null || true)
    [ "$SERVING" = 2 ] && break; sleep 1
  done
  [ "$SERVING" = 2 ] || die "the node did not move its serving pin to 2"
  echo "node/deployment.json: $(cat "$WORK/agent/state/node/deployment.json")"

  SANDBOX2=$(python3 -c 'import uuid; print(uuid.uuid4())')
  say "create sandbox $SANDBOX2 on generation 2"
  GEN=2
  request create "{\"sandbox_id\":\"$SANDBOX2\",\"image\":\"busybox\",\"command\":[\"sleep\",\"3600\"],\"cpu_millis\":500,\"memory_bytes\":67108864}"
  echo
  say "exec: cat /etc/generation in the sandbox of generation 2"
  OUT=$(request exec "{\"sandbox_id\":\"$SANDBOX2\",\"argv\":[\"cat\",\"/etc/generation\"],\"output_limit_bytes\":1024}")
  printf 'stdout: '
  echo "$OUT" | python3 -c 'import json,sys,base64; r=json.load(sys.stdin); print(base64.b64decode(r["result"]["stdout"]).decode(), end="")'
  say "kill sandbox $SANDBOX2 (generation 2)"
  request kill "{\"sandbox_id\":\"$SANDBOX2\"}"
  echo
  echo "observations: $(node_field '["last_generations"]')"
  GEN=1
fi

say "kill sandbox $SANDBOX"
request kill "{\"sandbox_id\":\"$SANDBOX\"}"
echo

say "inspect after kill (absent from a complete inventory)"
request inspect "{\"sandbox_id\":\"$SANDBOX\"}"
echo
say "Done. The same commands work against any Core that speaks spec/wire.md."
