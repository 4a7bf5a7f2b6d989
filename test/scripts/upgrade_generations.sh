#!/usr/bin/env bash
# The update to 0.12.0 (issue 23) on a dedup table that holds 1,000,000 records, while a client
# stores: ALTER EXTENSION whizbang UPDATE TO '0.12.0' turns the table into generations in place
# (the records become the generation wh_message_deduplication_legacy). Checks:
#   - every record is there after the update, with its counters and fingerprint;
#   - a redelivery of an old id is a duplicate (its record in the legacy generation), of one the
#     client stored during the update too, and a fingerprint conflict is still seen there;
#   - the storing client never failed and no delivery of it was lost or stored twice;
#   - new records go to generations; maintenance purges the legacy generation's expired records
#     row by row (the waiting message's record kept) and, once it has all left the window, drops it;
#   - a grant on the table given before the update still works after it.
# Prints how long the update took and the storing client's longest call (figures, not checks).
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/lib.sh          # wb_free_port
work=$(mktemp -d /tmp/whizbang-upgrade-gen.XXXXXX)
chmod 777 "$work"
trap 'rm -rf "$work"' EXIT
: "${RECORDS:=1000000}"

cat >"$work/run.sh" <<'SH'
set -euo pipefail
q() { psql -X -q -At -v ON_ERROR_STOP=1 -c "$1"; }
fail() { echo "FAIL: $*"; exit 1; }
q "CREATE EXTENSION whizbang VERSION '0.11.0'"
q "CREATE ROLE gen_reader LOGIN"
q "GRANT USAGE ON SCHEMA whizbang TO gen_reader"
q "GRANT SELECT ON whizbang.wh_message_deduplication TO gen_reader"
# RECORDS records first seen over the last 40 days (some past the 30-day window), one pending
# inbox message among the oldest, one record with a fingerprint and a redelivery counted.
q "INSERT INTO whizbang.wh_message_deduplication (consumer, message_id, first_seen_at, observation_count, fingerprint)
   SELECT 'old', ('0a000000-0000-4000-8000-' || lpad(to_hex(i), 12, '0'))::uuid,
          now() - (i % 40) * interval '1 day' - interval '1 hour', 1 + (i % 3), CASE WHEN i = 7 THEN '\\x07'::bytea END
     FROM generate_series(1, $RECORDS) i"
q "SELECT count(*) FROM whizbang.store_inbox_messages(jsonb_build_array(jsonb_build_object('MessageId',
     '0b000000-0000-4000-8000-000000000001', 'HandlerName', 'h', 'MessageType', 't', 'Envelope', '{}'::jsonb)),
     p_now => now() - interval '39 days', p_consumer => 'old')" >/dev/null
q "VACUUM ANALYZE whizbang.wh_message_deduplication"
before=$(q "SELECT count(*) || ' ' || sum(observation_count) FROM whizbang.wh_message_deduplication")

# The storing client: batches of 100 new ids (each batch once) until told to stop, every outcome
# checked ('new'), each call's time written down.
(
  b=0
  while [ ! -e "$WORK/stop" ]; do
    t0=$(date +%s%N)
    n=$(psql -X -q -At -v ON_ERROR_STOP=1 -c "SELECT count(*) FILTER (WHERE outcome = 'new') FROM whizbang.dedup_insert_many(
          ARRAY(SELECT ('0c000000-0000-4000-8000-' || lpad(to_hex($b * 100 + i), 12, '0'))::uuid FROM generate_series(0, 99) i),
          'client')") || { echo "client call $b failed" >"$WORK/client_failed"; exit 1; }
    t1=$(date +%s%N)
    [ "$n" = 100 ] || { echo "client call $b: $n of 100 new" >"$WORK/client_failed"; exit 1; }
    echo "$(( (t1 - t0) / 1000000 ))" >>"$WORK/client_ms"
    b=$((b + 1))
    echo "$b" >"$WORK/client_batches"
  done
) &
client=$!
sleep 2
t0=$(date +%s%N)
q "ALTER EXTENSION whizbang UPDATE TO '0.12.0'"
t1=$(date +%s%N)
sleep 2
touch "$WORK/stop"
wait "$client" || true
[ ! -e "$WORK/client_failed" ] || fail "$(cat "$WORK/client_failed")"
batches=$(cat "$WORK/client_batches")
echo "update to 0.12.0 with $RECORDS records: $(( (t1 - t0) / 1000000 )) ms; the storing client made $batches calls of 100 ids," \
     "the longest $(sort -n "$WORK/client_ms" | tail -1) ms (median $(sort -n "$WORK/client_ms" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}') ms)"

