#!/usr/bin/env bash
# Start a Docker engine usable by the worker's container-runtime tests.
#
# Idempotent: installs docker.io and debootstrap from Debian if they are missing,
# starts dockerd (unless one already answers on the socket) and waits for it.
# The engine runs with no iptables and no default bridge, because CI machines are
# sandboxes without netfilter or bridge support. Storage is overlay2 when the kernel
# can mount overlayfs on the data root (container creation in ~0.1 s), else vfs (always
# works, but copies the whole image for every container). On success the last line of
# stdout is the socket URL, suitable for DOCKER_HOST.
#
# Environment:
#   PROOFNET_DOCKER_ROOT            engine data root   (default /var/lib/proofnet-docker)
#   PROOFNET_DOCKER_SOCK            unix socket path   (default /var/run/docker.sock)
#   PROOFNET_DOCKER_WAIT_S          seconds to wait for the engine (default 120)
#   PROOFNET_DOCKER_STORAGE_DRIVER  auto (default), overlay2 or vfs
set -euo pipefail

DATA_ROOT="${PROOFNET_DOCKER_ROOT:-/var/lib/proofnet-docker}"
SOCK="${PROOFNET_DOCKER_SOCK:-/var/run/docker.sock}"
WAIT_S="${PROOFNET_DOCKER_WAIT_S:-120}"
DRIVER="${PROOFNET_DOCKER_STORAGE_DRIVER:-auto}"
HOST_URL="unix://${SOCK}"
LOG="${DATA_ROOT}.log"

log() { echo "start-dockerd: $*" >&2; }

engine_answers() {
    docker -H "$HOST_URL" info --format '{{.ServerVersion}}' >/dev/null 2>&1
}

case "$DRIVER" in
    auto | overlay2 | vfs) ;;
    *)
        log "PROOFNET_DOCKER_STORAGE_DRIVER must be auto, overlay2 or vfs, got $DRIVER"
        exit 1
        ;;
esac

if [ "$(id -u)" -ne 0 ]; then
    log "must run as root (installs packages and starts dockerd)"
    exit 1
fi

need_install=()
command -v dockerd >/dev/null 2>&1 || need_install+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || need_install+=(debootstrap)
if [ "${#need_install[@]}" -gt 0 ]; then
    log "installing ${need_install[*]} from the Debian archive"
    # Keep package scripts from starting a distro-configured dockerd (overlay2,
    # iptables) that would hold the socket with the wrong settings.
    temp_policy=""
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        temp_policy=/usr/sbin/policy-rc.d
        printf '#!/bin/sh\nexit 101\n' >"$temp_policy"
        chmod 0755 "$temp_policy"
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq --no-install-recommends "${need_install[@]}" >&2
    [ -z "$temp_policy" ] || rm -f "$temp_policy"
fi

if engine_answers; then
    log "engine already running ($(docker -H "$HOST_URL" info --format '{{.Driver}}'))"
    echo "$HOST_URL"
    exit 0
fi

# A stale pid file from a dead engine makes dockerd refuse to start.
PIDFILE="${DATA_ROOT}.pid"
if [ -f "$PIDFILE" ] && ! kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
    rm -f "$PIDFILE"
fi

mkdir -p "$DATA_ROOT" "$(dirname "$SOCK")"

overlay_works() {
    # The same test dockerd makes, done up front so a failure costs nothing.
    local d
    d="$(mktemp -d "$DATA_ROOT/.overlay-probe.XXXXXX")"
    mkdir "$d/lower" "$d/upper" "$d/work" "$d/merged"
    local ok=1
    if mount -t overlay overlay \
        -o "lowerdir=$d/lower,upperdir=$d/upper,workdir=$d/work" "$d/merged" 2>/dev/null; then
        umount "$d/merged" && ok=0
    fi
    rm -rf "$d"
    return "$ok"
}

start_engine() {
    local driver="$1"
    local launch_pid="${DATA_ROOT}.launch-pid"
    rm -f "$PIDFILE" "$launch_pid"
    log "starting dockerd (storage $driver, data root $DATA_ROOT, log $LOG)"
    # setsid + nohup: the engine must outlive this script and the CI step's shell.
    # setsid may fork, so the engine's pid is written by the shell that execs it.
    setsid nohup bash -c 'echo $$ >"$0"; exec "$@"' "$launch_pid" dockerd \
        --host "$HOST_URL" \
        --data-root "$DATA_ROOT" \
        --exec-root "${DATA_ROOT}-exec" \
        --pidfile "$PIDFILE" \
        --storage-driver "$driver" \
        --iptables=false \
        --ip-masq=false \
        --bridge=none \
        >"$LOG" 2>&1 </dev/null &
    local i
    for i in $(seq 100); do
        [ -s "$launch_pid" ] && break
        sleep 0.1
    done
    local pid
    pid="$(cat "$launch_pid" 2>/dev/null || true)"
    if [ -z "$pid" ]; then
        log "could not launch dockerd"
        return 1
    fi
    local deadline=$((SECONDS + WAIT_S))
    until engine_answers; do
        if ! kill -0 "$pid" 2>/dev/null; then
            log "dockerd (storage $driver) exited; last log lines:"
            tail -n 20 "$LOG" >&2 || true
            return 1
        fi
        if [ "$SECONDS" -ge "$deadline" ]; then
            log "dockerd did not answer within ${WAIT_S}s; last log lines:"
            tail -n 40 "$LOG" >&2 || true
            kill "$pid" 2>/dev/null || true
            return 1
        fi
        sleep 1
    done
}

case "$DRIVER" in
    auto)
        if overlay_works && start_engine overlay2; then
            :
        else
            log "falling back to the vfs storage driver"
            start_engine vfs
        fi
        ;;
    *) start_engine "$DRIVER" ;;
esac

log "engine $(docker -H "$HOST_URL" info --format '{{.ServerVersion}} ({{.Driver}})') ready"
echo "$HOST_URL"
