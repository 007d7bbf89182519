#!/usr/bin/env bash
# Build (or load from cache) the worker test image proofnet/test-numpy:local.
#
# There is no image registry in CI, so the image is a minimal Debian rootfs made
# with debootstrap (python3 + numpy, user "worker" uid 1000) and fed to
# `docker import`. The result is saved with `docker save` under a cache dir keyed
# by a hash of this script, so repeat runs only `docker load` it, and the image ID
# stays the same across loads (jobs pin images by that ID).
# The last line of stdout is the image ID (sha256:...).
#
# Environment:
#   DOCKER_HOST              engine to use (default: the docker CLI default)
#   PROOFNET_IMAGE_CACHE     cache dir (default ~/.cache/proofnet/images)
#   PROOFNET_DEBIAN_MIRROR   Debian mirror (default: the one apt uses, else deb.debian.org)
#   PROOFNET_IMAGE_REBUILD=1 ignore the cache and rebuild
set -euo pipefail

IMAGE="proofnet/test-numpy:local"
SUITE="bookworm"
PACKAGES="python3-minimal,python3-numpy"
CACHE_DIR="${PROOFNET_IMAGE_CACHE:-${HOME:-/root}/.cache/proofnet/images}"

log() { echo "build-test-image: $*" >&2; }

script_path="$(readlink -f "${BASH_SOURCE[0]}")"
# The key covers everything that shapes the image: this script (packages, user,
# trimming) and the suite. The mirror does not change content, so it is left out.
KEY="$(cat "$script_path" | sha256sum | cut -c1-16)"
CACHE_TAR="${CACHE_DIR}/test-numpy-${KEY}.tar"

# shellcheck source=scripts/ci/image_cache.sh
source "$(dirname "$script_path")/image_cache.sh"

if ! docker info >/dev/null 2>&1; then
    log "no Docker engine answers (run scripts/ci/start-dockerd.sh first)"
    exit 1
fi

reuse_current_image && exit 0

mirror="${PROOFNET_DEBIAN_MIRROR:-}"
if [ -z "$mirror" ]; then
    # deb822 sources first (bookworm default), then the one-line format.
    mirror="$(grep -hs -E '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null \
        | awk '{print $2}' | grep -E '/debian/?$' | head -n1 || true)"
fi
if [ -z "$mirror" ]; then
    mirror="$(grep -hs -E '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null \
        | awk '{for (i = 2; i <= NF; i++) if ($i !~ /^\[/) {print $i; exit}}' \
        | grep -E '/debian/?$' | head -n1 || true)"
fi
mirror="${mirror:-http://deb.debian.org/debian}"

if ! command -v debootstrap >/dev/null 2>&1; then
    log "installing debootstrap"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >&2
fi

workdir="$(mktemp -d "${TMPDIR:-/tmp}/proofnet-rootfs.XXXXXX")"
cleanup() {
    # debootstrap may leave proc/sys mounted inside the target when it fails.
    for m in proc sys dev/pts dev; do
        umount -l "$workdir/rootfs/$m" 2>/dev/null || true
    done
    rm -rf "$workdir"
}
trap cleanup EXIT

rootfs="$workdir/rootfs"
log "debootstrap $SUITE (minbase + $PACKAGES) from $mirror"
debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$rootfs" "$mirror" >&2

# The job user. Appending to the databases avoids running useradd in a chroot.
echo 'worker:x:1000:1000:proofnet job:/home/worker:/usr/sbin/nologin' >>"$rootfs/etc/passwd"
echo 'worker:x:1000:' >>"$rootfs/etc/group"
echo 'worker:!:19000:0:99999:7:::' >>"$rootfs/etc/shadow"
install -d -o 1000 -g 1000 -m 0755 "$rootfs/home/worker" "$rootfs/work"

# Trim what a job never needs; this keeps vfs copies and cache tarballs small.
rm -rf "$rootfs"/var/cache/apt/* "$rootfs"/var/lib/apt/lists/* \
    "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* \
    "$rootfs"/usr/share/locale/* "$rootfs"/var/log/* "$rootfs"/tmp/*
find "$rootfs/usr/lib/python3" -name '__pycache__' -type d -prune -exec rm -rf {} + 2>/dev/null || true

log "importing rootfs as $IMAGE"
tar -C "$rootfs" --numeric-owner -c . | docker import \
    --change 'USER 1000:1000' \
    --change 'WORKDIR /work' \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'CMD ["python3"]' \
    --change "LABEL proofnet.build-key=$KEY" \
    --change 'LABEL org.opencontainers.image.title="proofnet worker test image"' \
    - "$IMAGE" >&2

save_to_cache test-numpy

docker image inspect --format '{{.Id}}' "$IMAGE"
