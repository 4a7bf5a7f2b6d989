#!/usr/bin/env bash
# pg_dump + restore into a fresh database reproduces whizbang's settings, dedup records and
# queued work (inbox, outbox with a leased stream) without errors (DESIGN §2: tables registered with pg_extension_config_dump; §3.6: "pg_dump +
# restore into a fresh database must reproduce the settings without conflicts").
#
# In one throw-away cluster: database a gets the extension, two settings changed (the seed's
# INSERT … ON CONFLICT form and an UPDATE) and dedup records (several consumers, repeats,
# conflicts, fingerprints with awkward bytes, a consumer name with tab / newline / backslash),
# an inbox message, and two outbox messages of one stream whose head is leased.
# a is dumped in plain format and restored with psql -v ON_ERROR_STOP=1 into b, and in custom
# format restored with pg_restore --exit-on-error into c. The settings view, wh_settings and
# every dedup record and the queued work must be equal in a, b and c, and b must keep working
# afterwards: the stream resumes in order with fencing tokens above the restored ones.
set -euo pipefail

self=$(readlink -f "$0")
cd "$(dirname "$self")/../.."

source scripts/lib.sh  # wb_free_port

if [ "${1:-}" != "--in-cluster" ]; then
    exec pg_virtualenv -t -c "-p $(wb_free_port)" -o fsync=off bash "$self" --in-cluster
fi

work=$(mktemp -d /tmp/whizbang-dump.XXXXXX)
chmod 777 "$work"
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
ok() { echo "ok   $*"; }
q() { local db=$1; shift; psql -X -q -A -t -v ON_ERROR_STOP=1 -d "$db" "$@"; }

createdb a
q a <<'SQL'
CREATE EXTENSION whizbang;

-- The seed's form of changing a setting, and a plain UPDATE.
INSERT INTO whizbang.wh_settings (setting_key, setting_value, value_type, description)
VALUES ('dedup_retention_days', '90', 'integer', 'Days to retain message deduplication entries')
ON CONFLICT (setting_key) DO UPDATE SET setting_value = EXCLUDED.setting_value;
UPDATE whizbang.wh_settings SET setting_value = 'accept' WHERE setting_key = 'replay_policy';

-- The generations of 2024-06-30 on, made by maintenance run then (0.13.0: a store makes none that
-- has left the window).
SELECT count(*) FROM whizbang.perform_maintenance('2024-06-30 00:00:00+00');
-- Dedup records: 500 new ids, then a batch with repeats and changed payloads.
SELECT count(*) FROM whizbang.dedup_insert_many(
    ARRAY(SELECT md5('a' || i)::uuid FROM generate_series(1, 500) i ORDER BY i), 'billing',
    ARRAY(SELECT CASE WHEN i % 3 = 0 THEN NULL ELSE sha256(('payload ' || i)::bytea) END
            FROM generate_series(1, 500) i ORDER BY i),
    NULL, '2024-06-30 12:00:00+00');
SELECT count(*) FROM whizbang.dedup_insert_many(
    ARRAY(SELECT md5('a' || i)::uuid FROM generate_series(1, 500, 7) i ORDER BY i), 'billing',
    ARRAY(SELECT sha256(('changed ' || i)::bytea) FROM generate_series(1, 500, 7) i ORDER BY i),
    NULL, '2024-07-01 12:00:00+00');
SELECT whizbang.dedup_insert(md5('a1')::uuid, 'shipping', '\x00015c0a0d09ff'::bytea, NULL, '2024-06-30 13:00:00+00');
SELECT whizbang.dedup_insert(md5('a1')::uuid, '', NULL, NULL, '2024-06-30 14:00:00+00');
SELECT whizbang.dedup_insert(md5('a2')::uuid, E'odd\tconsumer\\with\nnewline', '\x5c5c'::bytea, NULL,
                             '2024-06-30 15:00:00+00');
-- Recorded because replay_policy is accept (sent long before the 90-day horizon).
SELECT whizbang.dedup_insert(md5('old')::uuid, 'billing', NULL, '2020-01-01 00:00:00+00', '2024-06-30 16:00:00+00');

-- Work in both queues: two messages of one outbox stream, one of them leased by a claim (its
-- token must stay below every later token), and an inbox message.
SELECT count(*) FROM whizbang.store_outbox_messages(jsonb_build_array(
    jsonb_build_object('MessageId', md5('o1')::uuid, 'Destination', 'orders', 'MessageType', 'OrderCreated',
                       'Envelope', '{"order": 1}'::jsonb, 'StreamId', md5('stream')::uuid),
    jsonb_build_object('MessageId', md5('o2')::uuid, 'Destination', 'orders', 'MessageType', 'OrderPaid',
                       'Envelope', '{"order": 1}'::jsonb, 'StreamId', md5('stream')::uuid)),
    p_now => '2024-06-30 11:00:00+00');
SQL
# The claim's token, from its result (in either lease store): later claims must hand out larger ones.
relay_token=$(q a -c "SELECT lease_token FROM whizbang.claim_work(md5('relay')::uuid, 'outbox', 1, 60,
                                                                p_now => '2024-06-30 12:00:00+00')")
