#!/usr/bin/env bash
# pg_dump of a distributed install and its restore into a fresh Citus cluster (issue 22,
# docs/scaleout.md "Backup: pg_dump and restore"), the procedure that section documents:
#   1. cluster A (a coordinator and 2 workers): whizbang distributed (8 shards), a role granted the
#      inbox, two settings and an idempotency policy changed, inbox messages (inbox_receive and
#      store_inbox_messages, one stream of another consumer), outbox messages, dedup records,
#      idempotency keys (completed and in progress), some work claimed (leases live), some completed,
#      one dead-lettered, one scheduled for a retry;
#   2. pg_dump -Fc of the coordinator's database, with nothing running (Citus reads the shards of
#      a distributed table through the coordinator; its metadata and the shards themselves are not
#      in the dump); cluster A is stopped;
#   3. cluster B (a fresh coordinator and 2 workers): the role created, pg_restore --exit-on-error
#      into the coordinator's database (whizbang's rows land in the coordinator's local tables),
#      whizbang.distribute(8), which also moves every node's dead-letter id sequence past the
#      restored ids;
#   4. B holds every row of A exactly once (each table compared row by row, stats() equal), check()
#      is ok, redeliveries are duplicates, the restored leases still hold (their tokens complete
#      and renew, they are claimable when they end), pending work is claimed exactly once,
#      completed work never, the stream goes on in order, idempotency keys answer as before, tokens
#      keep growing, new dead letters get new ids (this fails when distribute() leaves the sequences) and the
#      restored one is retried alone, the role still works, and no prepared transaction is left.
# Prints ok/FAIL lines; exits non-zero when a check failed. Skips (exit 0) without Citus.
set -euo pipefail
self=$(readlink -f "$0")
cd "$(dirname "$self")/../.."
source scripts/lib.sh          # wb_free_port, wb_ensure_citus
source test/lib/checks.sh      # check, check_eq, FAILED
source test/citus/cluster.sh   # citus_suite_start, citus_start, citus_stop, cq

export PGOPTIONS="-c statement_timeout=120s"   # no statement of the test hangs for ever
citus_suite_start
work=$(mktemp -d /tmp/whizbang-citus-dump.XXXXXX)   # the dump; outlives cluster A
trap 'citus_stop; rm -rf "$work"' EXIT              # whichever cluster runs (pg_ctl -t 60 per node)
q() { psql -X -q -A -t -v ON_ERROR_STOP=1 -c "$1"; }
W1='00000000-0000-4000-8000-0000000000a1'; W2='00000000-0000-4000-8000-0000000000a2'
W3='00000000-0000-4000-8000-0000000000a3'; W4='00000000-0000-4000-8000-0000000000a4'

# ---- 1. cluster A ---------------------------------------------------------------------------
q "CREATE EXTENSION whizbang" >/dev/null
q "CREATE ROLE app LOGIN" >/dev/null
q "SELECT count(*) FROM whizbang.grant_worker('app', ARRAY['inbox'])" >/dev/null
q "SELECT whizbang.distribute(8)" >/dev/null 2>&1
# Test helpers (dumped and restored with the rest, as any application object would be).
q "CREATE FUNCTION public.batch(p_tag text, p_n int, p_stream uuid DEFAULT NULL) RETURNS jsonb LANGUAGE sql AS \$\$
     SELECT jsonb_agg(jsonb_build_object('MessageId', md5(p_tag || g)::uuid, 'HandlerName', 'h', 'MessageType', 't',
                                         'Destination', 'd', 'Envelope', jsonb_build_object('n', g), 'StreamId', p_stream)
                      ORDER BY g)
       FROM generate_series(1, p_n) g \$\$;
   GRANT EXECUTE ON FUNCTION public.batch(text, int, uuid) TO app" >/dev/null
