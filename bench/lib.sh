# shellcheck shell=bash
# Shared by the benchmark entry points (bench/run: dedup, bench/inbox: inbox, bench/outbox:
# outbox). Source it; do not run it. It holds what every benchmark run does the same way: wait
# for a quiet machine, start ONE throw-away cluster with the benchmark settings, describe the
# machine, server and settings (and the library measured) at the top of the results file, and
# replace a marked block of docs/performance.md.
#
# Cluster settings (environment), the same for every benchmark:
#   BENCH_FSYNC=on BENCH_SYNC_COMMIT=on BENCH_SHARED_BUFFERS=256MB
#   BENCH_MAX_WAL_SIZE=8GB BENCH_CHECKPOINT_TIMEOUT=30min  (checkpoints only where a driver asks
#                                                          for them, between cells)
#   BENCH_WAIT_IDLE=120   seconds to wait, before starting, for other work on the machine to fall
#                         below 25% of the cores (0: do not wait)
#   BENCH_SERVER_OPTIONS  further NAME=VALUE server settings, separated by spaces (a benchmark
#                         that needs one sets it; bench/purge: the background worker's)

: "${BENCH_FSYNC:=on}" "${BENCH_SYNC_COMMIT:=on}" "${BENCH_SHARED_BUFFERS:=256MB}" "${BENCH_WAIT_IDLE:=120}"
BENCH_MAX_WAL_SIZE=${BENCH_MAX_WAL_SIZE:-8GB}
BENCH_CHECKPOINT_TIMEOUT=${BENCH_CHECKPOINT_TIMEOUT:-30min}
export BENCH_FSYNC BENCH_SYNC_COMMIT BENCH_SHARED_BUFFERS BENCH_WAIT_IDLE BENCH_MAX_WAL_SIZE \
  BENCH_CHECKPOINT_TIMEOUT BENCH_IDLE_NOTE

# PG_CONFIG naming a major built from source (not Debian's wb_pg_config; needs scripts/lib.sh):
# put test/lib/vendor-pg and that build's bin first in PATH, so that bench_exec_in_cluster's
# pg_virtualenv, psql and pgbench are that major's (Debian's pg_virtualenv would start a
# cluster of its own default major). Sets BENCH_PGC to the pg_config to build and install with.
bench_select_major() {
  BENCH_PGC=${PG_CONFIG:-$(wb_pg_config)}
  if [ "$BENCH_PGC" != "$(wb_pg_config)" ]; then
    WB_PG_PREFIX=$(cd "$("$BENCH_PGC" --bindir)/.." && pwd)
    export WB_PG_PREFIX PATH="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/test/lib/vendor-pg:$WB_PG_PREFIX/bin:$PATH"
  fi
}

# Installs whizbang into BENCH_PGC's PostgreSQL unless BENCH_INSTALL=0 (after bench_select_major).
bench_install() {
  if [ "${BENCH_INSTALL:-1}" = 0 ]; then
    wb_ensure_packages
    wb_log "BENCH_INSTALL=0: measuring the whizbang already installed in $("$BENCH_PGC" --pkglibdir)"
  elif [ "$BENCH_PGC" != "$(wb_pg_config)" ]; then
    wb_ensure_packages
    wb_build_install_with "$BENCH_PGC"
  else
    wb_setup
  fi
}

# Share of all cores busy over two seconds, in percent (from /proc/stat).
bench_busy_pct() {
  local a b
  a=$(awk '/^cpu / {print $2+$3+$4+$7+$8+$9, $2+$3+$4+$5+$6+$7+$8+$9}' /proc/stat)
  sleep 2
  b=$(awk '/^cpu / {print $2+$3+$4+$7+$8+$9, $2+$3+$4+$5+$6+$7+$8+$9}' /proc/stat)
  awk -v a="$a" -v b="$b" 'BEGIN { split(a, x, " "); split(b, y, " ");
    d = y[2] - x[2]; pct = 0; if (d > 0) pct = 100 * (y[1] - x[1]) / d; printf "%d", pct }'
}

# Other work on the same cores (builds, test clusters) skews the rates; waits a while for quiet
# and sets BENCH_IDLE_NOTE for the results file.
bench_wait_idle() {
  local waited=0 busy
  busy=$(bench_busy_pct)
  while [ "$busy" -ge 25 ] && [ "$waited" -lt "$BENCH_WAIT_IDLE" ]; do
    wb_log "machine busy ($busy% of the cores), waiting for quiet ($waited/$BENCH_WAIT_IDLE s)"
    sleep 8
    waited=$((waited + 10))
    busy=$(bench_busy_pct)
  done
  BENCH_IDLE_NOTE="$busy% of the cores busy with other work just before the cluster started (after waiting $waited s)"
  [ "$busy" -ge 25 ] && wb_log "WARNING: starting on a busy machine ($busy%); ids/s will be skewed, CPU us/id less so"
  return 0
}

# A -t cluster does not see other clusters' configuration, so pg_createcluster would always pick
# 5432; take a port that nothing listens on and no socket file claims.
bench_port_free() {
  local p=$1 d
  for d in /var/run/postgresql /tmp; do [ -e "$d/.s.PGSQL.$p" ] && return 1; done
  ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null
}

