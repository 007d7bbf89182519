# Shared by the CI image builders (sourced): an image is reused when its build-key label
# matches $KEY, else loaded from the cache tarball $CACHE_TAR, and saved there once built.
# The caller sets IMAGE, KEY, CACHE_DIR, CACHE_TAR and defines log().

image_id_if_current() {
    # Prints the image ID when $IMAGE exists and was built by this exact script.
    local label
    label="$(docker image inspect --format '{{index .Config.Labels "proofnet.build-key"}}' \
        "$IMAGE" 2>/dev/null || true)"
    if [ "$label" = "$KEY" ]; then
        docker image inspect --format '{{.Id}}' "$IMAGE"
    fi
}

reuse_current_image() {
    # Prints the ID and succeeds when the current image is present or cached.
    local id
    [ "${PROOFNET_IMAGE_REBUILD:-0}" != "1" ] || return 1
    id="$(image_id_if_current)"
    if [ -n "$id" ]; then
        log "$IMAGE already present (build key $KEY)"
        echo "$id"
        return 0
    fi
    if [ -f "$CACHE_TAR" ]; then
        log "loading $IMAGE from cache $CACHE_TAR"
        docker load -q -i "$CACHE_TAR" >&2
        id="$(image_id_if_current)"
        if [ -n "$id" ]; then
            echo "$id"
            return 0
        fi
        log "cached tarball did not yield $IMAGE with key $KEY; rebuilding"
        rm -f "$CACHE_TAR"
    fi
    return 1
}

save_to_cache() {
    # Saves $IMAGE as $CACHE_TAR and drops older entries named "$1-*.tar".
    mkdir -p "$CACHE_DIR"
    log "saving to cache $CACHE_TAR"
    docker save -o "$CACHE_TAR.tmp" "$IMAGE"
    mv -f "$CACHE_TAR.tmp" "$CACHE_TAR"
    find "$CACHE_DIR" -maxdepth 1 -name "$1-*.tar" ! -name "$(basename "$CACHE_TAR")" -delete
}
