#!/usr/bin/env bash
# whizbang.distribute() on a throw-away Citus cluster (test/citus/cluster.sh: a coordinator and
# 2 workers on localhost), issue 14 / DESIGN §3.9 / docs/scaleout.md:
#   - data written on the single server before distribute() (dedup records, inbox messages with
#     and without a stream, outbox messages, idempotency keys, a changed setting) is all there
#     afterwards, each row in the partition of its message (its stream's where it has one);
#   - the ten tables of a message are distributed by partition_number and colocated, idempotency
#     keys by scope, settings and policies are reference tables; every primary key includes the
#     distribution column, on the coordinator, on a worker's shell and on a shard; the
#     coordinator's own copies hold no rows; a second distribute() changes nothing;
#   - idempotency keys work through the coordinator (claimed, in_progress_duplicate, completed,
#     completed_duplicate, fingerprint conflict, released) and one key's call touches one node;
#   - settings are validated and read through the coordinator;
#   - every call runs through the coordinator on the nodes of its shards, and the coordinator's
#     own copies of the tables stay empty.
# Prints ok/FAIL lines; exits non-zero when a check failed. Skips (exit 0) without Citus.
set -euo pipefail
self=$(readlink -f "$0")
cd "$(dirname "$self")/../.."
source scripts/lib.sh          # wb_free_port, wb_ensure_citus
source test/lib/checks.sh      # check, check_eq, FAILED
source test/citus/cluster.sh   # citus_start, citus_stop, cq

citus_suite_start
q() { psql -X -q -A -t -v ON_ERROR_STOP=1 -c "$1"; }
# The SQLSTATE of a statement that must fail ("none" when it succeeds).
sqlstate() {
  local out
  out=$(psql -X -q -A -t -v ON_ERROR_STOP=1 -v VERBOSITY=verbose -c "$1" 2>&1) && { echo none; return; }
  sed -nE 's/^ERROR: +([0-9A-Z]{5}):.*/\1/p' <<<"$out" | head -1
}

q "CREATE EXTENSION whizbang"
version=$(sed -n "s/^default_version = '\(.*\)'/\1/p" whizbang.control)
check_eq "whizbang was created on the workers too (Citus propagates the extension)" "$version $version" \
  "$(cq "$WORKER1_PORT" "SELECT extversion FROM pg_extension WHERE extname = 'whizbang'") $(cq "$WORKER2_PORT" "SELECT extversion FROM pg_extension WHERE extname = 'whizbang'")"