q "UPDATE whizbang.wh_settings SET setting_value = '45' WHERE setting_key = 'dedup_retention_days';
   INSERT INTO whizbang.wh_settings (setting_key, setting_value) VALUES ('max_attempts', '7')
   ON CONFLICT (setting_key) DO UPDATE SET setting_value = EXCLUDED.setting_value;
   -- the retry below stays scheduled through the dump, the restore and B's first claims, however
   -- slow the machine (30 s by default was not always enough)
   UPDATE whizbang.wh_settings SET setting_value = '3600' WHERE setting_key = 'retry_max_seconds';
   UPDATE whizbang.wh_settings SET setting_value = '900' WHERE setting_key = 'retry_base_seconds';
   INSERT INTO whizbang.wh_idempotency_policies (scope, in_progress_ttl, default_result_ttl, description)
   VALUES ('orders', '10 minutes', '2 days', 'orders: short claims')" >/dev/null

check "A: 30 inbox messages received, 10 more stored with store_inbox_messages (consumer shop)" \
  "SELECT (SELECT count(*) FROM whizbang.inbox_receive(public.batch('i', 30), 'shop', now(), 64) WHERE outcome = 'new') = 30
      AND (SELECT count(*) FROM whizbang.store_inbox_messages(public.batch('j', 10), p_partition_count => 64,
                                                              p_consumer => 'shop') WHERE was_newly_created) = 10"
check "A: a redelivery is a duplicate, a changed envelope a conflict (observed counts)" \
  "SELECT (SELECT count(*) FROM whizbang.inbox_receive(public.batch('i', 3), 'shop', now(), 64) WHERE outcome = 'duplicate') = 3
      AND (SELECT outcome FROM whizbang.inbox_receive(jsonb_build_array(jsonb_build_object('MessageId', md5('i1')::uuid,
             'HandlerName', 'h', 'MessageType', 't', 'Envelope', '{\"changed\": true}'::jsonb)), 'shop', now(), 64)) = 'conflict'"
check "A: one stream of 5 messages (consumer orders)" \
  "SELECT count(*) = 5 FROM whizbang.inbox_receive(public.batch('s', 5, md5('stream')::uuid), 'orders', now(), 64)
    WHERE outcome = 'new'"
check "A: 12 outbox messages stored" \
  "SELECT count(*) = 12 FROM whizbang.store_outbox_messages(public.batch('o', 12), p_partition_count => 64)
    WHERE was_newly_created"
check "A: 5 dedup records (consumer audit)" \
  "SELECT count(*) = 5 FROM (SELECT whizbang.dedup_insert(md5('d' || g)::uuid, 'audit') AS o FROM generate_series(1, 5) g) s
    WHERE o = 'new'"
k1=$(q "SELECT token FROM whizbang.idempotency_begin('orders', 'k1', '\x01', p_owner => 'w1') WHERE outcome = 'claimed'")
k2=$(q "SELECT token FROM whizbang.idempotency_begin('payments', 'k2', '\x02', p_owner => 'w1') WHERE outcome = 'claimed'")
check "A: idempotency key k1 completed, k2 left in progress" \
  "SELECT whizbang.idempotency_complete('orders', 'k1', ${k1:-0}, '{\"order\": 1}') = 'completed' AND ${k2:-0} > ${k1:-0}"
# Claims: shop's 12 (600 s leases), 6 completed, 1 dead-lettered, 1 scheduled for a retry, 4 left
# leased; the outbox's 6, 3 published, 3 left leased. Kept in a table of the application.
q "CREATE TABLE public.claimed AS
     SELECT * FROM whizbang.claim_work('$W1', 'inbox', 12, 600, NULL, 64, 100, now(), 'shop')
     UNION ALL SELECT * FROM whizbang.claim_work('$W2', 'outbox', 6, 600, NULL, 64)" >/dev/null
