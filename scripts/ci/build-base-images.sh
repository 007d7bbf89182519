#!/usr/bin/env bash
# Build (or load from cache) what docker-compose.local.yml needs where no image registry
# can be reached:
#
#   proofnet/python-base:local  Debian bookworm + python3.11, venv, git, ca-certificates:
#                               the Dockerfile's BASE_IMAGE in place of python:3.11-slim
#   proofnet/postgres:local     Debian bookworm + postgresql-15, with an entrypoint that
#                               honours POSTGRES_USER/PASSWORD/DB and initdb.d like the
#                               official image (deploy/postgres/docker-entrypoint.sh)
#   deploy/wheelhouse/*.whl     wheels of proofnet's dependencies (requirements.lock), so
#                               the image build installs with --no-index, offline
#
# Each image is a debootstrap'd rootfs fed to `docker import` and saved with `docker save`
# under a cache dir keyed by a hash of what shapes it, so repeat runs only `docker load`
# (or do nothing when the image is already there). The wheelhouse is cached the same way,
# keyed by the dependency list and the lock file.
#
# Environment:
#   DOCKER_HOST              engine to use (default: the docker CLI default)
#   PROOFNET_IMAGE_CACHE     cache dir (default ~/.cache/proofnet/images)
#   PROOFNET_DEBIAN_MIRROR   Debian mirror (default: the one apt uses, else deb.debian.org)
#   PROOFNET_IMAGE_REBUILD=1 ignore the caches and rebuild
#   PROOFNET_WHEEL_PYTHON    Python 3.11 that builds the wheels (default .venv/bin/python,
#                            else python3); it must match the images' Python (3.11)
set -euo pipefail

SUITE="bookworm"
PYTHON_IMAGE="proofnet/python-base:local"
PYTHON_PACKAGES="python3,python3-venv,git,ca-certificates"
POSTGRES_IMAGE="proofnet/postgres:local"
POSTGRES_PACKAGES="postgresql-15"
POSTGRES_BIN="/usr/lib/postgresql/15/bin"
CACHE_DIR="${PROOFNET_IMAGE_CACHE:-${HOME:-/root}/.cache/proofnet/images}"
REBUILD="${PROOFNET_IMAGE_REBUILD:-0}"

log() { echo "build-base-images: $*" >&2; }

repo="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../.." && pwd)"
script_path="$(readlink -f "${BASH_SOURCE[0]}")"
entrypoint="$repo/deploy/postgres/docker-entrypoint.sh"
wheelhouse="$repo/deploy/wheelhouse"

if ! docker info >/dev/null 2>&1; then
    log "no Docker engine answers (run scripts/ci/start-dockerd.sh first)"
    exit 1
fi

# --- cache helpers -------------------------------------------------------------------------

image_is_current() {
    # True when image $1 exists and carries build key $2.
    local label
    label="$(docker image inspect --format '{{index .Config.Labels "proofnet.build-key"}}' \
        "$1" 2>/dev/null || true)"
    [ "$label" = "$2" ]
}

load_cached() {
    # load_cached IMAGE KEY TARBALL: succeeds when IMAGE with KEY is present afterwards.
    local image="$1" key="$2" tarball="$3"
    [ "$REBUILD" = "1" ] && return 1
    if image_is_current "$image" "$key"; then
        log "$image already present (build key $key)"
        return 0
    fi
    if [ -f "$tarball" ]; then
        log "loading $image from cache $tarball"
        docker load -q -i "$tarball" >&2
        image_is_current "$image" "$key" && return 0
        log "cached tarball did not yield $image with key $key; rebuilding"
        rm -f "$tarball"
    fi
    return 1
}

save_to_cache() {
    # save_to_cache IMAGE TARBALL PREFIX: keeps one tarball per image, the current one.
    local image="$1" tarball="$2" prefix="$3"
    mkdir -p "$CACHE_DIR"
    log "saving $image to cache $tarball"
    docker save -o "$tarball.tmp" "$image"
    mv -f "$tarball.tmp" "$tarball"
    find "$CACHE_DIR" -maxdepth 1 -name "${prefix}-*.tar" ! -name "$(basename "$tarball")" -delete
}

