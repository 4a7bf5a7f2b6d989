#!/usr/bin/env bash
# Operating a distributed install (issue 22, docs/scaleout.md "Operations"):
#   - ALTER EXTENSION whizbang UPDATE from 0.10.0 on a distributed install with messages in
#     flight: the coordinator's update reaches every node, routed calls work before it (new
#     library, old SQL) and after, nothing is lost, and 0.10.0's routing grants are taken back;
#   - adding a node and rebalancing onto it, then draining and removing it, while the messages
#     stay claimable exactly once.
# Skips (exit 0) without Citus.
set -euo pipefail
self=$(readlink -f "$0")
cd "$(dirname "$self")/../.."
source scripts/lib.sh
source test/lib/checks.sh
source test/citus/cluster.sh

citus_suite_start
q() { psql -X -q -A -t -v ON_ERROR_STOP=1 -c "$1"; }
batch() {  # tag n: n inbox messages with ids derived from tag
  echo "(SELECT jsonb_agg(jsonb_build_object('MessageId', md5('$1' || g)::uuid, 'HandlerName', 'h', 'MessageType', 't',
           'Envelope', '{}'::jsonb) ORDER BY g) FROM generate_series(1, $2) g)"
}
current=$(sed -n "s/^default_version = '\(.*\)'/\1/p" whizbang.control)
q "CREATE EXTENSION whizbang VERSION '0.10.0'" >/dev/null
q "SELECT whizbang.distribute(8)" >/dev/null 2>&1
q "CREATE ROLE app_old LOGIN" >/dev/null
q "GRANT SELECT, DELETE ON whizbang.wh_partitions TO app_old;
   GRANT EXECUTE ON FUNCTION whizbang._on_shard(integer, anyelement, bigint, boolean, integer[]) TO app_old" >/dev/null

check "0.10.0: 30 messages stored with this library" \
  "SELECT count(*) = 30 FROM whizbang.inbox_receive($(batch a 30), 'ops', now(), 64) WHERE outcome = 'new'"
check "0.10.0: a claim without partitions takes 10" \
  "SELECT count(*) = 10 FROM whizbang.claim_work('00000000-0000-4000-8000-0000000000e1', 'inbox', 10, 300, NULL, 64, 100, now(), 'ops')"

q "ALTER EXTENSION whizbang UPDATE" >/dev/null
check "the update reached the coordinator ($current)" "SELECT extversion = '$current' FROM pg_extension WHERE extname = 'whizbang'"
check "the update reached every node" \
  "SELECT bool_and(result = '$current') AND count(*) = 2
     FROM run_command_on_workers(\$\$SELECT extversion FROM pg_extension WHERE extname = 'whizbang'\$\$)"
check "every node has the new _on_shard (6 arguments)" \
  "SELECT bool_and(result = '6') FROM run_command_on_workers(\$\$SELECT pronargs FROM pg_proc WHERE proname = '_on_shard'\$\$)"
check "0.10.0's routing grants are taken back" \
  "SELECT NOT has_table_privilege('app_old', 'whizbang.wh_partitions', 'DELETE')
      AND NOT EXISTS (SELECT 1 FROM pg_proc WHERE proname = '_on_shard' AND has_function_privilege('app_old', oid, 'EXECUTE'))"
check "the update's new setting (dedup_generations) reached every node's placement, once" \
  "SELECT bool_and(result = '30 1') AND count(*) = 2
     FROM run_command_on_workers(\$\$SELECT max(value) || ' ' || count(*) FROM whizbang.settings WHERE setting_key = 'dedup_generations'\$\$)"
check "check(): after the update, the retry policies are not shared yet" \
  "SELECT NOT ok FROM whizbang.check() WHERE item = 'retry policies'"
q "SELECT whizbang.distribute()" >/dev/null
check "distribute() again makes wh_retry_policies a reference table" \
  "SELECT count(*) = 1 FROM pg_dist_partition WHERE logicalrelid = 'whizbang.wh_retry_policies'::regclass AND partmethod = 'n'"
q "INSERT INTO whizbang.wh_retry_policies (source, consumer, max_attempts) VALUES ('inbox', 'ops-policy', 3)" >/dev/null
check "a policy written on the coordinator reaches every node" \
  "SELECT bool_and(result = '3') AND count(*) = 2 FROM run_command_on_workers(\$\$SELECT max(p.max_attempts)
     FROM whizbang.wh_retry_policies p\$\$)"