q "ALTER TABLE public.claimed ADD COLUMN fate text;
   UPDATE public.claimed c SET fate = CASE WHEN r.n <= 6 THEN 'completed' WHEN r.n = 7 THEN 'dead' WHEN r.n = 8 THEN 'retry'
                                           ELSE 'leased' END
     FROM (SELECT message_id, row_number() OVER (ORDER BY message_id) n FROM public.claimed WHERE source = 'inbox') r
    WHERE c.message_id = r.message_id;
   UPDATE public.claimed c SET fate = CASE WHEN r.n <= 3 THEN 'completed' ELSE 'leased' END
     FROM (SELECT message_id, row_number() OVER (ORDER BY message_id) n FROM public.claimed WHERE source = 'outbox') r
    WHERE c.message_id = r.message_id" >/dev/null
check "A: claimed 12 inbox and 6 outbox messages" \
  "SELECT count(*) FILTER (WHERE source = 'inbox') = 12 AND count(*) FILTER (WHERE source = 'outbox') = 6 FROM public.claimed"
check "A: 6 completed, 1 dead-lettered, 1 retry scheduled; 3 outbox messages published" \
  "SELECT (SELECT count(*) FROM whizbang.complete_work('inbox', ARRAY(SELECT message_id FROM public.claimed WHERE fate = 'completed' AND source = 'inbox' ORDER BY message_id),
                                                       ARRAY(SELECT lease_token FROM public.claimed WHERE fate = 'completed' AND source = 'inbox' ORDER BY message_id), 'shop')
            WHERE outcome = 'completed') = 6
      AND (SELECT outcome FROM whizbang.fail_work('inbox', ARRAY(SELECT message_id FROM public.claimed WHERE fate = 'dead'), ARRAY['poison'],
                                                  ARRAY(SELECT lease_token FROM public.claimed WHERE fate = 'dead'), ARRAY[false], 'shop')) = 'dead_lettered'
      AND (SELECT outcome FROM whizbang.fail_work('inbox', ARRAY(SELECT message_id FROM public.claimed WHERE fate = 'retry'), ARRAY['later'],
                                                  ARRAY(SELECT lease_token FROM public.claimed WHERE fate = 'retry'), ARRAY[true], 'shop')) = 'retry_scheduled'
      AND whizbang.complete_outbox_published(ARRAY(SELECT message_id FROM public.claimed WHERE fate = 'completed' AND source = 'outbox')) = 3"

# Every row of whizbang's tables, as text, sorted: compared between A and B.
state() {
  local t
  for t in wh_inbox wh_inbox wh_inbox_streams wh_inbox_preleased wh_outbox wh_outbox wh_outbox_streams \
           wh_outbox_preleased wh_message_deduplication wh_dead_letters wh_idempotency_keys wh_idempotency_policies; do
    echo "== $t"
    q "SELECT t::text FROM whizbang.$t t ORDER BY 1"
  done
  echo "== settings"; q "SELECT s::text FROM whizbang.settings s ORDER BY 1"
}
stats() { q "SELECT metric || '=' || coalesce(value::text, 'NULL') FROM whizbang.stats()
              WHERE metric NOT LIKE '%oldest_pending_seconds' AND metric NOT LIKE 'lease_store%' AND metric NOT LIKE 'claim_w%'
              ORDER BY metric"; }
state >"$work/a.state"
stats >"$work/a.stats"
check_eq "A: stats() counts 4 inbox and 3 outbox messages leased, 1 dead letter, 1 key in progress and 1 completed" \
  "idempotency_completed=1 idempotency_in_progress=1 inbox_dead_lettered=1 inbox_leased=4 outbox_leased=3" \
  "$(grep -E '^(inbox_leased|outbox_leased|inbox_dead_lettered|idempotency_in_progress|idempotency_completed)=' "$work/a.stats" |
     sort | tr '\n' ' ' | sed 's/ $//')"
