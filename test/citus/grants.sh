#!/usr/bin/env bash
# Grants and routing state on a throw-away Citus cluster (issue 22, DESIGN §3.9):
#   - a least-privilege role per capability, granted with whizbang.grant_worker(role, ARRAY[cap])
#     on the coordinator only, runs its calls through the coordinator (inbox worker, outbox
#     producer, outbox relay, idempotency, dedup), and is refused what it was not granted;
#   - no application role can change routing rows or call _on_shard (42501); whizbang.check()
#     reports a role that was given such a privilege;
#   - a routing row deleted by a superuser makes the calls of its partition fail (55000) with
#     nothing written, never a silent drop; check() reports it; restoring the row heals it.
# Skips (exit 0) without Citus.
set -euo pipefail
self=$(readlink -f "$0")
cd "$(dirname "$self")/../.."
source scripts/lib.sh
source test/lib/checks.sh
source test/citus/cluster.sh

citus_suite_start
q() { psql -X -q -A -t -v ON_ERROR_STOP=1 -c "$1"; }
q "CREATE EXTENSION whizbang" >/dev/null
# A role granted on the single server, before distribute(): its grants keep working after.
q "CREATE ROLE r_early LOGIN" >/dev/null
q "SELECT count(*) FROM whizbang.grant_worker('r_early', ARRAY['inbox'])" >/dev/null
q "SELECT whizbang.distribute(8)" >/dev/null 2>&1
# The SQLSTATE a statement ends with ('00000': none), as the role that runs it.
q "CREATE FUNCTION public.sqlstate_of(p_sql text) RETURNS text LANGUAGE plpgsql AS \$\$
   BEGIN EXECUTE p_sql; RETURN '00000'; EXCEPTION WHEN OTHERS THEN RETURN SQLSTATE; END \$\$;
   GRANT EXECUTE ON FUNCTION public.sqlstate_of(text) TO PUBLIC;
   CREATE FUNCTION public.batch(p_tag text, p_n int) RETURNS jsonb LANGUAGE sql AS \$\$
     SELECT jsonb_agg(jsonb_build_object('MessageId', md5(p_tag || g)::uuid, 'HandlerName', 'h', 'MessageType', 't',
                                         'Destination', 'd', 'Envelope', '{}'::jsonb) ORDER BY g)
       FROM generate_series(1, p_n) g \$\$;
   GRANT EXECUTE ON FUNCTION public.batch(text, int) TO PUBLIC;"
for r in r_inbox r_outbox r_relay r_idem r_dedup; do q "CREATE ROLE $r LOGIN" ; done
q "SELECT count(*) FROM whizbang.grant_worker('r_inbox', ARRAY['inbox'])" >/dev/null
q "SELECT count(*) FROM whizbang.grant_worker('r_outbox', ARRAY['outbox'])" >/dev/null
q "SELECT count(*) FROM whizbang.grant_worker('r_relay', ARRAY['relay'])" >/dev/null
q "SELECT count(*) FROM whizbang.grant_worker('r_idem', ARRAY['idempotency'])" >/dev/null
q "SELECT count(*) FROM whizbang.grant_worker('r_dedup', ARRAY['dedup'])" >/dev/null
as() { local role=$1; shift; psql -X -q -A -t -v ON_ERROR_STOP=1 -c "SET ROLE $role; $1" 2>&1 | grep -v '^CONTEXT\|^LINE\|^ *\^\|^HINT\|^DETAIL' | tail -n 1; }
as_check() {  # label role sql(returns t)
  local got; got=$(as "$2" "$3") || true
  check_eq "$1" t "$got"
}

# The inbox worker.
as_check "inbox worker: inbox_receive stores 40 new messages" r_inbox \
  "SELECT count(*) = 40 FROM whizbang.inbox_receive(public.batch('i', 40), 'g', now(), 64) WHERE outcome = 'new'"
as_check "inbox worker: store_inbox_messages stores 20 more, a redelivery is not new" r_inbox \
  "SELECT count(*) = 20 FROM whizbang.store_inbox_messages(public.batch('j', 20) || public.batch('i', 3), p_partition_count => 64, p_consumer => 'g')"
as_check "inbox worker: claims, renews, releases, fails and completes through the coordinator" r_inbox \
  "CREATE TEMP TABLE c AS SELECT * FROM whizbang.claim_work('00000000-0000-4000-8000-0000000000a1', 'inbox', 1000, 30, NULL, 64);
   SELECT (SELECT count(*) FROM c) = 60
      AND (SELECT count(*) FROM whizbang.renew_leases('inbox', ARRAY(SELECT message_id FROM c ORDER BY message_id LIMIT 5), ARRAY(SELECT lease_token FROM c ORDER BY message_id LIMIT 5), p_consumer => 'g') WHERE outcome = 'renewed') = 5
      AND (SELECT count(*) FROM whizbang.release_work('inbox', ARRAY(SELECT message_id FROM c ORDER BY message_id LIMIT 2), ARRAY(SELECT lease_token FROM c ORDER BY message_id LIMIT 2), p_consumer => 'g') WHERE outcome = 'released') = 2
      AND (SELECT count(*) FROM whizbang.fail_work('inbox', ARRAY(SELECT message_id FROM c ORDER BY message_id OFFSET 2 LIMIT 3), ARRAY['e','e','e'], p_consumer => 'g') WHERE outcome IS NOT NULL) = 3
      AND (SELECT count(*) FROM whizbang.complete_work('inbox', ARRAY(SELECT message_id FROM c ORDER BY message_id OFFSET 5), NULL, p_consumer => 'g') WHERE outcome = 'completed') = 55"
