#!/usr/bin/env bash
# Make sure a local PostgreSQL >= 15 with pgvector >= 0.8 and pg_trgm is installed and running.
# stdout: exactly one line, the superuser base URL without a database name, e.g.
#   postgres://postgres@127.0.0.1:5432
# Everything else goes to stderr. Idempotent: a second run only probes (well under 2 s).
#
# Environment knobs (all optional):
#   HONCHO_PG_FORCE_PRIVATE=1  skip the distro cluster, always use the private cluster
#   HONCHO_PG_DIR              private cluster data dir (default <repo>/.data/pg)
#   HONCHO_PG_PORT             private cluster port (default 5499)
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DATA="$REPO/.data"
PG_MIN=15
VECTOR_MIN=0.8.0
PRIVATE_PORT=${HONCHO_PG_PORT:-5499}
export DEBIAN_FRONTEND=noninteractive

log() { echo "setup-postgres: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# PostgreSQL refuses to run as root, and the machines have no sudo: root drops to `postgres`.
is_root() { [ "$(id -u)" = 0 ]; }
as_root() {
  if is_root; then "$@"
  elif command -v sudo >/dev/null; then sudo -E "$@"
  else die "need root to run: $*"; fi
}
as_pg() { if is_root; then runuser -u postgres -- "$@"; else "$@"; fi; }
# A server we start outlives us: it must not inherit our lock, our stdout (a `$(...)` pipe in
# make would never see EOF) or any pipe of whoever called us (CI's log reader would hang too).
detached() {
  (
    for fd in "/proc/$BASHPID/fd/"*; do
      fd=${fd##*/}
      if [ "$fd" -gt 2 ]; then eval "exec $fd>&-"; fi
    done
    "$@" </dev/null
  )
}

APT_UPDATED=
apt_install() {
  if [ -z "$APT_UPDATED" ]; then as_root apt-get update -q; APT_UPDATED=1; fi
  as_root apt-get install -y -q --no-install-recommends "$@"
}
apt_candidate() {  # prints the candidate version of a package, empty when there is none
  apt-cache policy "$1" 2>/dev/null | awk '/Candidate:/ && $2 != "(none)" {print $2}'
}

# Server versions with binaries installed, newest first (Debian/Ubuntu layout).
installed_versions() {
  local d
  for d in /usr/lib/postgresql/*/bin/postgres; do
    [ -x "$d" ] && basename "$(dirname "$(dirname "$d")")"
  done | sort -rn
}
newest_installed() { installed_versions | awk -v m=$PG_MIN '$1 >= m && !f {print; f = 1}'; }

ensure_server_installed() {
  [ -n "$(newest_installed)" ] && return 0
  log "no PostgreSQL >= $PG_MIN server found; installing from apt"
  if [ -z "$APT_UPDATED" ]; then as_root apt-get update -q; APT_UPDATED=1; fi
  # The distro's `postgresql` meta package may be older than 15 (Ubuntu 22.04): pick the
  # newest postgresql-N >= 15 that apt offers instead.
  local n
  n=$(apt-cache pkgnames postgresql- | grep -E '^postgresql-[0-9]+$' | cut -d- -f2 | sort -rn |
      awk -v m=$PG_MIN '$1 >= m && !f {print; f = 1}')
  [ -n "$n" ] || die "apt offers no PostgreSQL >= $PG_MIN; set DATABASE_URL to a server you have"
  apt_install "postgresql-$n"   # contrib (pg_trgm) is checked with the extensions below
  [ -n "$(newest_installed)" ] || die "PostgreSQL install did not provide server binaries"
}

PSQL=
psql_q() {  # psql_q URL SQL: one value, never prompts for a password
  env -u PGPASSWORD PGPASSFILE=/dev/null PGCONNECT_TIMEOUT=3 \
    "$PSQL" -X -w -A -t -q -d "$1" -c "$2" 2>/dev/null
}
server_version() { psql_q "$1/postgres" 'show server_version_num' | awk '{print int($1/10000)}'; }

URL=
# A distro cluster (postgresql-common) is the first choice: start it if down, use it if it
# trusts TCP connections from 127.0.0.1 (it does on our machines; a stock install wants a password).
try_distro_clusters() {
  command -v pg_lsclusters >/dev/null || return 1
  local clusters ver name port status pass v
  clusters=$(pg_lsclusters -h 2>/dev/null | sort -s -k1,1rn)
  # Pass 1 uses a running cluster; pass 2 starts a stopped one only when none of those would do.
  for pass in online down; do
    while read -r ver name port status _; do
      [ "${ver%%.*}" -ge $PG_MIN ] 2>/dev/null || continue
      [ "${status%%,*}" = "$pass" ] || continue
      if [ "$pass" = down ]; then
        is_root || { log "distro cluster $ver/$name is down and we are not root"; continue; }
        log "starting distro cluster $ver/$name"
        detached pg_ctlcluster --skip-systemctl-redirect "$ver" "$name" start ||
          { log "could not start $ver/$name"; continue; }
      fi
      v=$(server_version "postgres://postgres@127.0.0.1:$port" || true)
      if [ -n "$v" ] && [ "$v" -ge $PG_MIN ]; then URL="postgres://postgres@127.0.0.1:$port"; return 0; fi
      log "distro cluster $ver/$name (port $port) refuses passwordless postgres@127.0.0.1"
    done <<<"$clusters"
  done
  return 1
}

# Otherwise a private trust-auth cluster under .data/, owned by postgres when we are root.
private_cluster() {
  local n bin dir
  n=$(newest_installed); bin=/usr/lib/postgresql/$n/bin
  dir=${HONCHO_PG_DIR:-$DATA/pg}
  if is_root && [ -z "${HONCHO_PG_DIR:-}" ] && ! runuser -u postgres -- test -x "$DATA"; then
    # A clone under /root (mode 700) is closed to postgres: keep this clone's cluster in
    # postgres's home instead, one per clone path.
    dir=$(getent passwd postgres | cut -d: -f6)/honcho-graphql-$(echo "$REPO" | cksum | cut -d' ' -f1)/pg
    log "postgres cannot enter $DATA; private cluster goes to $dir"
  fi
  mkdir -p "$dir"
  if is_root; then
    chown postgres: "$dir"; chmod 700 "$dir"
    runuser -u postgres -- test -w "$dir" ||
      die "user postgres cannot reach $dir (a parent directory is closed to it); set HONCHO_PG_DIR elsewhere"
  fi
  if [ ! -s "$dir/PG_VERSION" ]; then
    log "initialising private cluster in $dir (PostgreSQL $n, port $PRIVATE_PORT)"
    # C.UTF-8 rather than C, so pg_trgm and lower() treat non-ASCII letters as letters.
    local loc=C
    locale -a 2>/dev/null | grep -qiE '^c\.utf-?8$' && loc=C.UTF-8
    as_pg "$bin/initdb" -D "$dir" -U postgres -A trust -E UTF8 --locale="$loc" >/dev/null
    # No unix socket: its default directory may be missing or unwritable, and we only use TCP.
    printf "%s\n" "listen_addresses = '127.0.0.1'" "port = $PRIVATE_PORT" \
      "unix_socket_directories = ''" >>"$dir/postgresql.conf"
  elif [ "$(cat "$dir/PG_VERSION")" != "$n" ]; then
    n=$(cat "$dir/PG_VERSION"); bin=/usr/lib/postgresql/$n/bin
    [ -x "$bin/pg_ctl" ] || die "$dir holds a PostgreSQL $n cluster but its binaries are gone"
  fi
  local port url
  port=$(awk -F= '/^port *=/ {gsub(/[ \t]/, "", $2); p=$2} END {print p}' "$dir/postgresql.conf")
  url="postgres://postgres@127.0.0.1:$port"
  if ! as_pg "$bin/pg_ctl" -D "$dir" status >/dev/null 2>&1; then
    log "starting private cluster in $dir"
    detached as_pg "$bin/pg_ctl" -D "$dir" -l "$dir/server.log" -w -t 60 start >/dev/null ||
      die "private cluster did not start; see $dir/server.log"
  fi
  [ -n "$(server_version "$url")" ] || die "private cluster in $dir is running but refuses $url"
  URL=$url
}

# Debian 12 does not package pgvector: build Debian's own 0.8 source package from trixie,
# fetched through a private apt state so the system's lists stay as they are.
debian_mirror() {
  local uri
  uri=$( { grep -hE '^[[:space:]]*deb(-src)?[[:space:]]' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
             sed -E 's/\[[^]]*\]//' | awk '{print $2}'
           grep -hiE '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | cut -d: -f2- | tr ' ' '\n'
         } | grep -E '^https?://' | grep -vi security | grep -E '/debian/?$' | head -n1 || true)
  echo "${uri:-http://deb.debian.org/debian}"
}

build_pgvector() {
  local n=$1 aptdir="$DATA/apt-trixie" build="$DATA/build" keyring=/usr/share/keyrings/debian-archive-keyring.gpg
  [ -e "$keyring" ] || apt_install debian-archive-keyring
  mkdir -p "$aptdir/lists/partial" "$build"
  echo "deb-src [signed-by=$keyring] $(debian_mirror) trixie main" >"$aptdir/sources.list"
  local opts=(-o "Dir::Etc::SourceList=$aptdir/sources.list" -o Dir::Etc::SourceParts=/dev/null
              -o "Dir::State::Lists=$aptdir/lists" -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache=)
  log "fetching the pgvector source package from trixie ($(debian_mirror))"
  as_root apt-get "${opts[@]}" update -q
  rm -rf "$build/pgvector-src" && mkdir -p "$build/pgvector-src"
  # apt downloads as its sandbox user _apt; without write access it warns and falls back to root.
  if is_root && id _apt >/dev/null 2>&1; then chown _apt "$build/pgvector-src"; fi
  (cd "$build/pgvector-src" && as_root apt-get "${opts[@]}" source --download-only pgvector)
  local tarballs tarball
  tarballs=("$build"/pgvector-src/pgvector_*.orig.tar.*); tarball=${tarballs[0]}
  [ -f "$tarball" ] || die "apt-get source gave no pgvector_*.orig.tar.*"
  log "building $(basename "$tarball") against PostgreSQL $n"
  local pkgs=()
  [ -x "/usr/lib/postgresql/$n/bin/pg_config" ] && [ -e "/usr/include/postgresql/$n/server/postgres.h" ] ||
    pkgs+=("postgresql-server-dev-$n")
  command -v make >/dev/null || pkgs+=(make)
  command -v gcc >/dev/null || pkgs+=(gcc)
  [ ${#pkgs[@]} = 0 ] || apt_install "${pkgs[@]}"
  local src="$build/pgvector-src/src"
  mkdir -p "$src" && tar -xf "$tarball" -C "$src" --strip-components=1
  # OPTFLAGS="" drops pgvector's default -march=native: the same disk may boot on another CPU.
  local mk=(-s -C "$src" PG_CONFIG="/usr/lib/postgresql/$n/bin/pg_config" OPTFLAGS=)
  make "${mk[@]}" -j"$(nproc)"
  as_root make "${mk[@]}" install
  # Only needed once: the trixie index alone is ~20 MB.
  rm -rf "$aptdir" "$build/pgvector-src"
}

ext_version() {  # default_version of an available extension, empty when absent
  psql_q "$1/postgres" "select default_version from pg_available_extensions where name = '$2'"
}
version_ge() { [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n1)" = "$2" ]; }

ensure_extensions() {
  local url=$1 n have cand
  n=$(server_version "$url")
  have=$(ext_version "$url" vector)
  if [ -z "$have" ] || ! version_ge "$have" $VECTOR_MIN; then
    log "pgvector ${have:-missing} on PostgreSQL $n; need >= $VECTOR_MIN"
    [ -n "$APT_UPDATED" ] || { as_root apt-get update -q; APT_UPDATED=1; }
    cand=$(apt_candidate "postgresql-$n-pgvector")
    if [ -n "$cand" ] && version_ge "${cand#*:}" $VECTOR_MIN; then
      apt_install "postgresql-$n-pgvector"
    else
      build_pgvector "$n"
    fi
    have=$(ext_version "$url" vector)
    if [ -z "$have" ] || ! version_ge "$have" $VECTOR_MIN; then die "pgvector still not available on $url"; fi
    log "pgvector $have available"
  fi
  if [ -z "$(ext_version "$url" pg_trgm)" ]; then
    log "pg_trgm missing; installing contrib"
    if [ -n "$(apt_candidate "postgresql-contrib-$n")" ]; then apt_install "postgresql-contrib-$n"
    else apt_install postgresql-contrib; fi
    [ -n "$(ext_version "$url" pg_trgm)" ] || die "pg_trgm still not available on $url"
  fi
}

main() {
  # Keep stdout clean for the URL whatever the tools below print.
  exec 3>&1 1>&2
  mkdir -p "$DATA"
  # Two makes at once (run + test) must not race an install or an initdb.
  exec 9>"$DATA/.setup-postgres.lock"
  flock 9
  ensure_server_installed
  PSQL=$(command -v psql || echo "/usr/lib/postgresql/$(newest_installed)/bin/psql")
  if [ "${HONCHO_PG_FORCE_PRIVATE:-}" != 1 ]; then try_distro_clusters || true; fi
  [ -n "$URL" ] || private_cluster
  ensure_extensions "$URL"
  echo "$URL" >&3
}

# Sourcing (for tests) only defines the functions.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then main "$@"; fi