# The shard count to distribute with again (citus_tables does not list an extension's tables).
shards=$(q "SELECT count(*) FROM pg_dist_shard WHERE logicalrelid = 'whizbang.wh_inbox'::regclass")
max_lease=$(q "SELECT max(lease_token) FROM public.claimed")
max_key=$(q "SELECT max(token) FROM whizbang.wh_idempotency_keys")
dead_id=$(q "SELECT dead_letter_id FROM whizbang.wh_dead_letters")
check "A: no prepared transaction left on any node" \
  "SELECT (SELECT count(*) FROM pg_prepared_xacts) = 0
      AND (SELECT bool_and(result::int = 0) FROM run_command_on_workers('SELECT count(*) FROM pg_prepared_xacts'))"

# ---- 2. the dump ----------------------------------------------------------------------------
if "$CITUS_BIN/pg_dump" -Fc -f "$work/a.dump" 2>"$work/dump.err"; then
  check_eq "pg_dump of the coordinator's database ran without a message" "" "$(cat "$work/dump.err")"
else
  check_eq "pg_dump of the coordinator's database" ok "failed: $(cat "$work/dump.err")"
fi
"$CITUS_BIN/pg_restore" -f "$work/a.sql" "$work/a.dump"
copied() { awk -v t="COPY whizbang.$1 " 'index($0, t) == 1 {on=1; next} on && /^\\\.$/ {on=0} on' "$work/a.sql" | wc -l; }
check_eq "the dump holds A's rows through the coordinator: 38 inbox messages, 9 outbox messages, 50 dedup records, 2 keys" \
  "38 9 50 2" "$(copied wh_inbox) $(copied wh_outbox) $(copied wh_message_deduplication) $(copied wh_idempotency_keys)"
check_eq "the dump holds the 4 changed settings and the policy" "4 1" "$(copied wh_settings) $(copied wh_idempotency_policies)"
check_eq "the dump holds no Citus metadata, no shard and no routing row" "0 0 0" \
  "$(grep -c 'pg_dist_' "$work/a.sql" || true) $(grep -cE 'whizbang\.wh_[a-z_]+_10[0-9]{4}' "$work/a.sql" || true) $(copied wh_partitions)"
citus_stop   # cluster A is gone: B must not need it

# ---- 3. cluster B: restore, distribute -------------------------------------
citus_start "${WB_CITUS_PRELOAD:-}"
q "CREATE ROLE app LOGIN" >/dev/null   # roles are not in a database's dump (pg_dumpall --roles-only)
if "$CITUS_BIN/pg_restore" --exit-on-error -d "$PGDATABASE" "$work/a.dump" 2>"$work/restore.err"; then
  check_eq "pg_restore --exit-on-error into B's coordinator ran without a message" "" "$(cat "$work/restore.err")"
else
  check_eq "pg_restore into B's coordinator" ok "failed: $(cat "$work/restore.err")"
fi
check "B, restored: whizbang's tables are local tables on the coordinator, the workers' hold nothing" \
  "SELECT NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid::text LIKE 'whizbang.%')
      AND (SELECT count(*) FROM whizbang.wh_inbox) = 38
      AND (SELECT bool_and(result = '0') FROM run_command_on_workers('SELECT count(*) FROM whizbang.wh_inbox'))"
check "B, restored: check() calls it a single server until distribute()" \
  "SELECT detail = 'a single server' FROM whizbang.check() WHERE item = 'distributed'"
q "SELECT whizbang.distribute($shards)" >/dev/null 2>"$work/distribute.err" || { cat "$work/distribute.err"; }
check "B: distribute($shards) made the work tables distributed tables of $shards shards on both workers" \
  "SELECT (SELECT count(*) FROM pg_dist_shard WHERE logicalrelid = 'whizbang.wh_inbox'::regclass) = $shards
      AND (SELECT count(DISTINCT p.nodeport) FROM pg_dist_shard s JOIN pg_dist_shard_placement p USING (shardid)
            WHERE s.logicalrelid = 'whizbang.wh_inbox'::regclass) = 2"
