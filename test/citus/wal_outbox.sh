#!/usr/bin/env bash
# The WAL outbox on Citus (issue 32, docs/scaleout.md "The WAL outbox"): emitting is never
# routed, so a message enters the WAL of the node whose transaction emits it. With a relay slot
# on the coordinator and on each worker (create_outbox_relay on each node) and one whizbang-relay
# per node, each relay publishes exactly the messages emitted on its own node, in that node's
# commit order; nothing reaches another node's relay, and nothing is lost or doubled.
# Prints ok/FAIL lines; exits non-zero when a check failed. Skips (exit 0) without Citus.
set -euo pipefail
self=$(readlink -f "$0")
cd "$(dirname "$self")/../.."
source scripts/lib.sh          # wb_free_port, wb_pg_config
source test/lib/checks.sh      # check, check_eq, FAILED
source test/citus/cluster.sh   # citus_suite_start, cq

RELAY=${WB_RELAY:-$PWD/build/relay/whizbang-relay}
citus_suite_start
[ -x "$RELAY" ] || make -s build/relay/whizbang-relay PG_CONFIG="${CITUS_BIN:+$CITUS_BIN/}pg_config" >/dev/null
work=$(mktemp -d /tmp/whizbang-citus-wal.XXXXXX)
pids=()
trap 'stop_pids_and_remove "$work"; citus_stop' EXIT

psql -X -q -v ON_ERROR_STOP=1 -c "CREATE EXTENSION whizbang" -c "SELECT whizbang.distribute(8)" >/dev/null 2>&1
ports=("$COORD_PORT" "$WORKER1_PORT" "$WORKER2_PORT")
names=(coordinator worker1 worker2)

for i in 0 1 2; do
  check_eq "create_outbox_relay on the ${names[$i]}" "whizbang_outbox" \
    "$(cq "${ports[$i]}" "SELECT slot_name FROM whizbang.create_outbox_relay()" 2>&1)"
done
for i in 0 1 2; do
  "$RELAY" --slot whizbang_outbox --sink "ndjson:$work/${names[$i]}.ndjson" \
    --dbname "host=$CITUS_DIR port=${ports[$i]} user=postgres dbname=postgres" --status-interval 1 \
    2>"$work/${names[$i]}.log" &
  pids+=($!)
done

# 30 transactions of 3 messages on each node, interleaved; the Envelope says where and in which
# transaction, and each transaction also records its order on the node it ran on.
for i in 0 1 2; do
  cq "${ports[$i]}" "CREATE TABLE IF NOT EXISTS public.wal_commits_${names[$i]} (n int, at_lsn pg_lsn)" >/dev/null
done
for n in $(seq 1 30); do
  for i in 0 1 2; do
    cq "${ports[$i]}" "BEGIN;
      SELECT count(*) FROM whizbang.emit_outbox_messages((SELECT jsonb_agg(jsonb_build_object(
        'MessageId', md5('${names[$i]}-$n-' || g)::uuid, 'Destination', 'd', 'MessageType', 't',
        'StreamId', md5('${names[$i]}')::uuid, 'Envelope', jsonb_build_object('node', '${names[$i]}', 'n', $n, 'g', g)))
        FROM generate_series(1, 3) g));
      INSERT INTO public.wal_commits_${names[$i]} VALUES ($n, pg_current_wal_lsn());
      COMMIT;" >/dev/null
  done
done

# Each relay has caught up when its slot is confirmed past the node's WAL now.
for i in 0 1 2; do
  lsn=$(cq "${ports[$i]}" "SELECT pg_current_wal_flush_lsn()")
  deadline=$((SECONDS + 60))
  until [ "$(cq "${ports[$i]}" "SELECT confirmed_flush_lsn >= '$lsn' FROM pg_replication_slots WHERE slot_name = 'whizbang_outbox'")" = t ]; do
    [ $SECONDS -ge $deadline ] && { echo "FAIL the ${names[$i]}'s relay did not catch up"; cat "$work/${names[$i]}.log"; exit 1; }
    sleep 0.2
  done
done

for i in 0 1 2; do
  f="$work/${names[$i]}.ndjson"
  check_eq "the ${names[$i]}'s relay published its 90 messages, each once" "90 90" \
    "$(wc -l <"$f" | tr -d ' ') $(sed -E 's/^\{"MessageId":"([^"]+)".*/\1/' "$f" | sort -u | wc -l | tr -d ' ')"
  check_eq "the ${names[$i]}'s relay published no other node's message" 0 \
    "$(grep -vc "\"node\": \"${names[$i]}\"" "$f" || true)"
  check_eq "the ${names[$i]}'s relay kept its node's commit order" "$(seq 1 30 | while read -r n; do printf '%s %s %s ' "$n" "$n" "$n"; done | sed 's/ $//')" \
    "$(sed -E 's/.*"n": ([0-9]+).*/\1/' "$f" | tr '\n' ' ' | sed 's/ $//')"
done
check "the coordinator's whizbang tables hold no outbox row (nothing was stored)" \
  "SELECT count(*) = 0 FROM whizbang.wh_outbox"
[ "$FAILED" -eq 0 ]