# The work above is counted where it ran, on the nodes (2PC: at PREPARE), and counters() on the
# coordinator adds the nodes up (0.16.0; nothing is counted without whizbang preloaded).
check "counters: consumer g's stores, claims, failures and completions through the coordinator, added up from the nodes" \
  "SELECT CASE WHEN current_setting('shared_preload_libraries') LIKE '%whizbang%'
               THEN (SELECT stored = 60 AND claimed = 60 AND failed = 3 AND completed = 55
                       FROM whizbang.counters() WHERE source = 'inbox' AND consumer = 'g')
               ELSE (SELECT count(*) = 0 FROM whizbang.counters()) END"
check_eq "inbox worker: may not store outbox messages" 42501 \
  "$(as r_inbox "SELECT public.sqlstate_of(\$\$SELECT whizbang.store_outbox_messages(public.batch('o', 1))\$\$)")"
check_eq "inbox worker: may not begin idempotency keys" 42501 \
  "$(as r_inbox "SELECT public.sqlstate_of(\$\$SELECT whizbang.idempotency_begin('s', 'k')\$\$)")"

as_check "a role granted before distribute(): stores and claims through the coordinator" r_early \
  "SELECT (SELECT count(*) FROM whizbang.inbox_receive(public.batch('early', 10), 'early', now(), 64) WHERE outcome = 'new') = 10
      AND (SELECT count(*) FROM whizbang.claim_work('00000000-0000-4000-8000-0000000000a9', 'inbox', 100, 30, NULL, 64,
                                                     100, now(), 'early')) = 10"

# The outbox producer and its relay.
as_check "outbox producer: stores 30 messages" r_outbox \
  "SELECT count(*) = 30 FROM whizbang.store_outbox_messages(public.batch('o', 30), p_partition_count => 64) WHERE was_newly_created"
check_eq "outbox producer: may not claim" 42501 \
  "$(as r_outbox "SELECT public.sqlstate_of(\$\$SELECT whizbang.claim_work('00000000-0000-4000-8000-0000000000a2', 'outbox')\$\$)")"
as_check "outbox relay: claims the 30 and completes them (complete_work and complete_outbox_published)" r_relay \
  "CREATE TEMP TABLE c AS SELECT * FROM whizbang.claim_work('00000000-0000-4000-8000-0000000000a3', 'outbox', 1000, 30, NULL, 64);
   SELECT (SELECT count(*) FROM c) = 30
      AND (SELECT count(*) FROM whizbang.complete_work('outbox', ARRAY(SELECT message_id FROM c ORDER BY message_id LIMIT 10), NULL) WHERE outcome = 'completed') = 10
      AND whizbang.complete_outbox_published(ARRAY(SELECT message_id FROM c ORDER BY message_id OFFSET 10)) = 20"
check_eq "outbox relay: may not store inbox messages" 42501 \
  "$(as r_relay "SELECT public.sqlstate_of(\$\$SELECT whizbang.inbox_receive(public.batch('x', 1), 'g')\$\$)")"

# What one server's statements would refuse, the coordinator refuses too (the nodes run as the owner).
check_eq "inbox worker: may not claim the outbox (42501)" 42501 \
  "$(as r_inbox "SELECT public.sqlstate_of(\$\$SELECT whizbang.claim_work('00000000-0000-4000-8000-0000000000b1', 'outbox')\$\$)")"
check_eq "inbox worker: may not complete outbox rows (42501)" 42501 \
  "$(as r_inbox "SELECT public.sqlstate_of(\$\$SELECT whizbang.complete_work('outbox', ARRAY[md5('o1')::uuid])\$\$)")"
q "SELECT count(*) FROM whizbang.store_outbox_messages(public.batch('o2', 5), p_partition_count => 64)" >/dev/null
as_check "inbox worker: a claim without p_source takes no outbox rows (it may not update them)" r_inbox \
  "SELECT count(*) = 0 FROM whizbang.claim_work('00000000-0000-4000-8000-0000000000b2', NULL, 1000, 30, NULL, 64)
    WHERE source = 'outbox'"
q "CREATE ROLE r_exec_only LOGIN; GRANT USAGE ON SCHEMA whizbang TO r_exec_only;
   GRANT EXECUTE ON FUNCTION whizbang.store_outbox_messages(jsonb, uuid, timestamptz, timestamptz, integer) TO r_exec_only" >/dev/null