# A node makes dead-letter ids from its group id and its own sequence, which the dump does not
# hold (it is the node's, not the coordinator's): a fresh node starts at 1 again, and distribute()
# (0.11.0) moves every node's sequence past the restored ids (their low 48 bits).
check "B: distribute() moved every node's dead-letter id sequence past the restored ids" \
  "SELECT count(*) = 2 AND bool_and(result::bigint > ($dead_id & 281474976710655))
     FROM run_command_on_workers('SELECT CASE WHEN is_called THEN last_value + 1 ELSE last_value END
                                    FROM whizbang.wh_dead_letters_dead_letter_id_seq')"

# ---- 4. B against A -------------------------------------------------------------------------
state >"$work/b.state"
stats >"$work/b.stats"
if diff -u "$work/a.state" "$work/b.state" >"$work/state.diff"; then
  check_eq "B holds every row of A exactly once (12 tables and the settings, row by row)" same same
else
  check_eq "B holds every row of A exactly once" same "differs: $(head -40 "$work/state.diff")"
fi
if diff -u "$work/a.stats" "$work/b.stats" >"$work/stats.diff"; then
  check_eq "stats() in B equals A's (every count)" same same
else
  check_eq "stats() in B equals A's" same "differs: $(cat "$work/stats.diff")"
fi
check "B: every message id once (inbox 38, outbox 9), every dedup record once (50)" \
  "SELECT (SELECT count(*) = 38 AND count(DISTINCT (consumer, message_id)) = 38 FROM whizbang.wh_inbox)
      AND (SELECT count(*) = 9 AND count(DISTINCT message_id) = 9 FROM whizbang.wh_outbox)
      AND (SELECT count(*) = 50 AND count(DISTINCT (consumer, message_id)) = 50 FROM whizbang.wh_message_deduplication)"
check "B: check() items all ok, and it sees a distributed install" \
  "SELECT bool_and(ok) AND count(*) = 5 AND bool_or(detail LIKE '%are Citus tables%') FROM whizbang.check()"
check "B: distribute() emptied the coordinator's own copies of the restored tables" \
  "SELECT bool_and(pg_relation_size(c.oid) = 0) FROM pg_class c WHERE c.relnamespace = 'whizbang'::regnamespace AND c.relkind = 'r'"
check "B: the settings and the policy are in effect, on every node" \
  "SELECT (SELECT value FROM whizbang.settings WHERE setting_key = 'dedup_retention_days') = '45'
      AND (SELECT value FROM whizbang.settings WHERE setting_key = 'max_attempts') = '7'
      AND (SELECT in_progress_ttl = '10 minutes' FROM whizbang.idempotency_policy('orders'))
      AND (SELECT bool_and(result = '45') FROM run_command_on_workers(
             \$\$SELECT setting_value FROM whizbang.wh_settings WHERE setting_key = 'dedup_retention_days'\$\$))"
got=$(psql -X -q -A -t -c "UPDATE whizbang.wh_settings SET setting_value = '0' WHERE setting_key = 'dedup_retention_days'" 2>&1 || true)
check_eq "B: the settings trigger still refuses a bad value" refused "$(grep -q 'outside' <<<"$got" && echo refused || echo "$got")"

# Redeliveries.
check "B: every stored inbox message is a duplicate on redelivery (40 shop, completed and dead-lettered too; 5 orders)" \
  "SELECT (SELECT count(*) FROM whizbang.inbox_receive(public.batch('i', 30) || public.batch('j', 10), 'shop', now(), 64)
            WHERE outcome = 'duplicate') = 40
      AND (SELECT count(*) FROM whizbang.inbox_receive(public.batch('s', 5, md5('stream')::uuid), 'orders', now(), 64)
            WHERE outcome = 'duplicate') = 5"
