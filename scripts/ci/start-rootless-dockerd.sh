#!/usr/bin/env bash
# Start a rootless Docker daemon for an unprivileged user (the worker must work against one
# through DOCKER_HOST) and load the test image into it. Idempotent; prints the socket URL as
# its last line. Needs root for the one-time set-up (packages, user, runtime dir).
set -euo pipefail

ROOTLESS_USER="${PROOFNET_ROOTLESS_USER:-proofnet-rootless}"
WAIT_S="${PROOFNET_DOCKER_WAIT_S:-120}"

need=()
command -v rootlesskit >/dev/null || need+=(rootlesskit)
command -v newuidmap >/dev/null || need+=(uidmap)
command -v slirp4netns >/dev/null || need+=(slirp4netns)
if [ ${#need[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >/dev/null
  apt-get install -y -q "${need[@]}" >/dev/null
fi
id "$ROOTLESS_USER" >/dev/null 2>&1 || useradd --create-home --shell /bin/bash "$ROOTLESS_USER"
uid="$(id -u "$ROOTLESS_USER")"
grep -q "^$ROOTLESS_USER:" /etc/subuid || echo "$ROOTLESS_USER:200000:65536" >>/etc/subuid
grep -q "^$ROOTLESS_USER:" /etc/subgid || echo "$ROOTLESS_USER:200000:65536" >>/etc/subgid
runtime_dir="/run/user/$uid"
install -d -m 700 -o "$ROOTLESS_USER" "$runtime_dir"
sock="unix://$runtime_dir/docker.sock"

if ! DOCKER_HOST="$sock" docker info >/dev/null 2>&1; then
  # Host networking: these sandboxes give no /dev/net/tun for slirp4netns, and the tests
  # run jobs without network anyway. vfs: overlay is not allowed inside a user namespace here.
  su - "$ROOTLESS_USER" -c "export XDG_RUNTIME_DIR=$runtime_dir \
    PATH=/usr/share/docker.io/contrib:/usr/sbin:/usr/bin:/sbin:/bin \
    DOCKERD_ROOTLESS_ROOTLESSKIT_NET=host DOCKERD_ROOTLESS_ROOTLESSKIT_PORT_DRIVER=none; \
    nohup dockerd-rootless.sh --storage-driver vfs --iptables=false --bridge=none \
      >/tmp/proofnet-rootless-dockerd.log 2>&1 &"
  for _ in $(seq "$WAIT_S"); do
    DOCKER_HOST="$sock" docker info >/dev/null 2>&1 && break
    sleep 1
  done
  DOCKER_HOST="$sock" docker info >/dev/null 2>&1 || {
    echo "rootless dockerd did not start; log:" >&2
    tail -20 /tmp/proofnet-rootless-dockerd.log >&2
    exit 1
  }
fi

# The image built (and cached) by build-test-image.sh, loaded without any registry.
if ! DOCKER_HOST="$sock" docker image inspect proofnet/test-numpy:local >/dev/null 2>&1; then
  tarball="$(ls -t "${PROOFNET_IMAGE_CACHE:-$HOME/.cache/proofnet/images}"/test-numpy-*.tar | head -n1)"
  DOCKER_HOST="$sock" docker load -i "$tarball" >/dev/null
fi
echo "$sock"