# --- rootfs ------------------------------------------------------------------------------

debian_mirror() {
    local mirror="${PROOFNET_DEBIAN_MIRROR:-}"
    if [ -z "$mirror" ]; then
        mirror="$(grep -hs -E '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null \
            | awk '{print $2}' | grep -E '/debian/?$' | head -n1 || true)"
    fi
    if [ -z "$mirror" ]; then
        mirror="$(grep -hs -E '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null \
            | awk '{for (i = 2; i <= NF; i++) if ($i !~ /^\[/) {print $i; exit}}' \
            | grep -E '/debian/?$' | head -n1 || true)"
    fi
    echo "${mirror:-http://deb.debian.org/debian}"
}

workdir=""
cleanup() {
    [ -n "$workdir" ] || return 0
    # debootstrap may leave proc/sys mounted inside the target when it fails.
    local r
    for r in "$workdir"/*/; do
        for m in proc sys dev/pts dev; do
            umount -l "$r$m" 2>/dev/null || true
        done
    done
    rm -rf "$workdir"
}
trap cleanup EXIT

make_rootfs() {
    # make_rootfs DIR PACKAGES: a minbase bookworm with PACKAGES, trimmed.
    local rootfs="$1" packages="$2"
    if [ "$(id -u)" -ne 0 ]; then
        log "building a rootfs needs root (debootstrap); run as root or fill the cache first"
        exit 1
    fi
    if ! command -v debootstrap >/dev/null 2>&1; then
        log "installing debootstrap"
        DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >&2
    fi
    local mirror
    mirror="$(debian_mirror)"
    log "debootstrap $SUITE (minbase + $packages) from $mirror"
    debootstrap --variant=minbase --include="$packages" "$SUITE" "$rootfs" "$mirror" >&2
    # Keeps locale-less defaults and small images; nothing here reads docs or man pages.
    rm -rf "$rootfs"/var/cache/apt/* "$rootfs"/var/lib/apt/lists/* \
        "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* \
        "$rootfs"/usr/share/locale/* "$rootfs"/var/log/* "$rootfs"/tmp/*
}

import_rootfs() {
    # import_rootfs DIR IMAGE KEY --change...: the rootfs as IMAGE, labelled with KEY.
    local rootfs="$1" image="$2" key="$3"
    shift 3
    log "importing rootfs as $image"
    tar -C "$rootfs" --numeric-owner -c . | docker import \
        --change "LABEL proofnet.build-key=$key" \
        --change 'ENV LANG=C.UTF-8' \
        "$@" - "$image" >&2
}

# --- proofnet/python-base:local -----------------------------------------------------------

build_python_base() {
    local key tarball
    key="$( (cat "$script_path"; echo "$SUITE $PYTHON_PACKAGES") | sha256sum | cut -c1-16)"
    tarball="$CACHE_DIR/python-base-${key}.tar"
    load_cached "$PYTHON_IMAGE" "$key" "$tarball" && return 0
    local rootfs="$workdir/python-base"
    make_rootfs "$rootfs" "$PYTHON_PACKAGES"
    find "$rootfs/usr/lib/python3" "$rootfs/usr/lib/python3.11" -name '__pycache__' \
        -type d -prune -exec rm -rf {} + 2>/dev/null || true
    import_rootfs "$rootfs" "$PYTHON_IMAGE" "$key" \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'CMD ["python3"]' \
        --change 'LABEL org.opencontainers.image.title="proofnet local Python base"'
    save_to_cache "$PYTHON_IMAGE" "$tarball" python-base
}

# --- proofnet/postgres:local --------------------------------------------------------------

build_postgres() {
    local key tarball
    key="$( (cat "$script_path" "$entrypoint"; echo "$SUITE $POSTGRES_PACKAGES") \
        | sha256sum | cut -c1-16)"
    tarball="$CACHE_DIR/postgres-${key}.tar"
    load_cached "$POSTGRES_IMAGE" "$key" "$tarball" && return 0
    local rootfs="$workdir/postgres"
    make_rootfs "$rootfs" "$POSTGRES_PACKAGES"
    # The package's post-install made a Debian-style cluster (15/main); this image keeps
    # its cluster in PGDATA like the official one, so that one is dead weight.
    rm -rf "$rootfs/etc/postgresql/15" "$rootfs/var/lib/postgresql/15"
    install -m 0755 "$entrypoint" "$rootfs/usr/local/bin/docker-entrypoint.sh"
    install -d -m 0755 "$rootfs/docker-entrypoint-initdb.d"
    install -d -m 0700 "$rootfs/var/lib/postgresql/data"
    install -d -m 2775 "$rootfs/run/postgresql"
    chroot "$rootfs" chown -R postgres:postgres /var/lib/postgresql /var/run/postgresql
    import_rootfs "$rootfs" "$POSTGRES_IMAGE" "$key" \
        --change "ENV PATH=$POSTGRES_BIN:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
        --change 'ENV PGDATA=/var/lib/postgresql/data' \
        --change 'ENTRYPOINT ["docker-entrypoint.sh"]' \
        --change 'CMD ["postgres"]' \
        --change 'EXPOSE 5432' \
        --change 'LABEL org.opencontainers.image.title="proofnet local PostgreSQL 15"'
    # `docker import` cannot set STOPSIGNAL: docker-compose.local.yml sets SIGINT (a fast
    # shutdown, as the official image's STOPSIGNAL does).
    save_to_cache "$POSTGRES_IMAGE" "$tarball" postgres
}

# --- wheelhouse ---------------------------------------------------------------------------

build_wheelhouse() {
    local python="${PROOFNET_WHEEL_PYTHON:-}"
    if [ -z "$python" ]; then
        if [ -x "$repo/.venv/bin/python" ]; then python="$repo/.venv/bin/python"; else python=python3; fi
    fi
    local version
    version="$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
    if [ "$version" != "3.11" ]; then
        log "$python is Python $version; the images run 3.11 (set PROOFNET_WHEEL_PYTHON)"
        exit 1
    fi
    local reqs="$workdir/requirements.txt"
    # The same list the Dockerfile installs: build requirements plus runtime dependencies.
    "$python" -c 'import sys, tomllib
p = tomllib.load(open(sys.argv[1], "rb"))
deps = p["build-system"]["requires"] + p["project"]["dependencies"]
# proofnet-pot is built from libs/pot with the image, not fetched.
print("\n".join(d for d in deps if not d.startswith("proofnet-pot")))' \
        "$repo/pyproject.toml" >"$reqs"
    local key dir
    key="$( (cat "$reqs" "$repo/requirements.lock"; echo "py$version") | sha256sum | cut -c1-16)"
    dir="$CACHE_DIR/wheelhouse-$key"
    if [ "$REBUILD" = "1" ] || [ ! -f "$dir/.complete" ]; then
        rm -rf "$dir" "$dir.tmp"
        mkdir -p "$dir.tmp"
        log "building wheels for $(wc -l <"$reqs") requirements into $dir"
        "$python" -m pip wheel --quiet --disable-pip-version-check \
            -c "$repo/requirements.lock" -r "$reqs" -w "$dir.tmp" >&2
        touch "$dir.tmp/.complete"
        mv "$dir.tmp" "$dir"
        find "$CACHE_DIR" -maxdepth 1 -name 'wheelhouse-*' ! -name "wheelhouse-$key" \
            -exec rm -rf {} +
    else
        log "wheelhouse $key already cached"
    fi
    # Hard links when the cache shares the file system, else copies; the build context
    # only sees deploy/wheelhouse.
    find "$wheelhouse" -maxdepth 1 -name '*.whl' -delete
    cp -l "$dir"/*.whl "$wheelhouse"/ 2>/dev/null || cp "$dir"/*.whl "$wheelhouse"/
    log "deploy/wheelhouse holds $(find "$wheelhouse" -maxdepth 1 -name '*.whl' | wc -l) wheels"
}

mkdir -p "$CACHE_DIR"
workdir="$(mktemp -d "${TMPDIR:-/tmp}/proofnet-base-images.XXXXXX")"
build_python_base
build_postgres
build_wheelhouse
log "ready: $PYTHON_IMAGE, $POSTGRES_IMAGE and deploy/wheelhouse"