check "B: store_inbox_messages of the same 40 stores none; the fingerprint still tells a conflict" \
  "SELECT (SELECT count(*) FROM whizbang.store_inbox_messages(public.batch('i', 30) || public.batch('j', 10),
                                                              p_partition_count => 64, p_consumer => 'shop')) = 0
      AND (SELECT outcome FROM whizbang.inbox_receive(jsonb_build_array(jsonb_build_object('MessageId', md5('i2')::uuid,
             'HandlerName', 'h', 'MessageType', 't', 'Envelope', '{\"changed\": true}'::jsonb)), 'shop', now(), 64)) = 'conflict'"
check "B: the 9 outbox messages on record are not stored twice" \
  "SELECT count(*) = 0 FROM whizbang.store_outbox_messages(
     (SELECT jsonb_agg(e) FROM jsonb_array_elements(public.batch('o', 12)) e
       WHERE (e->>'MessageId')::uuid NOT IN (SELECT message_id FROM public.claimed WHERE fate = 'completed' AND source = 'outbox')),
     p_partition_count => 64) WHERE was_newly_created"
check "B: the 5 dedup records answer duplicate" \
  "SELECT count(*) = 5 FROM (SELECT whizbang.dedup_insert(md5('d' || g)::uuid, 'audit') AS o FROM generate_series(1, 5) g) s
    WHERE o = 'duplicate'"

# Leases and claims.
check "B: a restored lease's token still completes its message (2 of the 4); a completed message's is not_found" \
  "SELECT (SELECT count(*) FROM whizbang.complete_work('inbox',
             ARRAY(SELECT message_id FROM public.claimed WHERE fate = 'leased' AND source = 'inbox' ORDER BY message_id LIMIT 2),
             ARRAY(SELECT lease_token FROM public.claimed WHERE fate = 'leased' AND source = 'inbox' ORDER BY message_id LIMIT 2), 'shop')
            WHERE outcome = 'completed') = 2
      AND (SELECT outcome FROM whizbang.complete_work('inbox',
             ARRAY(SELECT message_id FROM public.claimed WHERE fate = 'completed' AND source = 'inbox' ORDER BY message_id LIMIT 1),
             ARRAY(SELECT lease_token FROM public.claimed WHERE fate = 'completed' AND source = 'inbox' ORDER BY message_id LIMIT 1), 'shop')) = 'not_found'"
check "B: a restored lease's token still renews its lease (the 3rd of the 4)" \
  "SELECT outcome = 'renewed' FROM whizbang.renew_leases('inbox',
     ARRAY(SELECT message_id FROM public.claimed WHERE fate = 'leased' AND source = 'inbox' ORDER BY message_id OFFSET 2 LIMIT 1),
     ARRAY(SELECT lease_token FROM public.claimed WHERE fate = 'leased' AND source = 'inbox' ORDER BY message_id OFFSET 2 LIMIT 1),
     300, 'shop')"
check "B: the 28 never-claimed shop messages are claimed exactly once, with tokens above every restored one" \
  "CREATE TEMP TABLE c1 AS SELECT * FROM whizbang.claim_work('$W3', 'inbox', 1000, 300, NULL, 64, 100, now(), 'shop');
   CREATE TEMP TABLE c2 AS SELECT * FROM whizbang.claim_work('$W4', 'inbox', 1000, 300, NULL, 64, 100, now(), 'shop');
   SELECT (SELECT count(*) FROM c1) = 28 AND (SELECT count(DISTINCT message_id) FROM c1) = 28
      AND (SELECT count(*) FROM c2) = 0
      AND NOT EXISTS (SELECT 1 FROM c1 JOIN public.claimed USING (message_id))
      AND (SELECT min(lease_token) FROM c1) > $max_lease
      AND (SELECT count(*) FROM whizbang.complete_work('inbox', ARRAY(SELECT message_id FROM c1), ARRAY(SELECT lease_token FROM c1), 'shop')
            WHERE outcome = 'completed') = 28"
