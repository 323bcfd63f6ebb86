#!/usr/bin/env bash
# A streaming standby of a local PostgreSQL cluster, for the read-replica tests.
#
#   standby.sh start PRIMARY_URL PORT OWNER_PID   base backup (pg_basebackup -R) into a temp dir,
#                                                 started on 127.0.0.1:PORT; stdout: the dir
#   standby.sh stop DIR                           stop it (fast shutdown)
#   standby.sh resume DIR                         start it again after `stop`
#   standby.sh remove DIR                         stop it, drop its replication slot, delete DIR
#
# PRIMARY_URL is a superuser base URL without a database (postgres://postgres@127.0.0.1:5432).
# `start` also starts a reaper that runs `remove` once OWNER_PID has exited, so the standby, its
# slot and its dir go away however the tests end; it first removes standbys whose owner is gone.
# As root, the servers run as `postgres` (as in setup-postgres.sh). Exit 3 when this machine
# cannot make a standby (the reason on stderr): the tests skip then, or fail under CI=true.
set -euo pipefail

log() { echo "standby: $*" >&2; }
cannot() { log "cannot make a standby: $*"; exit 3; }

is_root() { [ "$(id -u)" = 0 ]; }
as_pg() { if is_root; then runuser -u postgres -- "$@"; else "$@"; fi; }
psql_at() { env -u PGPASSWORD PGCONNECT_TIMEOUT=3 psql -X -w -A -t -q -d "$1" -c "$2"; }
# Nothing we start may keep our stdout (the caller reads it to its end) or other inherited fds.
detached() {
  (
    for fd in "/proc/$BASHPID/fd/"*; do
      fd=${fd##*/}
      if [ "$fd" -gt 2 ]; then eval "exec $fd>&-"; fi
    done
    "$@" </dev/null >/dev/null
  )
}

SELF=$(readlink -f "$0")
PREFIX=${TMPDIR:-/tmp}/honcho-standby-
SLOT_PREFIX=honcho_standby_

bin_of() {  # the server binaries of the cluster at DIR
  local v; v=$(cat "$1/PG_VERSION")
  echo "/usr/lib/postgresql/$v/bin"
}

remove() {
  local dir=$1 primary slot
  [ -d "$dir" ] || return 0
  if [ -f "$dir/data/postmaster.pid" ]; then
    as_pg "$(bin_of "$dir/data")/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
  fi
  primary=$(cat "$dir/honcho-primary" 2>/dev/null || true)
  slot=$(cat "$dir/honcho-slot" 2>/dev/null || true)
  if [ -n "$primary" ] && [ -n "$slot" ]; then
    # The walsender may need a moment to notice its standby is gone.
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      psql_at "$primary/postgres" "select pg_drop_replication_slot(slot_name) from pg_replication_slots
        where slot_name = '$slot' and not active" >/dev/null 2>&1 || true
      [ -z "$(psql_at "$primary/postgres" "select 1 from pg_replication_slots where slot_name = '$slot'" 2>/dev/null)" ] && break
      sleep 0.5
    done
  fi
  rm -rf "$dir"
}

# Standbys and slots of owners that are gone (a reaper that was itself killed, e.g. by a reboot).
sweep() {
  local primary=$1 dir owner slot pid
  for dir in "$PREFIX"*; do
    [ -d "$dir" ] || continue
    owner=$(cat "$dir/honcho-owner" 2>/dev/null || echo 0)
    if [ "$owner" = 0 ] || ! kill -0 "$owner" 2>/dev/null; then
      log "removing $dir (its tests are gone)"
      remove "$dir"
    fi
  done
  for slot in $(psql_at "$primary/postgres" "select slot_name from pg_replication_slots
      where slot_name like '${SLOT_PREFIX}%' and not active" 2>/dev/null || true); do
    pid=${slot#"$SLOT_PREFIX"}
    if ! kill -0 "$pid" 2>/dev/null; then
      psql_at "$primary/postgres" "select pg_drop_replication_slot('$slot')" >/dev/null 2>&1 || true
    fi
  done
}

# pg_basebackup needs a replication connection, which `host all ...` lines do not allow. The
# test cluster trusts 127.0.0.1 already; allow replication the same way when we may edit it.
allow_replication() {
  local primary=$1 hba
  if [ -n "$(psql_at "$primary/postgres" "select 1 from pg_hba_file_rules
      where 'replication' = any(database) and type in ('host', 'hostnossl')
        and address in ('127.0.0.1', 'all', 'samehost') and auth_method = 'trust' limit 1" 2>/dev/null)" ]; then
    return 0
  fi
  hba=$(psql_at "$primary/postgres" "show hba_file") || cannot "cannot read the primary's settings"
  [ -w "$hba" ] || cannot "the primary's $hba allows no replication from 127.0.0.1 and is not ours to edit"
  log "allowing replication connections from 127.0.0.1 in $hba"
  printf '%s\n' "host replication postgres 127.0.0.1/32 trust" >>"$hba"
  psql_at "$primary/postgres" "select pg_reload_conf()" >/dev/null
  sleep 0.5
}

start() {
  local primary=$1 port=$2 owner=$3 version bin dir slot setting
  command -v psql >/dev/null || cannot "no psql"
  [ "$(psql_at "$primary/postgres" "select rolsuper from pg_roles where rolname = current_user" 2>/dev/null)" = t ] ||
    cannot "$primary is not reachable as a superuser"
  version=$(psql_at "$primary/postgres" "select current_setting('server_version_num')::int / 10000")
  bin=/usr/lib/postgresql/$version/bin
  [ -x "$bin/pg_basebackup" ] && [ -x "$bin/pg_ctl" ] || cannot "no PostgreSQL $version binaries under $bin"
  if is_root; then id postgres >/dev/null 2>&1 || cannot "no postgres user to run the standby as"; fi
  sweep "$primary"
  allow_replication "$primary"

  dir=$(mktemp -d "${PREFIX}XXXXXX")
  echo "$owner" >"$dir/honcho-owner"
  echo "$primary" >"$dir/honcho-primary"
  # The reaper first: from here on, whatever fails, the owner's exit cleans up.
  detached setsid bash -c "while kill -0 $owner 2>/dev/null; do sleep 1; done; exec '$SELF' remove '$dir'" \
    >/dev/null 2>&1 &
  if is_root; then chown postgres: "$dir"; fi
  chmod 700 "$dir"
  slot=$SLOT_PREFIX$owner
  echo "$slot" >"$dir/honcho-slot"
  local hostport=${primary#*://}; hostport=${hostport#*@}
  local host=${hostport%%:*} pport=${hostport##*:}
  [ "$pport" != "$hostport" ] || pport=5432
  log "base backup of $host:$pport into $dir (slot $slot)"
  # Our own files (owner, primary, slot, log) stay outside the cluster's data dir.
  local data=$dir/data
  as_pg mkdir -p -m 700 "$data"
  as_pg "$bin/pg_basebackup" -h "$host" -p "$pport" -U postgres -D "$data" -R -X stream \
    -c fast -C -S "$slot" --no-sync >&2 || cannot "pg_basebackup failed"
  # Hot standby needs these at least as large as on the primary; the rest keeps it small and
  # ours (a distro cluster's postgresql.conf lives outside its data dir and is not copied).
  {
    for setting in max_connections max_worker_processes max_wal_senders max_prepared_transactions \
                   max_locks_per_transaction; do
      echo "$setting = $(psql_at "$primary/postgres" "show $setting")"
    done
    echo "port = $port"
    echo "listen_addresses = '127.0.0.1'"
    echo "unix_socket_directories = ''"
    echo "hot_standby = on"
    # Queries on the standby hold back the primary's cleanup instead of being cancelled by it.
    echo "hot_standby_feedback = on"
    echo "shared_buffers = 32MB"
    echo "fsync = off"
    echo "ssl = off"
    echo "logging_collector = off"
    echo "hba_file = '$data/honcho_hba.conf'"
    echo "ident_file = '$data/honcho_ident.conf'"
  } | as_pg tee -a "$data/postgresql.auto.conf" >/dev/null
  printf '%s\n' "host all all 127.0.0.1/32 trust" | as_pg tee "$data/honcho_hba.conf" >/dev/null
  as_pg touch "$data/honcho_ident.conf"
  # A private cluster's postgresql.conf came along with the backup; its settings are overridden
  # by postgresql.auto.conf (read last), a distro cluster has none: give it an empty one.
  [ -f "$data/postgresql.conf" ] || as_pg touch "$data/postgresql.conf"
  detached as_pg "$bin/pg_ctl" -D "$data" -l "$dir/server.log" -w -t 60 start ||
    { log "$(tail -n 20 "$dir/server.log" 2>/dev/null)"; cannot "the standby did not start"; }
  echo "$dir"
}

case "${1:-}" in
  start) [ $# = 4 ] || { echo "usage: $0 start PRIMARY_URL PORT OWNER_PID" >&2; exit 2; }
         start "$2" "$3" "$4" ;;
  stop) as_pg "$(bin_of "$2/data")/pg_ctl" -D "$2/data" -m fast -w stop >/dev/null ;;
  resume) detached as_pg "$(bin_of "$2/data")/pg_ctl" -D "$2/data" -l "$2/server.log" -w -t 60 start ;;
  remove) remove "$2" ;;
  *) echo "usage: $0 start PRIMARY_URL PORT OWNER_PID | stop DIR | resume DIR | remove DIR" >&2; exit 2 ;;
esac
