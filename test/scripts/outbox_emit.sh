#!/usr/bin/env bash
# The WAL outbox's emitting side (issue 32, DESIGN §3.10): whizbang.emit_outbox_messages writes
# transactional logical decoding messages. Read back through a test_decoding slot (whose text
# shows each message's prefix and content), in a throw-away cluster with wal_level = logical:
#   a. a committed call: one message per element, prefix whizbang.outbox, transactional, its
#      content exactly the documented JSON (fields in order, CreatedAt = p_now in UTC whatever
#      the session's TimeZone); an id repeated in the call is emitted once (emitted false);
#   b. nothing from a rolled-back transaction, nor from a rolled-back savepoint, while the
#      rest of the transaction arrives; a prepared transaction's messages arrive at COMMIT
#      PREPARED, never after ROLLBACK PREPARED;
#   c. bad input (ScheduledFor, a missing field) emits nothing, with its SQLSTATE;
#   d. what a receiver gets is what store_inbox_messages takes: the content, with the
#      receiver's HandlerName added, stores into a whizbang inbox in another database;
#   e. create_outbox_relay makes a pgoutput slot and an empty publication, stats() counts the
#      slot and its lag, drop_outbox_relay removes both;
#   f. without a logical slot in the database: 55000 and nothing emitted; with wal_level =
#      replica (after a restart): 55000 naming wal_level.
# Expects whizbang to be installed already (./scripts/test does that). Exits non-zero on failure.
set -euo pipefail

self=$(readlink -f "$0")
cd "$(dirname "$self")/../.."
source scripts/lib.sh  # wb_free_port

if [ "${1:-}" != "--in-cluster" ]; then
  pg_virtualenv -t -c "-p $(wb_free_port)" -o fsync=off -o wal_level=logical -o max_prepared_transactions=5 \
    bash "$self" --in-cluster
  exit
fi

source test/lib/checks.sh  # check, check_eq, FAILED
q() { psql -qXtA -v ON_ERROR_STOP=1 "$@"; }
sqlstate() {  # the SQLSTATE of the error "$1" raises ("" when it succeeds)
  psql -qXtA -v ON_ERROR_STOP=1 -v VERBOSITY=verbose -c "$1" 2>&1 >/dev/null |
    sed -nE 's/^ERROR:  ([0-9A-Z]{5}):.*/\1/p' | head -1
}
# The whizbang messages decoded since the last call, "content" per line (test_decoding's text:
# "message: transactional: 1 prefix: whizbang.outbox, sz: N content:{...}").
decoded() {
  q -c "SELECT data FROM pg_logical_slot_get_changes('wb_emit_test', NULL, NULL)
         WHERE data LIKE 'message: transactional: 1 prefix: whizbang.outbox, %'" |
    sed -E 's/^message: transactional: 1 prefix: whizbang\.outbox, sz: [0-9]+ content://'
}
decoded_count() { decoded | grep -c . || true; }

q -c "CREATE EXTENSION whizbang"
q -c "SELECT pg_create_logical_replication_slot('wb_emit_test', 'test_decoding')" >/dev/null
M1=0190f0c0-0000-7000-8000-000000000001 M2=0190f0c0-0000-7000-8000-000000000002
S1=0190f0c0-0000-7000-8000-0000000000aa

