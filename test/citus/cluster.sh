# shellcheck shell=bash
# A throw-away Citus cluster on localhost: a coordinator and 2 workers, each an ordinary
# PostgreSQL instance (15, or the major whose bin folder WB_CITUS_BIN names: the version matrix) with shared_preload_libraries = 'citus' (and whizbang where asked), in
# one temporary directory, sockets and data there. Source it; do not run it.
#   citus_available                      Citus is installed (citus.so and its control file)
#   citus_start [EXTRA_PRELOAD]          initdb + start 3 nodes, CREATE EXTENSION citus, join them;
#                                        sets CITUS_DIR, COORD_PORT, WORKER1_PORT, WORKER2_PORT and
#                                        exports PGHOST/PGPORT/PGUSER/PGDATABASE (the coordinator)
#   citus_stop                           stops every node and removes CITUS_DIR (an EXIT trap)
#   citus_node_ctl PORT ARGS...          pg_ctl ARGS on the node listening on PORT
#   cq PORT SQL                          psql -tA against one node
#   citus_suite_start                    a test's start: exits 0 with "skip: ..." where Citus is
#                                        neither installed nor buildable, else citus_start with an
#                                        EXIT trap that stops the cluster (WB_CITUS_PRELOAD=whizbang:
#                                        whizbang preloaded on every node as well)
# As root the servers run as the postgres user (PostgreSQL refuses root).
CITUS_BIN=${WB_CITUS_BIN:-/usr/lib/postgresql/${WB_PG_MAJOR:-15}/bin}

citus_available() {
  local pkglib share
  pkglib=$("$CITUS_BIN/pg_config" --pkglibdir)
  share=$("$CITUS_BIN/pg_config" --sharedir)
  [ -f "$pkglib/citus.so" ] && [ -f "$share/extension/citus.control" ]
}

citus_as_server() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

cq() {
  local port=$1; shift
  psql -X -q -A -t -v ON_ERROR_STOP=1 -h "$CITUS_DIR" -p "$port" -U postgres -d postgres -c "$@"
}

citus_node_ctl() {
  local port=$1; shift
  citus_as_server "$CITUS_BIN/pg_ctl" -D "$CITUS_DIR/n$port" -w -t 60 -l "$CITUS_DIR/n$port.log" "$@" >/dev/null
}

citus_start() {
  local preload="citus${1:+,$1}" port
  CITUS_DIR=$(mktemp -d /tmp/whizbang-citus.XXXXXX)
  chmod 755 "$CITUS_DIR"
  [ "$(id -u)" -eq 0 ] && chown postgres "$CITUS_DIR"
  COORD_PORT=$(wb_free_port); WORKER1_PORT=$(wb_free_port); WORKER2_PORT=$(wb_free_port)
  while [ "$WORKER1_PORT" = "$COORD_PORT" ]; do WORKER1_PORT=$(wb_free_port); done
  while [ "$WORKER2_PORT" = "$COORD_PORT" ] || [ "$WORKER2_PORT" = "$WORKER1_PORT" ]; do WORKER2_PORT=$(wb_free_port); done
  for port in "$COORD_PORT" "$WORKER1_PORT" "$WORKER2_PORT"; do
    citus_as_server "$CITUS_BIN/initdb" -D "$CITUS_DIR/n$port" -U postgres -A trust >/dev/null || return 1
    cat >>"$CITUS_DIR/n$port/postgresql.conf" <<CONF
port = $port
listen_addresses = 'localhost'
unix_socket_directories = '$CITUS_DIR'
shared_preload_libraries = '$preload'
fsync = ${CITUS_FSYNC:-off}
max_connections = 200
max_prepared_transactions = 200
wal_level = logical   # logical shard moves (test/citus/load.sh)
citus.log_remote_commands = off
CONF
    citus_node_ctl "$port" start || { echo "could not start server (port $port)"; cat "$CITUS_DIR/n$port.log"; return 1; }
    cq "$port" "CREATE EXTENSION citus" || return 1
  done
  cq "$COORD_PORT" "SELECT pg_catalog.citus_set_coordinator_host('localhost', $COORD_PORT)" >/dev/null || return 1
  cq "$COORD_PORT" "SELECT pg_catalog.citus_add_node('localhost', $WORKER1_PORT)" >/dev/null || return 1
  cq "$COORD_PORT" "SELECT pg_catalog.citus_add_node('localhost', $WORKER2_PORT)" >/dev/null || return 1
  export PGHOST=$CITUS_DIR PGPORT=$COORD_PORT PGUSER=postgres PGDATABASE=postgres
  echo "citus cluster: $(cq "$COORD_PORT" "SELECT 'PostgreSQL ' || current_setting('server_version') || ', Citus ' || pg_catalog.split_part(pg_catalog.citus_version(), ' ', 2)")"
}

citus_stop() {
  local port
  [ -n "${CITUS_DIR:-}" ] || return 0
  for port in "${COORD_PORT:-}" "${WORKER1_PORT:-}" "${WORKER2_PORT:-}"; do
    [ -n "$port" ] && [ -d "$CITUS_DIR/n$port" ] && citus_node_ctl "$port" stop -m fast 2>/dev/null || true
  done
  rm -rf "$CITUS_DIR"
}

citus_suite_start() {
  if ! citus_available && ! wb_ensure_citus "$CITUS_BIN/pg_config"; then
    echo "skip: Citus is not installed and cannot be built here (scripts/lib.sh wb_ensure_citus)"
    exit 0
  fi
  trap citus_stop EXIT
  citus_start "${WB_CITUS_PRELOAD:-}"   # WB_CITUS_PRELOAD=whizbang: preloaded on every node too
}
