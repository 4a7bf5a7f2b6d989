# shellcheck shell=bash
# A throw-away rabbitmq-server for the script tests (test/scripts/relay_rabbitmq.sh,
# relay_e2e.sh): source it; do not run it. Nothing of /etc/rabbitmq or /var/lib/rabbitmq is
# used: free ports, its own epmd, data, logs and Erlang cookie in a directory of the caller's.
# Runs the broker as the calling user (root in CI). Needs scripts/lib.sh (wb_free_port).
#   rabbit_prereqs        sets RABBIT_BIN, EPMD and PY (a python3 with pika); prints FAIL and
#                         returns 1 naming the missing Debian package
#   rabbit_start DIR      starts the broker (state under DIR, which must exist) and waits for
#                         it; sets RABBIT_URL (guest on vhost /) and RABBIT_BEAM_PID (the Erlang
#                         VM, for kill -STOP/-KILL); exports the RABBITMQ_* variables and HOME,
#                         so that rabbitmqctl reaches this broker; returns 1 when it did not start
#   rabbit_stop           stops the broker (politely, then by force) and its epmd; for the
#                         caller's EXIT trap, harmless when nothing was started
#   amqp_admin ARGS...    test/lib/amqp_admin.py against RABBIT_URL (queues, exchanges, drain)
RABBIT_BROKER_PID="" RABBIT_EPMD_PID=""

rabbit_prereqs() {
  local candidate
  RABBIT_BIN=/usr/lib/rabbitmq/bin
  [ -x "$RABBIT_BIN/rabbitmq-server" ] || { echo "FAIL rabbitmq-server is not installed (Debian: rabbitmq-server)"; return 1; }
  PY=""
  for candidate in /usr/bin/python3 python3; do
    if command -v "$candidate" >/dev/null && "$candidate" -c 'import pika' 2>/dev/null; then PY=$candidate; break; fi
  done
  [ -n "$PY" ] || { echo "FAIL no python3 with pika found (Debian: python3-pika)"; return 1; }
  EPMD=$(find /usr/lib/erlang -path "*/erts-*/bin/epmd" 2>/dev/null | head -1)
  [ -x "$EPMD" ] || { echo "FAIL epmd not found (Debian: erlang-base)"; return 1; }
}

rabbit_start() {
  local dir=$1
  mkdir -p "$dir/home" "$dir/mnesia" "$dir/log"
  echo '[].' >"$dir/enabled_plugins"  # no management plugin, no port 15672
  : >"$dir/rabbitmq-env.conf"
  echo 'loopback_users = none' >"$dir/rabbitmq.conf"
  export HOME=$dir/home  # the Erlang cookie the broker and rabbitmqctl share
  export RABBITMQ_NODENAME="wbrelay$$@localhost" RABBITMQ_NODE_IP_ADDRESS=127.0.0.1
  RABBITMQ_NODE_PORT=$(wb_free_port)
  RABBITMQ_DIST_PORT=$(wb_free_port)
  ERL_EPMD_PORT=$(wb_free_port)
  export RABBITMQ_NODE_PORT RABBITMQ_DIST_PORT ERL_EPMD_PORT
  export RABBITMQ_MNESIA_BASE=$dir/mnesia RABBITMQ_LOG_BASE=$dir/log RABBITMQ_PID_FILE=$dir/rabbit.pid \
    RABBITMQ_ENABLED_PLUGINS_FILE=$dir/enabled_plugins RABBITMQ_CONF_ENV_FILE=$dir/rabbitmq-env.conf \
    RABBITMQ_CONFIG_FILE=$dir/rabbitmq.conf
  # An epmd of our own, started here so that we know its pid and stop it (the broker would start
  # a daemonised one on ERL_EPMD_PORT and leave it behind).
  "$EPMD" -port "$ERL_EPMD_PORT" &
  RABBIT_EPMD_PID=$!
  echo "starting rabbitmq-server $RABBITMQ_NODENAME on 127.0.0.1:$RABBITMQ_NODE_PORT (dist $RABBITMQ_DIST_PORT, epmd $ERL_EPMD_PORT)"
  # A session of its own: rabbit_stop can kill the whole process group when stop hangs.
  setsid "$RABBIT_BIN/rabbitmq-server" >"$dir/log/server.out" 2>&1 &
  RABBIT_BROKER_PID=$!
  if ! timeout 120 "$RABBIT_BIN/rabbitmqctl" wait --timeout 110 "$RABBITMQ_PID_FILE" >"$dir/log/wait.out" 2>&1; then
    echo "FAIL the broker did not start; its output:"
    tail -n 30 "$dir/log/server.out" "$dir/log/wait.out"
    return 1
  fi
  RABBIT_BEAM_PID=$(cat "$RABBITMQ_PID_FILE")
  RABBIT_URL="amqp://guest:guest@127.0.0.1:$RABBITMQ_NODE_PORT/%2F"
}

rabbit_stop() {
  if [ -n "$RABBIT_BROKER_PID" ] && kill -0 "$RABBIT_BROKER_PID" 2>/dev/null; then
    timeout 30 "$RABBIT_BIN/rabbitmqctl" stop >/dev/null 2>&1 || true
    kill -0 "$RABBIT_BROKER_PID" 2>/dev/null && { kill -KILL -- -"$RABBIT_BROKER_PID" 2>/dev/null || true; }
    wait "$RABBIT_BROKER_PID" 2>/dev/null || true
  fi
  if [ -n "$RABBIT_EPMD_PID" ] && kill -0 "$RABBIT_EPMD_PID" 2>/dev/null; then
    kill "$RABBIT_EPMD_PID" 2>/dev/null || true
    wait "$RABBIT_EPMD_PID" 2>/dev/null || true
  fi
  RABBIT_BROKER_PID="" RABBIT_EPMD_PID=""
}

amqp_admin() { "$PY" test/lib/amqp_admin.py "$RABBIT_URL" "$@"; }