[ -n "$relay_token" ] && ok "database a: one outbox message leased (token $relay_token)" || fail "database a: nothing claimed"
q a <<'SQL'
SELECT count(*) FROM whizbang.store_inbox_messages(jsonb_build_array(jsonb_build_object(
    'MessageId', md5('i1')::uuid, 'HandlerName', 'h', 'MessageType', 't', 'Envelope', '{}'::jsonb)), p_consumer => 'billing');
SQL

settings_query="SELECT setting_key, value, default_value, value_type, is_default, description
                  FROM whizbang.settings ORDER BY setting_key"
raw_settings_query="SELECT setting_key, setting_value, value_type, description
                      FROM whizbang.wh_settings ORDER BY setting_key"
dedup_query="SELECT consumer, message_id, first_seen_at, observation_count, conflict_count,
                    encode(fingerprint, 'hex')
               FROM whizbang.wh_message_deduplication ORDER BY consumer COLLATE \"C\", message_id"
state() {
    local db=$1
    echo "== extension"; q "$db" -c "SELECT extversion FROM pg_extension WHERE extname = 'whizbang'"
    echo "== settings view"; q "$db" -c "$settings_query"
    echo "== wh_settings"; q "$db" -c "$raw_settings_query"
    echo "== wh_message_deduplication"; q "$db" -c "$dedup_query"
    # Leases are not compared: a shared-memory lease lives in the server, not in the dump. The
    # row's attempts are only compared with themselves (a against its restores).
    echo "== outbox"; q "$db" -c "SELECT o.message_id, o.message_type, o.event_data, w.stream_seq, w.attempts
                                      FROM whizbang.wh_outbox o JOIN whizbang.wh_outbox w USING (message_id) ORDER BY w.stream_seq"
    echo "== outbox streams"; q "$db" -c "SELECT stream_id, last_seq FROM whizbang.wh_outbox_streams"
    echo "== inbox"; q "$db" -c "SELECT i.consumer, i.message_id, w.attempts FROM whizbang.wh_inbox i JOIN whizbang.wh_inbox w USING (consumer, message_id)"
}

state a >"$work/a.state"
rows_a=$(q a -c "SELECT count(*) FROM whizbang.wh_message_deduplication")
[ "$rows_a" -eq 505 ] && ok "database a holds 505 dedup records" || fail "database a holds $rows_a dedup records, not 505"
changed_a=$(q a -c "SELECT string_agg(setting_key || '=' || value, ',' ORDER BY setting_key) FROM whizbang.settings WHERE NOT is_default")
[ "$changed_a" = "dedup_retention_days=90,replay_policy=accept" ] &&
    ok "database a has the two changed settings" || fail "database a changed settings: $changed_a"
conflicts_a=$(q a -c "SELECT sum(conflict_count) FROM whizbang.wh_message_deduplication")
[ "$conflicts_a" -gt 0 ] && ok "database a has $conflicts_a recorded conflicts" || fail "no conflicts recorded in a"

# ---- plain dump, restored with psql -v ON_ERROR_STOP=1 into b --------------------------
pg_dump -d a -f "$work/a.sql" 2>"$work/dump.err" || { cat "$work/dump.err"; fail "pg_dump of a failed"; }
[ -s "$work/dump.err" ] && { echo "pg_dump stderr:"; cat "$work/dump.err"; }

settings_rows=$(awk '/^COPY whizbang.wh_settings /{on=1; next} on && /^\\\.$/{on=0} on' "$work/a.sql" | wc -l)
[ "$settings_rows" -eq 2 ] && ok "the dump holds exactly the 2 changed settings" ||
    fail "the dump holds $settings_rows wh_settings rows, not 2"
grep -q '^COPY whizbang.wh_setting_defaults ' "$work/a.sql" &&
    fail "the dump holds wh_setting_defaults data (it belongs to the extension)" ||
    ok "the dump holds no wh_setting_defaults data"
# From 0.12.0 the records are in the generations (wh_message_deduplication_g...), each dumped
# with its data like any table of the user's.
dedup_rows=$(awk '/^COPY whizbang.wh_message_deduplication[_ ]/{on=1; next} on && /^\\\.$/{on=0} on' "$work/a.sql" | wc -l)
[ "$dedup_rows" -eq 505 ] && ok "the dump holds all 505 dedup records" || fail "the dump holds $dedup_rows dedup rows, not 505"

createdb b
if psql -X -q -v ON_ERROR_STOP=1 -d b -f "$work/a.sql" >"$work/restore_b.out" 2>"$work/restore_b.err"; then
    ok "psql -v ON_ERROR_STOP=1 restored the plain dump into b"
else
    fail "restoring the plain dump into b failed"
fi
if grep -E 'ERROR|FATAL' "$work/restore_b.err"; then
    fail "the restore into b reported errors (above)"
else
    ok "the restore into b reported no error"
fi
[ -s "$work/restore_b.err" ] && { echo "restore stderr:"; cat "$work/restore_b.err"; }
state b >"$work/b.state"
if diff -u "$work/a.state" "$work/b.state"; then
    ok "b equals a: extension version, settings view, wh_settings and every dedup record"