check "B: when the leases have ended, the 2 other restored leases and the retry are claimed once, nothing completed is" \
  "CREATE TEMP TABLE c3 AS SELECT * FROM whizbang.claim_work('$W3', 'inbox', 1000, 300, NULL, 64, 100, now() + interval '1 hour', 'shop');
   SELECT (SELECT count(*) FROM c3) = 3
      AND (SELECT array_agg(message_id ORDER BY message_id) FROM c3)
        = (SELECT array_agg(message_id ORDER BY message_id) FROM (SELECT message_id FROM public.claimed WHERE fate = 'retry'
             UNION ALL (SELECT message_id FROM public.claimed WHERE fate = 'leased' AND source = 'inbox' ORDER BY message_id OFFSET 2)) s)
      AND (SELECT count(*) FROM whizbang.complete_work('inbox', ARRAY(SELECT message_id FROM c3), ARRAY(SELECT lease_token FROM c3),
                                                        'shop', now() + interval '1 hour') WHERE outcome = 'completed') = 3"
check "B: nothing of shop is claimable any more (the dead letter is not)" \
  "SELECT count(*) = 0 FROM whizbang.claim_work('$W4', 'inbox', 1000, 300, NULL, 64, 100, now() + interval '2 hours', 'shop')"
check "B: the stream goes on: its 5 messages handed out in order, numbered 1 to 5" \
  "CREATE TEMP TABLE c4 AS SELECT * FROM whizbang.claim_work('$W3', 'inbox', 1000, 300, NULL, 64, 100, now(), 'orders')
                           WITH ORDINALITY;
   SELECT array_agg(c4.envelope->>'n' ORDER BY c4.ordinality) = '{1,2,3,4,5}' AND bool_and(w.stream_seq = (c4.envelope->>'n')::int)
     FROM c4 JOIN whizbang.wh_inbox w USING (consumer, message_id)"
check "B: a new message of the stream is new" \
  "SELECT count(*) = 1 FROM whizbang.inbox_receive(public.batch('s', 6, md5('stream')::uuid), 'orders', now(), 64)
    WHERE outcome = 'new'"
check "B: ... and numbered 6, after the restored counter" \
  "SELECT stream_seq = 6 FROM whizbang.wh_inbox WHERE consumer = 'orders' AND message_id = md5('s6')::uuid"
check "B: the outbox's 6 pending are claimed exactly once (none of the leased 3), and published" \
  "CREATE TEMP TABLE c5 AS SELECT * FROM whizbang.claim_work('$W3', 'outbox', 1000, 300, NULL, 64);
   CREATE TEMP TABLE c5b AS SELECT * FROM whizbang.claim_work('$W4', 'outbox', 1000, 300, NULL, 64);
   SELECT (SELECT count(*) FROM c5) = 6 AND (SELECT count(*) FROM c5b) = 0
      AND NOT EXISTS (SELECT 1 FROM c5 JOIN public.claimed USING (message_id))
      AND whizbang.complete_outbox_published(ARRAY(SELECT message_id FROM c5)) = 6"
check "B: the outbox's 3 restored leases are claimed when they end, and published" \
  "CREATE TEMP TABLE c6 AS SELECT * FROM whizbang.claim_work('$W4', 'outbox', 1000, 300, NULL, 64, 100, now() + interval '1 hour');
   SELECT (SELECT array_agg(message_id ORDER BY message_id) FROM c6)
        = (SELECT array_agg(message_id ORDER BY message_id) FROM public.claimed WHERE fate = 'leased' AND source = 'outbox')
      AND whizbang.complete_outbox_published(ARRAY(SELECT message_id FROM c6)) = 3"
check "B: the outbox is empty, nothing is claimable from it" \
  "SELECT (SELECT count(*) FROM whizbang.wh_outbox) = 0
      AND (SELECT count(*) FROM whizbang.claim_work('$W4', 'outbox', 1000, 300, NULL, 64, 100, now() + interval '2 hours')) = 0"