# Starts the throw-away cluster and runs "$@" inside it (PG* variables point at it); does not
# return.
bench_exec_in_cluster() {
  if [ -z "${PGPORT:-}" ]; then
    for PGPORT in $(seq $((55432 + RANDOM % 500)) 56000) $(seq 55432 56000); do
      bench_port_free "$PGPORT" && break
    done
    export PGPORT
  fi
  local extra=() opt
  for opt in ${BENCH_SERVER_OPTIONS:-}; do extra+=(-o "$opt"); done
  wb_log "starting a throw-away cluster on port $PGPORT: fsync=$BENCH_FSYNC synchronous_commit=$BENCH_SYNC_COMMIT shared_buffers=$BENCH_SHARED_BUFFERS ${BENCH_SERVER_OPTIONS:-}"
  # -t keeps the cluster in a temporary directory even as root, so it never collides with a
  # cluster another script (scripts/test) has open at the same time.
  exec pg_virtualenv -t \
    -o "fsync=$BENCH_FSYNC" \
    -o "synchronous_commit=$BENCH_SYNC_COMMIT" \
    -o "shared_buffers=$BENCH_SHARED_BUFFERS" \
    -o "max_wal_size=$BENCH_MAX_WAL_SIZE" \
    -o "checkpoint_timeout=$BENCH_CHECKPOINT_TIMEOUT" \
    "${extra[@]}" \
    "$@"
}

# Inside the cluster: the lines of a results file that describe the machine, the server, its
# settings and the other load. Arguments: load average at the start, at the end, and how many
# processes the benchmark itself keeps busy.
bench_describe() {
  local load_start=$1 load_end=$2 own=$3 root
  local psql=(psql -X -q -v ON_ERROR_STOP=1)
  local settings version extversion cpu revision
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  settings=$("${psql[@]}" -At -F ' = ' -c "SELECT name, current_setting(name)
      FROM pg_settings WHERE name IN ('fsync', 'synchronous_commit', 'shared_buffers',
        'full_page_writes', 'wal_level', 'wal_compression', 'max_wal_size', 'checkpoint_timeout',
        'autovacuum', 'jit', 'max_connections', 'shared_preload_libraries') ORDER BY name")
  version=$("${psql[@]}" -At -c 'SELECT version()')
  extversion=$("${psql[@]}" -At -c "SELECT coalesce((SELECT extversion FROM pg_extension
      WHERE extname = 'whizbang'), 'not installed')")
  cpu=$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')
  revision=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo 'no commit yet')
  if [ -n "$(git -C "$root" status --porcelain -- src sql 2>/dev/null)" ]; then
    revision="$revision + uncommitted changes in src/ sql/"
  fi
  echo "- Machine: $(nproc) cores, $cpu, $(awk '/MemTotal/ {printf "%.0f GB", $2/1048576}' /proc/meminfo) RAM, Linux $(uname -r)"
  echo "- Server: $version; whizbang extension version: $extversion (repo revision: $revision)"
  echo "- Cluster: throw-away \`pg_virtualenv\` cluster on the same machine, data directory on local disk, client over TCP to localhost"
  echo "- Server settings:"
  sed 's/^/  - /' <<<"$settings"
  echo "- Before the start: ${BENCH_IDLE_NOTE:-no idle check}"
  echo "- Other load on the machine: load average (1/5/15 min) $load_start at the start, $load_end at the end"
  echo "  (the driver and server account for up to about $own of it; more means other work shared the cores)"
}

# The library the cluster loads is the one installed for the whole machine; another build
# installed during the run would be measured instead. The entry points record its checksum at
# the start and at the end, with the one this tree built.
bench_library_sum() { sha256sum "$1" 2>/dev/null | cut -c1-16 || echo missing; }

# The results line about the library: arguments are the installed library's path, its checksum
# at the start and the checksum of this tree's build; its checksum now is taken here.
bench_library_note() {
  local lib=$1 lib0=$2 built=$3 root lib1 note
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  lib1=$(bench_library_sum "$lib")
  note="installed whizbang.so $lib0 at the start, $lib1 at the end; this tree built $built"
  note="$note; uncommitted changes in src/ sql/: $(git -C "$root" diff HEAD -- src sql 2>/dev/null | wc -l) diff lines, sha256 $(git -C "$root" diff HEAD -- src sql 2>/dev/null | sha256sum | cut -c1-12)"
  if [ "$lib0" != "$built" ]; then
    note="$note (**the library installed at the start is not this tree's build: the figures are not this tree's**)"
  elif [ "$lib1" != "$lib0" ]; then
    note="$note (another build was installed during the run, at $(date -u -r "$lib" +%H:%M:%S) UTC; the driver's connections load the library once, at their first call in the first seconds of the run, so the figures are from the build installed at the start)"
  fi
  echo "$note"
}

# Replaces the generated block between the markers <!-- bench-NAME:begin --> and
# <!-- bench-NAME:end --> of docs/performance.md with a results file; creates the file, or the
# section (heading + markers, at the end), when missing. Text outside the markers is left alone.
# Arguments: results file, NAME, section heading.
bench_update_docs() {
  local md=$1 name=$2 heading=$3 root doc begin end tmp
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  doc="$root/docs/performance.md"
  begin="<!-- bench-$name:begin -->"
  end="<!-- bench-$name:end -->"
  mkdir -p "$root/docs"
  [ -f "$doc" ] || printf '# Performance\n' >"$doc"
  if ! grep -qF "$begin" "$doc"; then
    printf '\n%s\n\n%s\n%s\n' "$heading" "$begin" "$end" >>"$doc"
  fi
  tmp=$(mktemp)
  awk -v begin="$begin" -v end="$end" -v src="$md" -v rel="${md#"$root"/}" '
    $0 == begin { print; print ""; print "Latest figures, copied from `" rel "`:"; print "";
                  while ((getline line < src) > 0) print line; print ""; skip = 1; next }
    $0 == end   { skip = 0 }
    !skip       { print }' "$doc" >"$tmp"
  cat "$tmp" >"$doc"
  rm -f "$tmp"
}