[ "$(q "SELECT relkind FROM pg_class WHERE oid = 'whizbang.wh_message_deduplication'::regclass")" = p ] || fail "not partitioned"
[ "$(q "SELECT count(*) || ' ' || sum(observation_count) FROM whizbang.wh_message_deduplication WHERE consumer <> 'client'")" = "$before" ] ||
  fail "records before the update: $before, after: $(q "SELECT count(*) || ' ' || sum(observation_count) FROM whizbang.wh_message_deduplication WHERE consumer <> 'client'")"
echo "ok: all $RECORDS records (and their counts) are there after the update"
[ "$(q "SELECT count(*) FROM whizbang.wh_message_deduplication_legacy")" -ge "$RECORDS" ] || fail "the legacy generation lacks records"
[ "$(q "SELECT count(*) FROM whizbang.wh_message_deduplication WHERE consumer = 'client'")" = $((batches * 100)) ] ||
  fail "the client stored $((batches * 100)) ids, the table has $(q "SELECT count(*) FROM whizbang.wh_message_deduplication WHERE consumer = 'client'")"
echo "ok: the storing client's $((batches * 100)) ids are each recorded once"
[ "$(q "SELECT whizbang.dedup_insert('0a000000-0000-4000-8000-000000000005', 'old')")" = duplicate ] || fail "old id not a duplicate"
[ "$(q "SELECT whizbang.dedup_insert('0a000000-0000-4000-8000-000000000007', 'old', '\\x08')")" = conflict ] || fail "old fingerprint not compared"
[ "$(q "SELECT whizbang.dedup_insert('0c000000-0000-4000-8000-000000000001', 'client')")" = duplicate ] || fail "client id not a duplicate"
[ "$(q "SELECT whizbang.dedup_insert('0d000000-0000-4000-8000-000000000001', 'new')")" = new ] || fail "a new id"
[ "$(q "SELECT tableoid::regclass FROM whizbang.wh_message_deduplication WHERE consumer = 'new'")" != whizbang.wh_message_deduplication_legacy ] ||
  fail "a new record went to the legacy generation"
echo "ok: old ids are duplicates (a conflict seen on an old record), new ones go to generations"
[ "$(psql -X -q -At -c "SET ROLE gen_reader" -c "SELECT count(*) > 0 FROM whizbang.wh_message_deduplication")" = t ] || fail "the grant was lost"
echo "ok: a grant given before the update still reads the table"

# Maintenance: the legacy generation's records older than 30 days go row by row, except the waiting message's.
expired=$(q "SELECT count(*) FROM whizbang.wh_message_deduplication_legacy WHERE first_seen_at < now() - interval '30 days'
               AND message_id <> '0b000000-0000-4000-8000-000000000001'")
got=$(q "SELECT rows_affected FROM whizbang.perform_maintenance() WHERE task_name = 'purge_old_deduplication'")
[ "$got" = "$expired" ] || fail "maintenance purged $got legacy records, $expired were past the window"
[ "$(q "SELECT whizbang.dedup_insert('0b000000-0000-4000-8000-000000000001', 'old')")" = duplicate ] || fail "waiting message's record lost"
echo "ok: maintenance purged the $expired expired legacy records row by row and kept the waiting message's"
# 45 days later every legacy record has left the window: the generation is dropped whole, the
# waiting message's record moved forward.
got=$(q "SELECT rows_affected FROM whizbang.perform_maintenance(now() + interval '45 days') WHERE task_name = 'purge_old_deduplication'")
[ "$(q "SELECT to_regclass('whizbang.wh_message_deduplication_legacy') IS NULL")" = t ] || fail "the legacy generation was not dropped"
[ "$(q "SELECT count(*) FROM whizbang.wh_message_deduplication WHERE message_id = '0b000000-0000-4000-8000-000000000001'")" = 1 ] ||
  fail "the waiting message's record did not move forward"
echo "ok: 45 days on, the legacy generation is dropped whole ($got records), the waiting message's record moved forward"
SH
WORK="$work" RECORDS="$RECORDS" pg_virtualenv -t -c "-p $(wb_free_port)" -o fsync=off bash "$work/run.sh"