# Dead letters: 20 new ones on both nodes while the restored one is still there, then its retry.
q "SELECT count(*) FROM whizbang.inbox_receive(public.batch('dl', 20), 'poison', now(), 64)" >/dev/null
check "B: 20 new messages are dead-lettered (on both nodes)" \
  "CREATE TEMP TABLE c7 AS SELECT * FROM whizbang.claim_work('$W3', 'inbox', 100, 300, NULL, 64, 100, now(), 'poison');
   SELECT (SELECT count(*) FROM whizbang.fail_work('inbox', ARRAY(SELECT message_id FROM c7), ARRAY(SELECT 'x' FROM c7),
             ARRAY(SELECT lease_token FROM c7), ARRAY(SELECT false FROM c7), 'poison') WHERE outcome = 'dead_lettered') = 20"
check "B: the 21 dead letters have 21 ids, from both nodes" \
  "SELECT count(*) = 21 AND count(DISTINCT dead_letter_id) = 21 AND count(DISTINCT dead_letter_id >> 48) = 2
     FROM whizbang.wh_dead_letters"
check "B: retrying the restored dead letter retries it alone" "SELECT whizbang.retry_dead_letters(ARRAY[$dead_id]::bigint[]) = 1"
check "B: the retried dead letter is claimed again" \
  "SELECT array_agg(message_id) = ARRAY(SELECT message_id FROM public.claimed WHERE fate = 'dead')
     FROM whizbang.claim_work('$W3', 'inbox', 10, 300, NULL, 64, 100, now(), 'shop')"

# Idempotency keys.
check "B: k1 answers completed_duplicate with its result, and conflict for another fingerprint" \
  "SELECT (SELECT outcome = 'completed_duplicate' AND result = '{\"order\": 1}' FROM whizbang.idempotency_begin('orders', 'k1', '\x01'))
      AND (SELECT outcome FROM whizbang.idempotency_begin('orders', 'k1', '\x09')) = 'conflict'"
check "B: k2 is still in progress" \
  "SELECT outcome = 'in_progress_duplicate' FROM whizbang.idempotency_begin('payments', 'k2', '\x02', p_owner => 'w2')"
check "B: ... and its holder's token from A completes it" \
  "SELECT whizbang.idempotency_complete('payments', 'k2', ${k2:-0}) = 'completed'"
check "B: a new key's token is above every restored token" \
  "SELECT outcome = 'claimed' AND token > $max_key FROM whizbang.idempotency_begin('orders', 'k3')"

# The application's role, and what is left behind.
check "B: the role created before the restore exists on every worker (Citus created it there)" \
  "SELECT count(*) = 2 AND bool_and(result = '1') FROM run_command_on_workers(\$\$SELECT count(*) FROM pg_roles WHERE rolname = 'app'\$\$)"
check "B: the role granted in A stores through the coordinator" \
  "SET ROLE app; SELECT count(*) = 10 FROM whizbang.inbox_receive(public.batch('app', 10), 'app', now(), 64) WHERE outcome = 'new'"
check "B: ... and claims" \
  "SET ROLE app; SELECT count(*) = 10 FROM whizbang.claim_work('$W3', 'inbox', 100, 300, NULL, 64, 100, now(), 'app')"
check "B: maintenance runs without an error on the restored cluster (every task ok)" \
  "SELECT bool_and(status = 'ok') AND count(*) = 4 FROM whizbang.perform_maintenance()"
check "B: no prepared transaction left on any node" \
  "SELECT (SELECT count(*) FROM pg_prepared_xacts) = 0
      AND (SELECT bool_and(result::int = 0) FROM run_command_on_workers('SELECT count(*) FROM pg_prepared_xacts'))"

echo "$FAILED failed"
[ "$FAILED" -eq 0 ]