echo "== a. a committed call"
rows=$(q -c "SET TimeZone = 'America/New_York'" -c "SELECT message_id, stream_id, emitted FROM whizbang.emit_outbox_messages('[
  {\"MessageId\": \"$M1\", \"Destination\": \"orders\", \"MessageType\": \"OrderCreated\", \"StreamId\": \"$S1\",
   \"IsEvent\": true, \"Scope\": {\"tenant\": \"t1\"}, \"Metadata\": {\"trace\": \"x\\\"y\"}, \"Envelope\": {\"amount\": 42}},
  {\"MessageId\": \"$M2\", \"Destination\": \"mail\", \"MessageType\": \"Send\", \"Envelope\": [1, \"two\"]},
  {\"MessageId\": \"$M1\", \"Destination\": \"orders\", \"MessageType\": \"OrderCreated\", \"Envelope\": {}}
]', p_now => '2026-12-07 10:00:00.5+00')")
check_eq "one row per element, emitted false for the repeat" \
  "$M1|$S1|t
$M2||t
$M1||f" "$rows"
got=$(decoded)
check_eq "two messages with the documented content, in order" \
  "{\"MessageId\":\"$M1\",\"Destination\":\"orders\",\"MessageType\":\"OrderCreated\",\"StreamId\":\"$S1\",\"IsEvent\":true,\"Scope\":{\"tenant\": \"t1\"},\"Metadata\":{\"trace\": \"x\\\"y\"},\"Envelope\":{\"amount\": 42},\"CreatedAt\":\"2026-12-07T10:00:00.500000+00:00\"}
{\"MessageId\":\"$M2\",\"Destination\":\"mail\",\"MessageType\":\"Send\",\"StreamId\":null,\"IsEvent\":false,\"Scope\":null,\"Metadata\":null,\"Envelope\":[1, \"two\"],\"CreatedAt\":\"2026-12-07T10:00:00.500000+00:00\"}" \
  "$got"
check "no table row was written" "SELECT count(*) = 0 FROM whizbang.wh_outbox"

echo "== b. rollback, savepoints, two-phase commit"
emit() {  # emit ID: the SQL of one emitted message with id ID
  echo "SELECT count(*) FROM whizbang.emit_outbox_messages('[{\"MessageId\": \"$1\", \"Destination\": \"d\", \"MessageType\": \"T\", \"Envelope\": {}}]');"
}
id() { printf '0190f0c1-0000-7000-8000-%012d' "$1"; }
q -c "BEGIN; $(emit "$(id 1)") ROLLBACK;" >/dev/null
q -c "BEGIN; $(emit "$(id 2)") SAVEPOINT s; $(emit "$(id 3)") ROLLBACK TO SAVEPOINT s; $(emit "$(id 4)") COMMIT;" >/dev/null
q -c "BEGIN; $(emit "$(id 5)") PREPARE TRANSACTION 'wb_emit_a';" >/dev/null
q -c "BEGIN; $(emit "$(id 6)") PREPARE TRANSACTION 'wb_emit_b';" >/dev/null
check_eq "nothing of a prepared transaction before its COMMIT PREPARED" \
  "$(id 2) $(id 4)" "$(decoded | sed -E 's/^\{"MessageId":"([^"]+)".*/\1/' | xargs)"
q -c "ROLLBACK PREPARED 'wb_emit_b'" -c "COMMIT PREPARED 'wb_emit_a'"
check_eq "COMMIT PREPARED delivers; ROLLBACK PREPARED and ROLLBACK never" \
  "$(id 5)" "$(decoded | sed -E 's/^\{"MessageId":"([^"]+)".*/\1/' | xargs)"

echo "== c. bad input emits nothing"
check_eq "ScheduledFor: 0A000" 0A000 "$(sqlstate "SELECT * FROM whizbang.emit_outbox_messages('[{\"MessageId\": \"$(id 7)\", \"Destination\": \"d\", \"MessageType\": \"T\", \"Envelope\": {}, \"ScheduledFor\": \"2030-01-01T00:00:00Z\"}]')")"
check_eq "a missing Destination: 22023" 22023 "$(sqlstate "SELECT * FROM whizbang.emit_outbox_messages('[{\"MessageId\": \"$(id 8)\", \"MessageType\": \"T\", \"Envelope\": {}}, {\"MessageId\": \"$(id 9)\", \"Destination\": \"d\", \"MessageType\": \"T\", \"Envelope\": {}}]')")"
check_eq "p_messages NULL: 22004" 22004 "$(sqlstate "SELECT * FROM whizbang.emit_outbox_messages(NULL)")"
check_eq "a read-only transaction: 25006" 25006 "$(sqlstate "BEGIN READ ONLY; $(emit "$(id 10)") COMMIT;")"
check_eq "none of them was emitted" 0 "$(decoded_count)"

echo "== d. a receiver's inbox takes the contents as they are"
q -c "$(emit "$(id 11)")" >/dev/null
contents=$(decoded)
q -c "CREATE DATABASE receiver"
q -d receiver -c "CREATE EXTENSION whizbang" >/dev/null
check_eq "store_inbox_messages stores the relayed message" "$(id 11)|t" \
  "$(q -d receiver -v m="$contents" 2>&1 <<'SQL'
SELECT message_id, was_newly_created FROM whizbang.store_inbox_messages(
  jsonb_build_array(:'m'::jsonb || '{"HandlerName": "receiver"}'))
SQL
)"

echo "== e. create_outbox_relay, stats(), drop_outbox_relay"
q -c "SELECT pg_drop_replication_slot('wb_emit_test')"
check "create_outbox_relay returns the slot, the publication and an LSN" \
  "SELECT slot_name = 'whizbang_outbox' AND publication_name = 'whizbang_outbox' AND lsn IS NOT NULL FROM whizbang.create_outbox_relay()"
check "the slot is pgoutput, logical, not two_phase" \
  "SELECT plugin = 'pgoutput' AND slot_type = 'logical' AND NOT two_phase FROM pg_replication_slots WHERE slot_name = 'whizbang_outbox'"
check "the publication is empty" \
  "SELECT NOT puballtables AND NOT EXISTS (SELECT FROM pg_publication_rel r WHERE r.prpubid = p.oid) FROM pg_publication p WHERE pubname = 'whizbang_outbox'"
q -c "$(emit "$(id 12)")" >/dev/null
check "stats(): one logical slot, none lost, a lag behind the emitted message" \
  "SELECT (SELECT value FROM whizbang.stats() WHERE metric = 'logical_slots') = 1
      AND (SELECT value FROM whizbang.stats() WHERE metric = 'logical_slots_lost') = 0
      AND (SELECT value FROM whizbang.stats() WHERE metric = 'logical_slot_max_lag_bytes') > 0
      AND (SELECT value FROM whizbang.stats() WHERE metric = 'logical_slot_max_retained_wal_bytes') > 0"
check_eq "a second create_outbox_relay of the same slot: 42710" 42710 "$(sqlstate "SELECT * FROM whizbang.create_outbox_relay()")"
q -c "SELECT whizbang.drop_outbox_relay()" >/dev/null
check "drop_outbox_relay removed both" \
  "SELECT NOT EXISTS (SELECT FROM pg_replication_slots) AND NOT EXISTS (SELECT FROM pg_publication)"

echo "== f. nowhere to decode: refused"
check_eq "no logical slot in the database: 55000" 55000 "$(sqlstate "$(emit "$(id 13)")")"
check "stats(): no slot, no lag" \
  "SELECT (SELECT value FROM whizbang.stats() WHERE metric = 'logical_slots') = 0
      AND (SELECT value FROM whizbang.stats() WHERE metric = 'logical_slot_max_lag_bytes') = 0"
q -c "ALTER SYSTEM SET wal_level = replica"
pg_ctlcluster "${PGVERSION:-15}" regress restart
msg=$(psql -qXtA -c "$(emit "$(id 14)")" 2>&1 || true)
check_eq "wal_level = replica: 55000" 55000 "$(sqlstate "$(emit "$(id 14)")")"
case "$msg" in *"needs wal_level = logical"*) echo "ok   the error names wal_level" ;;
  *) echo "FAIL the error names wal_level (got: $msg)"; FAILED=$((FAILED + 1)) ;; esac
check_eq "create_outbox_relay with wal_level = replica: 55000" 55000 "$(sqlstate "SELECT * FROM whizbang.create_outbox_relay()")"

[ "$FAILED" -eq 0 ] && echo "outbox_emit: all checks passed" || { echo "outbox_emit: $FAILED check(s) failed"; exit 1; }
