#!/usr/bin/env bash
# Build (or load from cache) the PyTorch job image proofnet/test-torch:local: the worker test
# image (scripts/ci/build-test-image.sh: Debian python3 + numpy, user "worker" uid 1000) plus
# the CPU wheel of torch from a local wheel directory and torch's pure-Python dependencies.
#
# No registry and no network at test time: the packages are installed on this host with
# pip --target (the host's Python must be the image's, 3.11) into a staging tree, copied
# into a container of the base image and committed. The result is saved with `docker save`
# under a cache dir keyed by this script, the base image's ID and the wheel file, so repeat
# runs only `docker load` it and the image ID stays the same (jobs pin images by that ID).
# The last line of stdout is the image ID (sha256:...).
#
# Environment:
#   DOCKER_HOST               engine to use (default: the docker CLI default)
#   PROOFNET_TORCH_WHEELS     directory holding the torch wheel (default /opt/wheels)
#   PROOFNET_TORCH_VERSION    torch version to install (default 2.13.0, what .ci/run installs)
#   PROOFNET_IMAGE_CACHE      cache dir (default ~/.cache/proofnet/images)
#   PROOFNET_IMAGE_REBUILD=1  ignore the cache and rebuild
#   PROOFNET_WHEEL_PYTHON     Python 3.11 whose pip installs the packages (default
#                             .venv/bin/python, else python3)
# Exit status: 0 built or loaded, 1 a step failed, 3 no torch wheel in the wheel directory.
set -euo pipefail

IMAGE="proofnet/test-torch:local"
WHEELS="${PROOFNET_TORCH_WHEELS:-/opt/wheels}"
VERSION="${PROOFNET_TORCH_VERSION:-2.13.0}"
CACHE_DIR="${PROOFNET_IMAGE_CACHE:-${HOME:-/root}/.cache/proofnet/images}"
# Debian bookworm's python3 keeps pip-installed packages here (on its sys.path).
SITE="/usr/local/lib/python3.11/dist-packages"

log() { echo "build-torch-image: $*" >&2; }

repo="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../.." && pwd)"
script_path="$(readlink -f "${BASH_SOURCE[0]}")"

wheel="$(ls "$WHEELS"/torch-"$VERSION"[+-]*.whl 2>/dev/null | head -n1 || true)"
if [ -z "$wheel" ]; then
    log "no torch $VERSION wheel in $WHEELS (set PROOFNET_TORCH_WHEELS)"
    exit 3
fi

if ! docker info >/dev/null 2>&1; then
    log "no Docker engine answers (run scripts/ci/start-dockerd.sh first)"
    exit 1
fi

base_id="$(bash "$repo/scripts/ci/build-test-image.sh" | tail -n1)"
# The key covers what shapes the image: this script, the base image and the wheel (name
# and size: its content is fixed by its version and build tag).
KEY="$( (cat "$script_path"; echo "$base_id $(basename "$wheel") $(stat -c %s "$wheel")") \
    | sha256sum | cut -c1-16)"
CACHE_TAR="${CACHE_DIR}/test-torch-${KEY}.tar"

# shellcheck source=scripts/ci/image_cache.sh
source "$(dirname "$script_path")/image_cache.sh"

reuse_current_image && exit 0

python="${PROOFNET_WHEEL_PYTHON:-}"
if [ -z "$python" ]; then
    if [ -x "$repo/.venv/bin/python" ]; then python="$repo/.venv/bin/python"; else python=python3; fi
fi
pyver="$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
if [ "$pyver" != "3.11" ]; then
    log "$python is Python $pyver; the image runs 3.11 (set PROOFNET_WHEEL_PYTHON)"
    exit 1
fi

workdir="$(mktemp -d "${TMPDIR:-/tmp}/proofnet-torch-image.XXXXXX")"
cid=""
cleanup() {
    [ -z "$cid" ] || docker rm -f "$cid" >/dev/null 2>&1 || true
    rm -rf "$workdir"
}
trap cleanup EXIT

stage="$workdir/root"
target="$stage$SITE"
mkdir -p "$target"
log "installing $(basename "$wheel") and its dependencies into a staging tree"
# The wheel from the wheel directory; its pure-Python dependencies from pip's index (or
# its cache), as .ci/run installs torch into the virtualenv. numpy is the image's own.
"$python" -m pip install --quiet --disable-pip-version-check --no-compile --no-warn-script-location \
    --target "$target" --find-links "$WHEELS" "torch==$VERSION" >&2
# What a job never needs: C++ headers and CMake files, console scripts with this host's
# interpreter in their shebangs, and byte code compiled for this host's paths.
rm -rf "$target/bin" "$target/torch/include" "$target/torch/share" "$target"/numpy*
find "$target" -name '__pycache__' -type d -prune -exec rm -rf {} +
chmod -R a+rX,go-w "$target"

log "committing $IMAGE on top of $base_id"
cid="$(docker create --network none "$base_id" python3)"
tar -C "$stage" --owner=0 --group=0 --numeric-owner -c . | docker cp - "$cid:/"
docker commit \
    --change "LABEL proofnet.build-key=$KEY" \
    --change 'LABEL org.opencontainers.image.title="proofnet worker test image with PyTorch (CPU)"' \
    "$cid" "$IMAGE" >&2
docker rm -f "$cid" >/dev/null
cid=""

# The image must import torch without network, as a job's user, with a read-only root.
docker run --rm --network none --read-only --user 1000:1000 "$IMAGE" python3 -c \
    'import numpy, torch; print("torch", torch.__version__, "numpy", numpy.__version__)' >&2

save_to_cache test-torch

docker image inspect --format '{{.Id}}' "$IMAGE"