check "check(): every item ok after the update" "SELECT bool_and(ok) FROM whizbang.check()"
check "after the update: the 30 messages are on record" \
  "SELECT count(*) = 30 FROM whizbang.inbox_receive($(batch a 30), 'ops', now(), 64) WHERE outcome = 'duplicate'"
check "after the update: 20 more stored" \
  "SELECT count(*) = 20 FROM whizbang.inbox_receive($(batch b 20), 'ops', now(), 64) WHERE outcome = 'new'"

# A third node: started like the others, added, rebalanced onto.
W3=$(wb_free_port)
citus_as_server "$CITUS_BIN/initdb" -D "$CITUS_DIR/n$W3" -U postgres -A trust >/dev/null
grep -v '^port = ' "$CITUS_DIR/n$WORKER1_PORT/postgresql.conf" | tail -n 12 >>"$CITUS_DIR/n$W3/postgresql.conf"
echo "port = $W3" >>"$CITUS_DIR/n$W3/postgresql.conf"
citus_node_ctl "$W3" start
trap 'citus_node_ctl "$W3" stop -m fast 2>/dev/null || true; citus_stop' EXIT
cq "$W3" "CREATE EXTENSION citus"
q "SELECT citus_add_node('localhost', $W3)" >/dev/null
check "a new node gets whizbang from Citus" \
  "SELECT result = '$current' FROM run_command_on_workers(\$\$SELECT extversion FROM pg_extension WHERE extname = 'whizbang'\$\$)
    WHERE nodeport = $W3"
q "SELECT citus_rebalance_start()" >/dev/null 2>&1
q "SELECT citus_rebalance_wait()" >/dev/null
check "the rebalance moved work shards onto the new node" \
  "SELECT count(*) > 0 FROM pg_dist_shard_placement p JOIN pg_dist_shard s USING (shardid)
    WHERE s.logicalrelid = 'whizbang.wh_inbox'::regclass AND p.nodeport = $W3"
q "CREATE ROLE app_new LOGIN" >/dev/null
q "SELECT count(*) FROM whizbang.grant_worker('app_new', ARRAY['inbox'])" >/dev/null
check "with 3 nodes: a role granted on the coordinator only stores on every node, the new one too" \
  "SET ROLE app_new;
   SELECT count(*) = 64 FROM whizbang.inbox_receive((SELECT jsonb_agg(jsonb_build_object('MessageId', md5('n' || g)::uuid,
            'HandlerName', 'h', 'MessageType', 't', 'Envelope', '{}'::jsonb)) FROM generate_series(1, 64) g), 'ops-new', now(), 64)
    WHERE outcome = 'new'"
check "with 3 nodes: 10 more stored, all 60 on record" \
  "SELECT count(*) = 10 FROM whizbang.inbox_receive($(batch a 30) || $(batch b 20) || $(batch c 10), 'ops', now(), 64)
    WHERE outcome = 'new'"
check "with 3 nodes: a claim without partitions takes the 50 unclaimed" \
  "SELECT count(*) = 50 FROM whizbang.claim_work('00000000-0000-4000-8000-0000000000e2', 'inbox', 1000, 300, NULL, 64, 1000, now(), 'ops')"

q "SELECT citus_drain_node('localhost', $W3)" >/dev/null 2>&1
q "SELECT citus_remove_node('localhost', $W3)" >/dev/null
check "the node is removed" "SELECT count(*) = 2 FROM pg_dist_node WHERE noderole = 'primary' AND nodeport <> $COORD_PORT"
check "after the removal: all 60 on record" \
  "SELECT count(*) = 60 FROM whizbang.inbox_receive($(batch a 30) || $(batch b 20) || $(batch c 10), 'ops', now(), 64)
    WHERE outcome = 'duplicate'"
check "after the removal: nothing claimable before the leases end" \
  "SELECT count(*) = 0 FROM whizbang.claim_work('00000000-0000-4000-8000-0000000000e3', 'inbox', 1000, 300, NULL, 64, 1000, now(), 'ops')"