check_eq "EXECUTE without the table grants: the store is refused (42501), as on one server" 42501 \
  "$(as r_exec_only "SELECT public.sqlstate_of(\$\$SELECT whizbang.store_outbox_messages(public.batch('o3', 1))\$\$)")"

# Idempotency and dedup.
as_check "idempotency: claims, completes and finds a key completed" r_idem \
  "SELECT whizbang.idempotency_complete('s', 'k1', (SELECT b.token FROM whizbang.idempotency_begin('s', 'k1') b),
                                        '{\"r\": 1}'::jsonb) IS NOT NULL
      AND (SELECT outcome FROM whizbang.idempotency_begin('s', 'k1')) = 'completed_duplicate'"
as_check "dedup: dedup_insert new, then duplicate" r_dedup \
  "SELECT whizbang.dedup_insert('00000000-0000-4000-8000-0000000000d1', 'g') = 'new'
      AND whizbang.dedup_insert('00000000-0000-4000-8000-0000000000d1', 'g') = 'duplicate'"

# Nobody but the extension's owner changes routing rows or calls _on_shard.
for r in r_inbox r_outbox r_relay r_idem r_dedup; do
  check_eq "$r: DELETE on wh_partitions is refused" 42501 \
    "$(as $r "SELECT public.sqlstate_of(\$\$DELETE FROM whizbang.wh_partitions WHERE partition_number = 7\$\$)")"
done
check_eq "r_inbox: UPDATE on wh_partitions is refused" 42501 \
  "$(as r_inbox "SELECT public.sqlstate_of(\$\$UPDATE whizbang.wh_partitions SET partition_number = 7 WHERE partition_number = 7\$\$)")"
check_eq "r_inbox: whizbang._on_shard (which chooses a node's lease token) is refused" 42501 \
  "$(as r_inbox "SELECT public.sqlstate_of(\$\$SELECT whizbang._on_shard(1, 1, 99999, true)\$\$)")"
check "check(): every item ok" "SELECT bool_and(ok) AND count(*) = 5 FROM whizbang.check()"
q "GRANT DELETE ON whizbang.wh_partitions TO r_inbox"
check "check(): a role with DELETE on wh_partitions is reported" \
  "SELECT NOT ok AND detail LIKE '%r_inbox on wh_partitions: DELETE%' FROM whizbang.check() WHERE item = 'routing privileges'"
q "REVOKE DELETE ON whizbang.wh_partitions FROM r_inbox"

# A routing row deleted by a superuser: its partition's calls fail, nothing is written.
q "DELETE FROM whizbang.wh_partitions WHERE partition_number = whizbang.partition_of(md5('gone1')::uuid, 64)"
check "check(): the missing routing row is reported" \
  "SELECT NOT ok AND detail LIKE '1 of the partitions%' FROM whizbang.check() WHERE item = 'routing rows'"
before=$(q "SELECT count(*) FROM whizbang.wh_inbox")
check_eq "a store that reaches the partition without a routing row fails with 55000" 55000 \
  "$(as r_inbox "SELECT public.sqlstate_of(\$\$SELECT whizbang.store_inbox_messages(public.batch('gone', 1) || public.batch('k', 20), p_partition_count => 64)\$\$)")"
check_eq "inbox_receive with it first fails with 55000 too" 55000 \
  "$(as r_inbox "SELECT public.sqlstate_of(\$\$SELECT whizbang.inbox_receive(public.batch('gone', 1) || public.batch('k', 20), 'g', now(), 64)\$\$)")"
check_eq "and nothing of those batches was written" "$before" "$(q "SELECT count(*) FROM whizbang.wh_inbox")"
# The routing row is only the node's way in: a batch whose part for that node starts elsewhere
# reaches the node and stores every message, that partition's too (never a silent drop).
as_check "a batch that reaches the node through another partition stores all 21" r_inbox \
  "SELECT count(*) = 21 FROM whizbang.inbox_receive(public.batch('k', 20) || public.batch('gone', 1), 'g', now(), 64) WHERE outcome = 'new'"
q "INSERT INTO whizbang.wh_partitions SELECT g FROM pg_catalog.generate_series(0, 9999) g ON CONFLICT DO NOTHING" >/dev/null
check "check(): every item ok once the row is back" "SELECT bool_and(ok) FROM whizbang.check()"
as_check "the same batch goes through once the row is back (all 21 on record)" r_inbox \
  "SELECT count(*) = 0 FROM whizbang.store_inbox_messages(public.batch('gone', 1) || public.batch('k', 20), p_partition_count => 64, p_consumer => 'g')"
# A node's anchor partition (its lowest): a claim without partitions reaches the node through it.
q "DELETE FROM whizbang.wh_partitions WHERE partition_number = 0"
check_eq "a claim that reaches a node through a missing routing row fails with 55000" 55000 \
  "$(as r_inbox "SELECT public.sqlstate_of(\$\$SELECT whizbang.claim_work('00000000-0000-4000-8000-0000000000a4', 'inbox')\$\$)")"
q "INSERT INTO whizbang.wh_partitions VALUES (0)" >/dev/null

echo "$FAILED failed"
[ "$FAILED" -eq 0 ]
