#!/bin/bash
# Entrypoint of the locally built PostgreSQL image (scripts/ci/build-base-images.sh).
#
# It honours the same interface as the official postgres image's entrypoint, so
# docker-compose.yml works unchanged with either: POSTGRES_USER (default postgres),
# POSTGRES_PASSWORD (required unless POSTGRES_HOST_AUTH_METHOD=trust), POSTGRES_DB
# (default: the user's name), POSTGRES_INITDB_ARGS, PGDATA, and on first start the
# *.sql / *.sh files in /docker-entrypoint-initdb.d. Started as root it fixes the data
# directory's owner and drops to the postgres user, as the official image does.
set -Eeuo pipefail

log() { echo "postgres-entrypoint: $*" >&2; }

: "${PGDATA:=/var/lib/postgresql/data}"
: "${POSTGRES_USER:=postgres}"
: "${POSTGRES_DB:=$POSTGRES_USER}"
export PGDATA

if [ "$#" -eq 0 ] || [ "${1#-}" != "$1" ]; then
    set -- postgres "$@"
fi

if [ "$1" != postgres ]; then
    exec "$@"
fi

if [ "$(id -u)" = 0 ]; then
    mkdir -p "$PGDATA" /var/run/postgresql
    # Only what is not already the postgres user's: a large existing cluster stays untouched.
    find "$PGDATA" \! -user postgres -exec chown postgres:postgres '{}' +
    chmod 0700 "$PGDATA"
    chown postgres:postgres /var/run/postgresql
    chmod 2775 /var/run/postgresql
    exec setpriv --reuid=postgres --regid=postgres --init-groups "$BASH_SOURCE" "$@"
fi

if [ ! -s "$PGDATA/PG_VERSION" ]; then
    auth="${POSTGRES_HOST_AUTH_METHOD:-scram-sha-256}"
    if [ -z "${POSTGRES_PASSWORD:-}" ] && [ "$auth" != trust ]; then
        log "POSTGRES_PASSWORD is not set: the database would have no superuser password."
        log "Set POSTGRES_PASSWORD (or POSTGRES_HOST_AUTH_METHOD=trust for a throwaway server)."
        exit 1
    fi
    log "initialising $PGDATA for user $POSTGRES_USER"
    pwfile="$(mktemp)"
    printf '%s\n' "${POSTGRES_PASSWORD:-}" >"$pwfile"
    # shellcheck disable=SC2086  # POSTGRES_INITDB_ARGS is a list of words, as upstream.
    initdb --username="$POSTGRES_USER" --pwfile="$pwfile" --auth-local=trust \
        --auth-host="$auth" --encoding=UTF8 --locale=C.UTF-8 \
        ${POSTGRES_INITDB_ARGS:-} -D "$PGDATA" >/dev/null
    rm -f "$pwfile"
    printf '\nhost all all all %s\n' "$auth" >>"$PGDATA/pg_hba.conf"
    printf "\nlisten_addresses = '*'\n" >>"$PGDATA/postgresql.conf"

    # A server on the socket only, so nothing connects over TCP before set-up is done
    # (health checks use TCP for that reason).
    pg_ctl -D "$PGDATA" -w -o "-c listen_addresses=''" start >/dev/null
    psql=(psql -v ON_ERROR_STOP=1 --no-psqlrc --username "$POSTGRES_USER" --dbname postgres)
    if [ "$POSTGRES_DB" != postgres ]; then
        # On stdin, so psql interpolates :"db" as a quoted identifier.
        echo 'CREATE DATABASE :"db";' | "${psql[@]}" --set db="$POSTGRES_DB"
    fi
    for f in /docker-entrypoint-initdb.d/*; do
        [ -e "$f" ] || continue
        case "$f" in
            *.sql) log "running $f"; "${psql[@]}" --dbname "$POSTGRES_DB" -f "$f" ;;
            *.sh) log "running $f"; bash "$f" ;;
            *) log "ignoring $f" ;;
        esac
    done
    pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
    log "initialisation complete"
fi

exec "$@"