check "after the removal: all 60 claimable once the leases ended, and completed" \
  "CREATE TEMP TABLE c AS SELECT * FROM whizbang.claim_work('00000000-0000-4000-8000-0000000000e4', 'inbox', 1000, 300,
       NULL, 64, 1000, now() + interval '1 hour', 'ops');
   SELECT (SELECT count(*) FROM c) = 60
      AND (SELECT count(*) FROM whizbang.complete_work('inbox', ARRAY(SELECT message_id FROM c), ARRAY(SELECT lease_token FROM c),
                                                       'ops', now() + interval '1 hour') WHERE outcome = 'completed') = 60"
# run_maintenance commits batch by batch on every shard: 2,000 old records over 8 shards purged
# in batches of 10 rows (a few blocks: several batches per shard), each its own transaction.
q "SELECT count(*) FROM (SELECT whizbang.dedup_insert(md5('old' || g)::uuid, 'maint', NULL, NULL, '2020-01-01 00:00:00+00')
     FROM generate_series(1, 2000) g) s" >/dev/null
maint=$(psql -X -q -A -t -c "SET citus.log_remote_commands = on" -c "SET client_min_messages = log" \
           -c "CALL whizbang.run_maintenance(p_batch_size => 10)" 2>&1)
begins=$(grep -c 'issuing BEGIN' <<<"$maint" || true)
dedup_batches=$(sed -n 's/.*purge_old_deduplication ok, \([0-9]*\) rows in \([0-9]*\) batches.*/\1 \2/p' <<<"$maint")
check_eq "run_maintenance: the 2,000 old records purged in more batches than shards (per batch, not per shard)" yes \
  "$(read -r rows batches <<<"$dedup_batches"; [ "${rows:-0}" -eq 2000 ] && [ "${batches:-0}" -gt 16 ] && echo yes || echo "no: ${dedup_batches:-no NOTICE}")"
check_eq "run_maintenance: one transaction per batch (as many remote BEGINs as batches at least)" yes \
  "$(read -r _ batches <<<"$dedup_batches"; [ "$begins" -ge "${batches:-1}" ] && [ "$begins" -gt 16 ] && echo yes || echo "no: $begins BEGINs, ${batches:-?} batches")"
check "run_maintenance purged the old dedup records of every shard" \
  "SELECT count(*) = 0 FROM whizbang.wh_message_deduplication WHERE consumer = 'maint'"
# The idempotency keys (a colocation group of their own: each node's key shards, one after the
# other) batch by batch too: 40 old keys in 40 scopes, results then tombstones, 3 rows a batch.
q "SELECT count(*) FROM (SELECT whizbang.idempotency_complete('ops-keys-' || n, 'k' || n, t.token, '{}'::jsonb, interval '1 hour',
                                                              '2020-01-01 00:00:00+00')
     FROM generate_series(1, 40) n,
          LATERAL whizbang.idempotency_begin('ops-keys-' || n, 'k' || n, p_now => '2020-01-01 00:00:00+00') t) s" >/dev/null
maint=$(psql -X -q -A -t -c "CALL whizbang.run_maintenance('2030-01-01 00:00:00+00', 3)" 2>&1)
key_batches=$(sed -n 's/.*purge_expired_idempotency ok, \([0-9]*\) rows in \([0-9]*\) batches.*/\1 \2/p' <<<"$maint")
check_eq "run_maintenance: 40 old keys purged (40 results, then 40 tombstones) 3 rows a batch: 27 batches at least" yes \
  "$(read -r rows batches <<<"$key_batches"; [ "${rows:-0}" -eq 80 ] && [ "${batches:-0}" -ge 27 ] && echo yes || echo "no: ${key_batches:-no NOTICE}")"
check "run_maintenance: no old key is left on any node" \
  "SELECT count(*) = 0 FROM whizbang.wh_idempotency_keys WHERE scope LIKE 'ops-keys-%'"
check "no prepared transaction left on any node" \
  "SELECT (SELECT count(*) FROM pg_prepared_xacts) = 0
      AND (SELECT bool_and(result::int = 0) FROM run_command_on_workers('SELECT count(*) FROM pg_prepared_xacts'))"

echo "$FAILED failed"
[ "$FAILED" -eq 0 ]