# ---- a single server's data
q "SELECT whizbang.dedup_insert('01900000-0000-7000-8000-000000000001', 'billing', '\x01')" >/dev/null
q "SELECT whizbang.dedup_insert('01900000-0000-7000-8000-000000000001', 'billing', '\x01')" >/dev/null
q "SELECT count(*) FROM whizbang.store_inbox_messages('[
  {\"MessageId\": \"01900000-0000-7000-8000-0000000000a1\", \"HandlerName\": \"h\", \"MessageType\": \"t\", \"Envelope\": {}},
  {\"MessageId\": \"01900000-0000-7000-8000-0000000000a2\", \"HandlerName\": \"h\", \"MessageType\": \"t\", \"Envelope\": {},
   \"StreamId\": \"01900000-0000-7000-8000-0000000000f1\"},
  {\"MessageId\": \"01900000-0000-7000-8000-0000000000a3\", \"HandlerName\": \"h\", \"MessageType\": \"t\", \"Envelope\": {},
   \"StreamId\": \"01900000-0000-7000-8000-0000000000f1\"}]'::jsonb)" >/dev/null
q "SELECT count(*) FROM whizbang.inbox_receive('[{\"MessageId\": \"01900000-0000-7000-8000-0000000000a4\", \"HandlerName\": \"h\",
  \"MessageType\": \"t\", \"Envelope\": {}, \"StreamId\": \"01900000-0000-7000-8000-0000000000f2\"}]'::jsonb, 'billing')" >/dev/null
q "SELECT count(*) FROM whizbang.store_outbox_messages('[
  {\"MessageId\": \"01900000-0000-7000-8000-0000000000b1\", \"Destination\": \"d\", \"MessageType\": \"t\", \"Envelope\": {}},
  {\"MessageId\": \"01900000-0000-7000-8000-0000000000b2\", \"Destination\": \"d\", \"MessageType\": \"t\", \"Envelope\": {},
   \"StreamId\": \"01900000-0000-7000-8000-0000000000f3\"}]'::jsonb)" >/dev/null
q "SELECT outcome FROM whizbang.idempotency_begin('orders', 'before', '\x01')" >/dev/null
q "UPDATE whizbang.wh_settings SET setting_value = '45' WHERE setting_key = 'dedup_retention_days'"
check "on a single server a dedup record's partition_number stays NULL; a message row carries its claim partition" \
  "SELECT (SELECT bool_and(partition_number IS NULL) FROM whizbang.wh_message_deduplication)
      AND (SELECT bool_and(partition_number = whizbang.partition_of(coalesce(stream_id, message_id), 10000))
             FROM (SELECT partition_number, stream_id, message_id FROM whizbang.wh_inbox
                   UNION ALL SELECT partition_number, stream_id, message_id FROM whizbang.wh_outbox) s)"
before=$(q "SELECT (SELECT count(*) FROM whizbang.wh_message_deduplication) || ' ' || (SELECT count(*) FROM whizbang.wh_inbox)
  || ' ' || (SELECT count(*) FROM whizbang.wh_inbox) || ' ' || (SELECT count(*) FROM whizbang.wh_inbox_streams)
  || ' ' || (SELECT count(*) FROM whizbang.wh_outbox) || ' ' || (SELECT count(*) FROM whizbang.wh_outbox)
  || ' ' || (SELECT count(*) FROM whizbang.wh_idempotency_keys)")

# ---- distribute
check_eq "distribute(NULL) is refused with 22004" 22004 "$(sqlstate "SELECT whizbang.distribute(NULL)")"
check_eq "distribute(0) is refused with 22023" 22023 "$(sqlstate "SELECT whizbang.distribute(0)")"
check_eq "distribute() on a worker is refused with 55000" 55000 \
  "$(PGPORT=$WORKER1_PORT sqlstate "SELECT whizbang.distribute(4)")"
q "SELECT whizbang.distribute(4)" >/dev/null 2>&1
after=$(q "SELECT (SELECT count(*) FROM whizbang.wh_message_deduplication) || ' ' || (SELECT count(*) FROM whizbang.wh_inbox)
  || ' ' || (SELECT count(*) FROM whizbang.wh_inbox) || ' ' || (SELECT count(*) FROM whizbang.wh_inbox_streams)
  || ' ' || (SELECT count(*) FROM whizbang.wh_outbox) || ' ' || (SELECT count(*) FROM whizbang.wh_outbox)
  || ' ' || (SELECT count(*) FROM whizbang.wh_idempotency_keys)")
check_eq "every row is still there, read through the coordinator (dedup inbox work streams outbox work keys)" "$before" "$after"
check "the eight tables of a message and wh_partitions are hash-distributed by partition_number, colocated, 4 shards each" \
  "SELECT count(*) = 9 AND count(DISTINCT colocationid) = 1 AND bool_and(partmethod = 'h')
          AND bool_and(column_to_column_name(logicalrelid, partkey) = 'partition_number')
          AND bool_and((SELECT count(*) FROM pg_dist_shard s WHERE s.logicalrelid = p.logicalrelid) = 4)
     FROM pg_dist_partition p
    WHERE logicalrelid::text IN ('whizbang.wh_message_deduplication', 'whizbang.wh_inbox',
          'whizbang.wh_inbox_streams', 'whizbang.wh_inbox_preleased', 'whizbang.wh_outbox',
          'whizbang.wh_outbox_streams', 'whizbang.wh_outbox_preleased', 'whizbang.wh_dead_letters', 'whizbang.wh_partitions')"
check "idempotency keys are distributed by scope, in a colocation group of their own" \
  "SELECT partmethod = 'h' AND column_to_column_name(logicalrelid, partkey) = 'scope'
          AND colocationid <> (SELECT colocationid FROM pg_dist_partition WHERE logicalrelid = 'whizbang.wh_inbox'::regclass)
     FROM pg_dist_partition WHERE logicalrelid = 'whizbang.wh_idempotency_keys'::regclass"
check "settings, their defaults, the idempotency and the retry policies are reference tables" \
  "SELECT count(*) = 4 FROM pg_dist_partition WHERE partmethod = 'n' AND repmodel = 't'
      AND logicalrelid::text IN ('whizbang.wh_settings', 'whizbang.wh_setting_defaults', 'whizbang.wh_idempotency_policies',
                                 'whizbang.wh_retry_policies')"
keys_sql="SELECT count(*) FILTER (WHERE NOT EXISTS (SELECT FROM pg_attribute a WHERE a.attrelid = k.conrelid
            AND a.attnum = ANY (k.conkey) AND a.attname IN ('partition_number', 'scope')))
     FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid
    WHERE c.relnamespace = 'whizbang'::regnamespace AND k.contype IN ('p', 'u')
      AND c.relname NOT IN ('wh_settings', 'wh_setting_defaults', 'wh_idempotency_policies', 'wh_retry_policies',
                            'wh_dedup_filters')"
check_eq "every primary and unique key includes the distribution column (coordinator)" 0 "$(q "$keys_sql")"
worker_keys_sql="SET citus.show_shards_for_app_name_prefixes = '*';
  SELECT count(*) || ' keys, ' || count(*) FILTER (WHERE NOT EXISTS (SELECT FROM pg_attribute a WHERE a.attrelid = k.conrelid
            AND a.attnum = ANY (k.conkey) AND a.attname IN ('partition_number', 'scope'))) || ' without'
     FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid
    WHERE c.relnamespace = 'whizbang'::regnamespace AND k.contype IN ('p', 'u')
      AND c.relname !~ '^wh_(settings|setting_defaults|idempotency_policies|retry_policies|dedup_filters)'"
check_eq "every primary and unique key includes the distribution column (a worker: 10 shells, 10 tables x 2 shards)" \
  "30 keys, 0 without" "$(cq "$WORKER1_PORT" "$worker_keys_sql" | tail -1)"
check "the coordinator's own copies of the tables hold no rows (Citus's shells)" \
  "SELECT bool_and(pg_relation_size(c.oid) = 0) FROM pg_class c
    WHERE c.relnamespace = 'whizbang'::regnamespace AND c.relkind = 'r'"
check "each message's rows are in its stream's partition (its own where it has none)" \
  "SELECT bool_and(i.partition_number = whizbang.partition_of(coalesce(i.stream_id, i.message_id), 10000)
                   AND w.partition_number = i.partition_number)
     FROM whizbang.wh_inbox i JOIN whizbang.wh_inbox w USING (message_id, consumer, partition_number)"
check "a streamed message's dedup record is colocated with the message" \
  "SELECT d.partition_number = whizbang.partition_of('01900000-0000-7000-8000-0000000000f2', 10000)
     FROM whizbang.wh_message_deduplication d WHERE d.message_id = '01900000-0000-7000-8000-0000000000a4'"
check "stream counters are in their stream's partition" \
  "SELECT bool_and(partition_number = whizbang.partition_of(stream_id, 10000)) FROM whizbang.wh_inbox_streams"
check "outbox messages are in their stream's partition" \
  "SELECT bool_and(o.partition_number = whizbang.partition_of(coalesce(o.stream_id, o.message_id), 10000))
     FROM whizbang.wh_outbox o"
check "the counted redelivery survived (observation_count 2)" \
  "SELECT observation_count = 2 FROM whizbang.wh_message_deduplication WHERE message_id = '01900000-0000-7000-8000-000000000001'"
out=$(q "SELECT whizbang.distribute(4)" 2>&1)
check_eq "a second distribute() changes nothing and says so" "NOTICE:  whizbang is distributed already" "$out"

# ---- idempotency keys through the coordinator
check_eq "a key claimed before distribute() is still in progress" in_progress_duplicate \
  "$(q "SELECT outcome FROM whizbang.idempotency_begin('orders', 'before', '\x01')")"
token=$(q "SELECT token FROM whizbang.idempotency_begin('orders', 'k1', '\x01')")
check "a new key is claimed with a token" "SELECT $token > 0"
check_eq "the same key again: in_progress_duplicate" in_progress_duplicate \
  "$(q "SELECT outcome FROM whizbang.idempotency_begin('orders', 'k1', '\x01')")"
check_eq "complete with the token" completed \
  "$(q "SELECT whizbang.idempotency_complete('orders', 'k1', $token, '{\"total\": 5}')")"
check_eq "the key again: completed_duplicate with the result" 'completed_duplicate|{"total": 5}' \
  "$(q "SELECT outcome || '|' || result FROM whizbang.idempotency_begin('orders', 'k1', '\x01')")"
check_eq "the key with another fingerprint: conflict" conflict \
  "$(q "SELECT outcome FROM whizbang.idempotency_begin('orders', 'k1', '\x02')")"
t2=$(q "SELECT token FROM whizbang.idempotency_begin('orders', 'k2')")
check_eq "release with the token" released "$(q "SELECT whizbang.idempotency_release('orders', 'k2', $t2)")"
check_eq "a released key is claimed afresh" claimed "$(q "SELECT outcome FROM whizbang.idempotency_begin('orders', 'k2')")"
nodes=$(psql -X -q -A -t -c "SET citus.log_remote_commands = on" -c "SET client_min_messages = log" \
          -c "SELECT outcome FROM whizbang.idempotency_begin('orders', 'k3')" 2>&1 |
        sed -nE 's/.*on server [^@]*@([^ ]+) connectionId.*/\1/p' | sort -u | wc -l)
check_eq "one key's idempotency_begin touches one node (citus.log_remote_commands)" 1 "$nodes"
check "scope 'orders' lives on one shard" \
  "SELECT count(DISTINCT get_shard_id_for_distribution_column('whizbang.wh_idempotency_keys', scope)) = 1
     FROM whizbang.wh_idempotency_keys WHERE scope = 'orders'"

# ---- settings through the coordinator
check "a setting changed before distribute() is kept" \
  "SELECT value = '45' FROM whizbang.settings WHERE setting_key = 'dedup_retention_days'"
q "UPDATE whizbang.wh_settings SET setting_value = '46' WHERE setting_key = 'dedup_retention_days'"
check "a setting changed through the coordinator is read back" \
  "SELECT value = '46' FROM whizbang.settings WHERE setting_key = 'dedup_retention_days'"
check_eq "a bad setting is still refused (22023)" 22023 \
  "$(sqlstate "UPDATE whizbang.wh_settings SET setting_value = 'x' WHERE setting_key = 'dedup_retention_days'")"
placement=$(cq "$WORKER2_PORT" "SELECT 'whizbang.wh_settings_' || shardid FROM pg_dist_shard
                                 WHERE logicalrelid = 'whizbang.wh_settings'::regclass")
check_eq "a worker's placement of wh_settings has the coordinator's value" 46 \
  "$(cq "$WORKER2_PORT" "SELECT setting_value FROM $placement WHERE setting_key = 'dedup_retention_days'")"

# ---- every call runs on the nodes; nothing is written into the coordinator's shells
m='[{"MessageId": "01900000-0000-7000-8000-0000000000c1", "HandlerName": "h", "Destination": "d", "MessageType": "t", "Envelope": {}},
    {"MessageId": "01900000-0000-7000-8000-0000000000c2", "HandlerName": "h", "Destination": "d", "MessageType": "t", "Envelope": {},
     "StreamId": "01900000-0000-7000-8000-0000000000f9"}]'
for call in \
  "SELECT whizbang.dedup_insert('01900000-0000-7000-8000-0000000000c9')" \
  "SELECT * FROM whizbang.dedup_insert_many(ARRAY['01900000-0000-7000-8000-0000000000c8'::uuid])" \
  "SELECT * FROM whizbang.store_inbox_messages('$m')" \
  "SELECT * FROM whizbang.inbox_receive('$m', 'other')" \
  "SELECT * FROM whizbang.store_outbox_messages('$m')" \
  "SELECT * FROM whizbang.claim_work('01900000-0000-7000-8000-0000000000e1')" \
  "SELECT * FROM whizbang.fail_work('inbox', ARRAY['01900000-0000-7000-8000-0000000000c1'::uuid], ARRAY['x'])" \
  "SELECT * FROM whizbang.complete_work('inbox', ARRAY['01900000-0000-7000-8000-0000000000c2'::uuid])" \
  "SELECT * FROM whizbang.cancel_work('inbox', ARRAY['01900000-0000-7000-8000-0000000000c1'::uuid])" \
  "SELECT whizbang.complete_outbox_published(ARRAY['01900000-0000-7000-8000-0000000000c1'::uuid])" \
  "SELECT * FROM whizbang.perform_maintenance()" \
  "CALL whizbang.run_maintenance()" \
  "SELECT * FROM whizbang.stats()" \
  "SELECT * FROM whizbang.queues" \
  "SELECT * FROM whizbang.peek()" \
  "SELECT * FROM whizbang.leases"; do
  check_eq "runs through the coordinator: ${call:0:70}" none "$(sqlstate "$call")"
done
# A call for one partition touches one node: the remote commands Citus logs for it name one server.
nodes_of() {
  psql -X -q -A -t -c "SET citus.log_remote_commands = on" -c "SET client_min_messages = log" -c "$1" 2>&1 |
    sed -nE 's/.*on server [^@]*@([^ ]+) connectionId.*/\1/p' | sort -u | wc -l
}
p1=$(q "SELECT whizbang.partition_of('01900000-0000-7000-8000-0000000000f9', 10000)")
check_eq "claim_work(p_partitions => one partition) touches one node" 1 \
  "$(nodes_of "SELECT count(*) FROM whizbang.claim_work('01900000-0000-7000-8000-0000000000e2', p_partitions => ARRAY[$p1])")"
check_eq "a store of one stream's messages touches one node" 1 \
  "$(nodes_of "SELECT count(*) FROM whizbang.inbox_receive('[{\"MessageId\": \"01900000-0000-7000-8000-0000000000d1\", \"HandlerName\": \"h\", \"MessageType\": \"t\", \"Envelope\": {}, \"StreamId\": \"01900000-0000-7000-8000-0000000000f9\"}, {\"MessageId\": \"01900000-0000-7000-8000-0000000000d2\", \"HandlerName\": \"h\", \"MessageType\": \"t\", \"Envelope\": {}, \"StreamId\": \"01900000-0000-7000-8000-0000000000f9\"}]', 'one')")"
# An outcome call names rows by id, which does not tell their node: it asks every node, and the
# node that has the row answers.
check_eq "complete_work asks both nodes (an id does not tell its node) and the row's node completes it" "2 completed" \
  "$(psql -X -q -A -t -c "SET citus.log_remote_commands = on" -c "SET client_min_messages = log" \
       -c "SELECT outcome FROM whizbang.complete_work('inbox', ARRAY['01900000-0000-7000-8000-0000000000d1'::uuid], NULL, 'one')" 2>&1 |
     grep -A1 'issuing WITH w AS' | sed -nE 's/.*on server [^@]*@([^ ]+) connectionId.*/\1/p' | sort -u | wc -l) $(
     q "SELECT CASE WHEN NOT EXISTS (SELECT 1 FROM whizbang.wh_inbox WHERE consumer = 'one' AND message_id = '01900000-0000-7000-8000-0000000000d1') THEN 'completed' ELSE 'still there' END")"

# Citus syncs its metadata to the workers, so whizbang answers on a worker too.
check_eq "a worker answers the same calls (metadata synced): dedup_insert_many there" "new,new" \
  "$(PGPORT=$WORKER1_PORT q "SELECT string_agg(outcome, ',') FROM whizbang.dedup_insert_many(ARRAY['01900000-0000-7000-8000-0000000000b7', '01900000-0000-7000-8000-0000000000b8']::uuid[], 'on-worker')")"
check_eq "... and the coordinator sees the records" 2 \
  "$(q "SELECT count(*) FROM whizbang.wh_message_deduplication WHERE consumer = 'on-worker'")"
check_eq "... a claim on the worker hands out a row stored through the coordinator" 1 \
  "$(q "SELECT count(*) FROM whizbang.store_inbox_messages('[{\"MessageId\": \"01900000-0000-7000-8000-0000000000b9\", \"HandlerName\": \"h\", \"MessageType\": \"t\", \"Envelope\": {}}]', p_consumer => 'on-worker')" >/dev/null
     PGPORT=$WORKER2_PORT q "SELECT count(*) FROM whizbang.claim_work('01900000-0000-7000-8000-0000000000e3', 'inbox', p_consumer => 'on-worker')")"

check "after them the coordinator's own copies of the tables still hold no rows" \
  "SELECT bool_and(pg_relation_size(c.oid) = 0) FROM pg_class c
    WHERE c.relnamespace = 'whizbang'::regnamespace AND c.relkind = 'r'"
check "the stored messages are on the workers, readable through the coordinator" \
  "SELECT count(*) = 2 FROM whizbang.wh_inbox WHERE consumer = 'other'"

echo "$FAILED failed"
[ "$FAILED" -eq 0 ]