else
    fail "b differs from a (diff above)"
fi

# ---- custom-format dump, restored with pg_restore --exit-on-error into c -----------------
pg_dump -d a -Fc -f "$work/a.dump"
createdb c
if pg_restore --exit-on-error -d c "$work/a.dump" 2>"$work/restore_c.err"; then
    ok "pg_restore --exit-on-error restored the custom dump into c"
else
    cat "$work/restore_c.err"; fail "pg_restore into c failed"
fi
state c >"$work/c.state"
if diff -u "$work/a.state" "$work/c.state"; then
    ok "c equals a"
else
    fail "c differs from a (diff above)"
fi

# ---- the restored database keeps working -------------------------------------------------
out=$(q b -c "SELECT whizbang.dedup_insert(md5('a1')::uuid, 'billing')")
[ "$out" = "duplicate" ] && ok "b: a restored id is duplicate" || fail "b: a restored id answered '$out'"
out=$(q b -c "SELECT whizbang.dedup_insert(md5('a1')::uuid, 'billing', sha256('something else'::bytea))")
[ "$out" = "conflict" ] && ok "b: the restored fingerprint still detects a conflict" || fail "b: expected conflict, got '$out'"
out=$(q b -c "SELECT whizbang.dedup_insert(md5('a2')::uuid, E'odd\tconsumer\\\\with\nnewline')")
[ "$out" = "duplicate" ] && ok "b: the odd consumer name survived the dump" || fail "b: odd consumer answered '$out'"
out=$(q b -c "SELECT whizbang.dedup_insert(md5('b-new')::uuid, 'billing', NULL, '2024-01-01 00:00:00+00', '2024-06-30 12:00:00+00')")
[ "$out" = "new" ] && ok "b: the restored replay_policy accept is in effect" || fail "b: expected new, got '$out'"
q b -c "UPDATE whizbang.wh_settings SET setting_value = 'reject' WHERE setting_key = 'replay_policy'"
out=$(q b -c "SELECT whizbang.dedup_insert(md5('b-old')::uuid, 'billing', NULL, '2024-05-01 00:00:00+00', '2024-06-30 12:00:00+00')")
[ "$out" = "new" ] && ok "b: the restored dedup_retention_days 90 is in effect" || fail "b: expected new (90-day horizon), got '$out'"
out=$(q b -c "SELECT whizbang.dedup_insert(md5('b-older')::uuid, 'billing', NULL, '2024-03-01 00:00:00+00', '2024-06-30 12:00:00+00')")
[ "$out" = "expired" ] && ok "b: older than 90 days is expired" || fail "b: expected expired, got '$out'"
if q b -c "INSERT INTO whizbang.wh_settings (setting_key, setting_value) VALUES ('dedup_retention_days', '0')" 2>/dev/null; then
    fail "b: the settings trigger no longer validates after the restore"
else
    ok "b: the settings trigger still validates after the restore"
fi

out=$(q b -c "SELECT string_agg(message_type || ':' || (lease_token > ${relay_token:-NULL})::text, ',' ORDER BY message_type)
                FROM whizbang.claim_work(md5('relay2')::uuid, 'outbox', 10, 60, p_now => '2024-06-30 12:05:00+00')")
[ "$out" = "OrderCreated:true,OrderPaid:true" ] &&
    ok "b: the outbox stream resumes (the lapsed head and its follower) with a larger fencing token" ||
    fail "b: outbox claim after restore answered '$out'"
out=$(q b -c "SELECT w.stream_seq FROM whizbang.store_outbox_messages(jsonb_build_array(jsonb_build_object(
                'MessageId', md5('o3')::uuid, 'Destination', 'orders', 'MessageType', 'OrderShipped',
                'Envelope', '{}'::jsonb, 'StreamId', md5('stream')::uuid))) s
              JOIN whizbang.wh_outbox w ON w.message_id = s.message_id")
[ -z "$out" ] || [ "$out" = "3" ] || fail "b: a new message of the stream was numbered $out, not 3"
out=$(q b -c "SELECT stream_seq FROM whizbang.wh_outbox WHERE message_id = md5('o3')::uuid")
[ "$out" = "3" ] && ok "b: the restored stream counter numbers the next message 3" || fail "b: next stream number is '$out', not 3"

# A second dump of b restores as well (dump of a restored database).
createdb d
pg_dump -d b -f "$work/b.sql"
if psql -X -q -v ON_ERROR_STOP=1 -d d -f "$work/b.sql" >/dev/null 2>"$work/restore_d.err" && ! grep -q ERROR "$work/restore_d.err"; then
    ok "a dump of the restored database restores again"
else
    cat "$work/restore_d.err"; fail "restoring a dump of b failed"
fi

echo "dedup records: a=$rows_a; settings changed in a: $changed_a"
if [ "$failures" -ne 0 ]; then
    echo "dump_restore: $failures check(s) FAILED"
    exit 1
fi
echo "dump_restore: PASS"
