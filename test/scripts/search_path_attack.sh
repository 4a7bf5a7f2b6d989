#!/usr/bin/env bash
# The search_path attack (DESIGN §4, docs/security.md "search_path"). In a cluster with the
# maintenance worker preloaded for database postgres, a non-superuser, mallory, owns that database
# and so its schema public. She plants shadows of what whizbang's SQL uses there — the operators
# = <> < <= > >= + - || of every type whizbang compares, aggregates (count(*), sum, min, max),
# functions (now, unnest, nextval, int4larger, ...) and domains named like the types in casts
# (text, uuid, int8, ...) — each of which notes that it ran (a sequence, which a rollback does
# not undo, a log table and a WARNING), and she puts public first on the database's search_path.
# Then a superuser, with public first on its own search_path as well, calls every entry point of
# whizbang with realistic arguments, and the worker purges a few rounds. Nothing planted may run
# and no call may fail.
#   pass 1: as installed (every function has SET search_path = pg_catalog, pg_temp);
#   pass 2: the C functions' SET clauses removed, so the SQL's own qualification is tested alone;
#   worker: two rounds of purging (every task has rows to look at), without a restart.
# The whole attack runs in a cluster of each lease store (issue 11, DESIGN §3.8): one with
# shared_preload_libraries = whizbang (shared-memory leases, and the maintenance worker), and a
# plain one (leases in the work rows; no worker, so no worker rounds there).
#   ATTACK_LEASE_STORES="shared_memory" (or "table"; else WB_LEASE_STORES) one cluster only
# Expects whizbang to be installed already (./scripts/test does that). Exits non-zero on failure.
set -euo pipefail

self=$(readlink -f "$0")
cd "$(dirname "$self")/../.."
source scripts/lib.sh      # wb_free_port
source test/lib/checks.sh  # check, check_eq, FAILED

if [ "${1:-}" != --inside ]; then
  status=0
  for store in ${ATTACK_LEASE_STORES:-${WB_LEASE_STORES:-shared_memory table}}; do
    opts=(-o fsync=off)
    [ "$store" = table ] || opts+=(-o "shared_preload_libraries=whizbang" -o "whizbang.maintenance_databases=postgres"
                                   -o "whizbang.maintenance_naptime=1" -o "whizbang.maintenance_batch_delay=0")
    echo "=== the attack in a cluster of the $store lease store (${opts[*]})"
    pg_virtualenv -t -c "-p $(wb_free_port)" "${opts[@]}" bash "$self" --inside "$store" || status=1
  done
  [ $status -eq 0 ] && echo "all checks passed"
  exit $status
fi
store=$2

work=$(mktemp -d /tmp/whizbang-search-path.XXXXXX)
trap 'rm -rf "$work"' EXIT
# The checks' own sessions (check, clean) see pg_catalog only, so no planted object answers them.
export PGOPTIONS="-c search_path=pg_catalog"
clean() { psql -X -q -A -t -v ON_ERROR_STOP=1 "$@"; }

# --- the superuser installs whizbang; mallory gets the database ----------------------------------
clean <<SQL
CREATE EXTENSION whizbang;
CREATE ROLE mallory LOGIN PASSWORD '$PGPASSWORD';
ALTER DATABASE postgres OWNER TO mallory;  -- public belongs to pg_database_owner: now mallory
SQL
check_eq "the cluster runs the $store lease store" "$store" "$(clean -c "SELECT whizbang.lease_store()")"

# --- mallory plants ----------------------------------------------------------------------------
PGUSER=mallory clean <<'SQL'
SET search_path = pg_catalog;
CREATE TABLE public.planted_log (what text, who text, backend text, at timestamptz DEFAULT clock_timestamp());
CREATE SEQUENCE public.planted_calls;
CREATE FUNCTION public.planted_note(p_what text) RETURNS boolean LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN
    PERFORM nextval('public.planted_calls');
    INSERT INTO public.planted_log (what, who, backend)
    SELECT p_what, current_user, a.backend_type FROM pg_stat_activity a WHERE a.pid = pg_backend_pid();
    RAISE WARNING 'search_path attack: planted % ran as %', p_what, current_user;
    RETURN true;
END $$;

-- Operators: a shadow of each pg_catalog operator between the types whizbang compares,
-- computing the right answer (so a call that runs it does not fail, and only the note tells).
DO $do$
DECLARE
    o record;
    n integer := 0;
BEGIN
    FOR o IN
        SELECT op.oprname, op.oprleft::regtype AS l, op.oprright::regtype AS r, op.oprresult::regtype AS res,
               p.proname AS code
          FROM pg_operator op JOIN pg_proc p ON p.oid = op.oprcode
         WHERE op.oprnamespace = 'pg_catalog'::regnamespace
           AND op.oprname IN ('=', '<>', '<', '<=', '>', '>=', '+', '-', '||')
           AND op.oprleft IN ('uuid'::regtype, 'text'::regtype, 'name'::regtype, 'oid'::regtype, 'int2'::regtype,
                              'int4'::regtype, 'int8'::regtype, 'tid'::regtype, 'xid'::regtype,
                              'timestamptz'::regtype, 'timestamp'::regtype, 'interval'::regtype, 'bytea'::regtype,
                              'jsonb'::regtype, 'bool'::regtype, 'float8'::regtype, 'numeric'::regtype,
                              '"char"'::regtype)
           AND op.oprright IN ('uuid'::regtype, 'text'::regtype, 'name'::regtype, 'oid'::regtype, 'int2'::regtype,
                               'int4'::regtype, 'int8'::regtype, 'tid'::regtype, 'xid'::regtype,
                               'timestamptz'::regtype, 'timestamp'::regtype, 'interval'::regtype, 'bytea'::regtype,
                               'jsonb'::regtype, 'bool'::regtype, 'float8'::regtype, 'numeric'::regtype,
                               '"char"'::regtype, 'text[]'::regtype)
    LOOP
        n := n + 1;
        EXECUTE format('CREATE FUNCTION public.planted_op_%s(%s, %s) RETURNS %s LANGUAGE plpgsql'
                       ' SET search_path = pg_catalog AS $f$BEGIN PERFORM public.planted_note(%L);'
                       ' RETURN pg_catalog.%I($1, $2); END$f$',
                       n, o.l, o.r, o.res, format('operator %s(%s, %s)', o.oprname, o.l, o.r), o.code);
        EXECUTE format('CREATE OPERATOR public.%s (LEFTARG = %s, RIGHTARG = %s, FUNCTION = public.planted_op_%s)',
                       o.oprname, o.l, o.r, n);
    END LOOP;
    RAISE NOTICE 'planted % operators', n;
END
$do$;

-- Functions whizbang calls (qualified), and ones a careless statement would call bare.
DO $do$
DECLARE
    f regprocedure;
    args text;
BEGIN
    FOREACH f IN ARRAY ARRAY['now()', 'clock_timestamp()', 'nextval(regclass)', 'floor(float8)', 'floor(numeric)',
                             'date_part(text, timestamptz)', 'current_setting(text)', 'pg_relation_size(regclass)',
                             'pg_try_advisory_xact_lock(int4, int4)', 'int4larger(int4, int4)', 'lower(text)',
                             'btrim(text)', 'gen_random_uuid()', 'pg_backend_pid()', 'length(text)',
                             'octet_length(bytea)', 'jsonb_typeof(jsonb)', 'txid_current()',
                             'statement_timestamp()', 'transaction_timestamp()']::regprocedure[]
    LOOP
        SELECT string_agg(format('$%s', i), ', ') INTO args
          FROM generate_series(1, (SELECT pronargs FROM pg_proc WHERE oid = f)) i;
        EXECUTE format('CREATE FUNCTION public.%I(%s) RETURNS %s LANGUAGE plpgsql VOLATILE'
                       ' SET search_path = pg_catalog AS $f$BEGIN PERFORM public.planted_note(%L);'
                       ' RETURN pg_catalog.%I(%s); END$f$',
                       (SELECT proname FROM pg_proc WHERE oid = f), pg_get_function_identity_arguments(f),
                       pg_get_function_result(f), 'function ' || f::text,
                       (SELECT proname FROM pg_proc WHERE oid = f), coalesce(args, ''));
    END LOOP;
END
$do$;
CREATE FUNCTION public.unnest(anyarray) RETURNS SETOF anyelement LANGUAGE plpgsql SET search_path = pg_catalog
    AS $$BEGIN PERFORM public.planted_note('function unnest(anyarray)'); RETURN QUERY SELECT * FROM pg_catalog.unnest($1); END$$;
CREATE FUNCTION public.array_to_string(anyarray, text) RETURNS text LANGUAGE plpgsql SET search_path = pg_catalog
    AS $$BEGIN PERFORM public.planted_note('function array_to_string(anyarray, text)'); RETURN pg_catalog.array_to_string($1, $2); END$$;

-- Aggregates.
CREATE FUNCTION public.planted_count_step(bigint) RETURNS bigint LANGUAGE plpgsql SET search_path = pg_catalog
    AS $$BEGIN PERFORM public.planted_note('aggregate count(*)'); RETURN $1 + 1; END$$;
CREATE AGGREGATE public.count(*) (SFUNC = public.planted_count_step, STYPE = bigint, INITCOND = '0');
CREATE FUNCTION public.planted_count_any_step(bigint, anyelement) RETURNS bigint LANGUAGE plpgsql SET search_path = pg_catalog
    AS $$BEGIN PERFORM public.planted_note('aggregate count(anyelement)'); RETURN $1 + 1; END$$;
CREATE AGGREGATE public.count(anyelement) (SFUNC = public.planted_count_any_step, STYPE = bigint, INITCOND = '0');
DO $do$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['integer', 'bigint', 'numeric', 'double precision'] LOOP
        EXECUTE format('CREATE FUNCTION public.planted_sum_step(%1$s, %1$s) RETURNS %1$s LANGUAGE plpgsql'
                       ' SET search_path = pg_catalog AS $f$BEGIN PERFORM public.planted_note(%2$L);'
                       ' RETURN coalesce($1, 0) + coalesce($2, 0); END$f$', t, 'aggregate sum(' || t || ')');
        EXECUTE format('CREATE AGGREGATE public.sum(%1$s) (SFUNC = public.planted_sum_step, STYPE = %1$s)', t);
    END LOOP;
    FOREACH t IN ARRAY ARRAY['integer', 'bigint', 'timestamptz', 'text', 'interval'] LOOP
        EXECUTE format('CREATE FUNCTION public.planted_min_step(%1$s, %1$s) RETURNS %1$s LANGUAGE plpgsql'
                       ' SET search_path = pg_catalog AS $f$BEGIN PERFORM public.planted_note(%2$L);'
                       ' RETURN least($1, $2); END$f$', t, 'aggregate min(' || t || ')');
        EXECUTE format('CREATE AGGREGATE public.min(%1$s) (SFUNC = public.planted_min_step, STYPE = %1$s)', t);
        EXECUTE format('CREATE FUNCTION public.planted_max_step(%1$s, %1$s) RETURNS %1$s LANGUAGE plpgsql'
                       ' SET search_path = pg_catalog AS $f$BEGIN PERFORM public.planted_note(%2$L);'
                       ' RETURN greatest($1, $2); END$f$', t, 'aggregate max(' || t || ')');
        EXECUTE format('CREATE AGGREGATE public.max(%1$s) (SFUNC = public.planted_max_step, STYPE = %1$s)', t);
    END LOOP;
END
$do$;

-- Types named like the ones in casts (::text, ::uuid, ...): a value cast to one runs its CHECK.
DO $do$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['text', 'uuid', 'int4', 'int8', 'jsonb', 'bytea', 'timestamptz', 'interval',
                             'regclass', 'tid', 'name', 'oid'] LOOP
        EXECUTE format('CREATE DOMAIN public.%I AS pg_catalog.%I CHECK (public.planted_note(%L))',
                       t, t, 'type ' || t);
    END LOOP;
END
$do$;

-- Everyone connecting to her database looks in public first.
ALTER DATABASE postgres SET search_path = public, pg_catalog;
SQL

# The worker connected before that: it starts again (after its restart time, 10 s) and then gets
# the database's search_path at connection, as a worker after a server restart would.
worker_pid() { clean -c "SELECT coalesce(string_agg(pid::text, ','), '') FROM pg_stat_activity WHERE backend_type = 'whizbang maintenance'"; }
first_worker=$(worker_pid)
clean -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'whizbang maintenance'" >/dev/null
check_eq "a new session gets the database's search_path (public first)" "public, pg_catalog" \
  "$(PGOPTIONS="" psql -X -A -t -c "SHOW search_path")"

# An attacked session: the superuser, with the database's search_path (public first) and the same
# set again in the session. Its own statements are qualified, so only whizbang could run a plant.
attacked() { PGOPTIONS="" psql -X -q -A -t -v ON_ERROR_STOP=1 -c "SET search_path = public, pg_catalog" "$@"; }
planted() {  # how many times planted objects ran since the last reset, and what
  clean -c "SELECT (SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM public.planted_calls)
                   || coalesce(': ' || (SELECT string_agg(DISTINCT what || ' in ' || backend, '; ')
                                          FROM public.planted_log), '')"
}
reset_planted() { clean -c "SELECT setval('public.planted_calls', 1, false)" -c "TRUNCATE public.planted_log" >/dev/null; }

# The traps are armed: a bare count(*) and = in an attacked session run the plants.
attacked -c "SELECT count(*) FROM pg_catalog.pg_class WHERE oid = 1259" >/dev/null 2>&1
armed=$(clean -c "SELECT string_agg(DISTINCT what, ', ' ORDER BY what) FROM public.planted_log")
check_eq "the planted objects are armed (a bare count(*) and = run them)" \
  "aggregate count(*), operator =(oid, oid)" "$armed"
reset_planted

# Every entry point, with realistic arguments. $1: a hex digit that keeps the passes' ids apart.
calls() {
  local P=$1 A B C D E F G
  A="${P}9000000-0000-7000-8000-00000000000a" B="${P}9000000-0000-7000-8000-00000000000b"
  C="${P}9000000-0000-7000-8000-00000000000c" D="${P}9000000-0000-7000-8000-00000000000d"
  E="${P}9000000-0000-7000-8000-00000000000e" F="${P}9000000-0000-7000-8000-00000000000f"
  G="${P}9000000-0000-7000-8000-000000000010"
  local run_maintenance=""
  if [ "$(clean -c "SELECT to_regprocedure('whizbang.run_maintenance(timestamptz, integer)') IS NOT NULL")" = t ]; then
    run_maintenance="CALL whizbang.run_maintenance(p_batch_size => 3);"
  fi
  local grants=""
  if [ "$(clean -c "SELECT to_regprocedure('whizbang.check()') IS NOT NULL")" = t ]; then
    grants="SELECT * FROM whizbang.check();
SELECT * FROM whizbang._routing_policies();
CREATE ROLE sp_grantee_$P;
SELECT * FROM whizbang.grant_worker('sp_grantee_$P');
SELECT * FROM whizbang.grant_admin('sp_grantee_$P', ARRAY['monitor', 'settings']);"
  fi
  cat <<SQL
-- identity and fingerprints
SELECT whizbang.version();
SELECT whizbang.event_uuid('orders', 'order-$P');
SELECT whizbang.uuid_v7();
SELECT whizbang.uuid_v7('2026-01-01 00:00:00+00');
SELECT whizbang.partition_of('${P}1000000-0000-7000-8000-000000000001', 16);
SELECT whizbang.fingerprint('{"b": [1, 2.50, {"z": true}], "a": {"traceId": "x", "n": null}}', '{a.traceId,b.2.z}');
SELECT whizbang.fingerprint('{"a": 1}');
SELECT whizbang._bridge_selftest('ok');
SELECT whizbang.lease_store();
$grants

-- dedup: new, duplicate, conflict; a batch; an old delivery under replay_policy = reject
SELECT whizbang.dedup_insert('${P}2000000-0000-7000-8000-000000000001', 'c$P', '\x01');
SELECT whizbang.dedup_insert('${P}2000000-0000-7000-8000-000000000001', 'c$P', '\x01');
SELECT whizbang.dedup_insert('${P}2000000-0000-7000-8000-000000000001', 'c$P', '\x02');
SELECT * FROM whizbang.dedup_insert_many('{${P}2000000-0000-7000-8000-000000000001,${P}2000000-0000-7000-8000-000000000002,${P}2000000-0000-7000-8000-000000000003}',
    'c$P', '{"\\\\x01","\\\\x02",NULL}');
SELECT whizbang.dedup_insert('${P}2000000-0000-7000-8000-000000000009', 'c$P', NULL, '2000-01-01 00:00:00+00');
SELECT * FROM whizbang.dedup_insert_many('{${P}2000000-0000-7000-8000-00000000000a,${P}2000000-0000-7000-8000-00000000000b}',
    'c$P', NULL, '{"2000-01-01 00:00:00+00",NULL}');
SELECT * FROM whizbang.dedup_insert_many('{${P}2000000-0000-7000-8000-000000000011,${P}2000000-0000-7000-8000-000000000012}',
    'old$P', NULL, NULL, '2000-01-01 00:00:00+00');

-- settings (validation trigger, cache invalidation)
UPDATE whizbang.wh_settings SET setting_value = '2' WHERE setting_key OPERATOR(pg_catalog.=) 'max_attempts';
SELECT * FROM whizbang.settings;

-- inbox: plain, streamed, scheduled, with metadata; duplicates; pre-leased to instance A
SELECT * FROM whizbang.store_inbox_messages('[
  {"MessageId": "${P}3000000-0000-7000-8000-000000000001", "HandlerName": "h", "MessageType": "t", "Envelope": {"n": 1}},
  {"MessageId": "${P}3000000-0000-7000-8000-000000000002", "HandlerName": "h", "MessageType": "t", "Envelope": {},
   "StreamId": "${P}3100000-0000-7000-8000-000000000001"},
  {"MessageId": "${P}3000000-0000-7000-8000-000000000003", "HandlerName": "h", "MessageType": "t", "Envelope": {},
   "StreamId": "${P}3100000-0000-7000-8000-000000000001"},
  {"MessageId": "${P}3000000-0000-7000-8000-000000000004", "HandlerName": "h", "MessageType": "t", "Envelope": {},
   "Metadata": {"k": "v"}, "Scope": {"tenant": "t1"}, "IsEvent": true, "SentAt": "$(date -u +%Y-%m-%dT%H:%M:%SZ)",
   "ScheduledFor": "2000-01-01T00:00:00Z"}]', p_consumer => 'c$P');
SELECT * FROM whizbang.inbox_receive('[
  {"MessageId": "${P}3000000-0000-7000-8000-000000000001", "HandlerName": "h", "MessageType": "t", "Envelope": {"n": 1}},
  {"MessageId": "${P}3000000-0000-7000-8000-000000000005", "HandlerName": "h", "MessageType": "t", "Envelope": {},
   "StreamId": "${P}3100000-0000-7000-8000-000000000002"}]', 'c$P');
SELECT * FROM whizbang.store_inbox_messages('[
  {"MessageId": "${P}3000000-0000-7000-8000-000000000006", "HandlerName": "h", "MessageType": "t", "Envelope": {},
   "StreamId": "${P}3100000-0000-7000-8000-000000000003"},
  {"MessageId": "${P}3000000-0000-7000-8000-000000000007", "HandlerName": "h", "MessageType": "t", "Envelope": {}}]',
  p_instance_id => '$A', p_consumer => 'c$P');

-- claims: A gets its pre-leased rows handed back with the due ones; partitions; all sources
SELECT message_id, lease_token FROM whizbang.claim_work('$A', 'inbox', p_consumer => 'c$P');
SELECT lease_token AS t1 FROM whizbang.leases WHERE source OPERATOR(pg_catalog.=) 'inbox'
   AND consumer OPERATOR(pg_catalog.=) 'c$P'
   AND message_id OPERATOR(pg_catalog.=) '${P}3000000-0000-7000-8000-000000000001' \gset
SELECT lease_token AS t2 FROM whizbang.leases WHERE source OPERATOR(pg_catalog.=) 'inbox'
   AND consumer OPERATOR(pg_catalog.=) 'c$P'
   AND message_id OPERATOR(pg_catalog.=) '${P}3000000-0000-7000-8000-000000000002' \gset
SELECT lease_token AS t3 FROM whizbang.leases WHERE source OPERATOR(pg_catalog.=) 'inbox'
   AND consumer OPERATOR(pg_catalog.=) 'c$P'
   AND message_id OPERATOR(pg_catalog.=) '${P}3000000-0000-7000-8000-000000000003' \gset
SELECT lease_token AS t4 FROM whizbang.leases WHERE source OPERATOR(pg_catalog.=) 'inbox'
   AND consumer OPERATOR(pg_catalog.=) 'c$P'
   AND message_id OPERATOR(pg_catalog.=) '${P}3000000-0000-7000-8000-000000000004' \gset
SELECT lease_token AS t5 FROM whizbang.leases WHERE source OPERATOR(pg_catalog.=) 'inbox'
   AND consumer OPERATOR(pg_catalog.=) 'c$P'
   AND message_id OPERATOR(pg_catalog.=) '${P}3000000-0000-7000-8000-000000000005' \gset
SELECT lease_token AS t6 FROM whizbang.leases WHERE source OPERATOR(pg_catalog.=) 'inbox'
   AND consumer OPERATOR(pg_catalog.=) 'c$P'
   AND message_id OPERATOR(pg_catalog.=) '${P}3000000-0000-7000-8000-000000000006' \gset
SELECT * FROM whizbang.renew_leases('inbox', '{${P}3000000-0000-7000-8000-000000000001}', ARRAY[:t1]::pg_catalog.int8[], 60, 'c$P');
SELECT * FROM whizbang.complete_work('inbox', '{${P}3000000-0000-7000-8000-000000000001,${P}3000000-0000-7000-8000-000000000002}',
    ARRAY[:t1, :t2]::pg_catalog.int8[], 'c$P');
SELECT * FROM whizbang.fail_work('inbox', '{${P}3000000-0000-7000-8000-000000000004,${P}3000000-0000-7000-8000-000000000005}',
    '{"timeout","bad input"}', ARRAY[:t4, :t5]::pg_catalog.int8[], '{true,false}', 'c$P');
SELECT * FROM whizbang.release_work('inbox', '{${P}3000000-0000-7000-8000-000000000006}', ARRAY[:t6]::pg_catalog.int8[], 'c$P');
SELECT * FROM whizbang.complete_work('inbox', '{${P}3000000-0000-7000-8000-000000000007}', NULL, 'c$P');
SELECT whizbang.retry_dead_letters(ARRAY(SELECT d.dead_letter_id FROM whizbang.wh_dead_letters d
    WHERE d.consumer OPERATOR(pg_catalog.=) 'c$P'));
UPDATE whizbang.wh_settings SET setting_value = 'true' WHERE setting_key OPERATOR(pg_catalog.=) 'debug_mode';
SELECT message_id FROM whizbang.claim_work('$B', 'inbox', p_partitions => '{0,1,2,3}', p_partition_count => 4,
    p_max_per_stream => 1, p_consumer => 'c$P');
SELECT * FROM whizbang.complete_work('inbox', '{${P}3000000-0000-7000-8000-000000000003}', ARRAY[:t3]::pg_catalog.int8[], 'c$P');
UPDATE whizbang.wh_settings SET setting_value = 'false' WHERE setting_key OPERATOR(pg_catalog.=) 'debug_mode';

-- a lapsed stream taken over: F's run of two lapses, G takes the stream, F's tokens are lost
SELECT * FROM whizbang.store_inbox_messages('[
  {"MessageId": "${P}3000000-0000-7000-8000-000000000008", "HandlerName": "h", "MessageType": "t", "Envelope": {},
   "StreamId": "${P}3100000-0000-7000-8000-000000000004"},
  {"MessageId": "${P}3000000-0000-7000-8000-000000000009", "HandlerName": "h", "MessageType": "t", "Envelope": {},
   "StreamId": "${P}3100000-0000-7000-8000-000000000004"}]', p_consumer => 'r$P');
SELECT message_id FROM whizbang.claim_work('$F', 'inbox', p_lease_seconds => 1, p_consumer => 'r$P');
SELECT lease_token AS f9 FROM whizbang.leases WHERE source OPERATOR(pg_catalog.=) 'inbox'
   AND consumer OPERATOR(pg_catalog.=) 'r$P'
   AND message_id OPERATOR(pg_catalog.=) '${P}3000000-0000-7000-8000-000000000009' \gset
SELECT message_id FROM whizbang.claim_work('$G', 'inbox', p_consumer => 'r$P',
    p_now => pg_catalog.now() OPERATOR(pg_catalog.+) '10 seconds'::pg_catalog.interval);
SELECT * FROM whizbang.complete_work('inbox', '{${P}3000000-0000-7000-8000-000000000009}', ARRAY[:f9]::pg_catalog.int8[], 'r$P');
SELECT lease_token AS g8 FROM whizbang.leases WHERE source OPERATOR(pg_catalog.=) 'inbox'
   AND consumer OPERATOR(pg_catalog.=) 'r$P'
   AND message_id OPERATOR(pg_catalog.=) '${P}3000000-0000-7000-8000-000000000008' \gset
SELECT * FROM whizbang.fail_work('inbox', '{${P}3000000-0000-7000-8000-000000000008}', '{"retry me"}',
    ARRAY[:g8]::pg_catalog.int8[], '{true}', 'r$P', pg_catalog.now() OPERATOR(pg_catalog.+) '11 seconds'::pg_catalog.interval);

-- outbox: plain, streamed, pre-leased to D; published, kept for debugging, completed, failed
SELECT * FROM whizbang.store_outbox_messages('[
  {"MessageId": "${P}4000000-0000-7000-8000-000000000001", "Destination": "d", "MessageType": "t", "Envelope": {}},
  {"MessageId": "${P}4000000-0000-7000-8000-000000000002", "Destination": "d", "MessageType": "t", "Envelope": {},
   "StreamId": "${P}4100000-0000-7000-8000-000000000001", "Metadata": {"k": 1}, "IsEvent": true},
  {"MessageId": "${P}4000000-0000-7000-8000-000000000003", "Destination": "d", "MessageType": "t", "Envelope": {},
   "StreamId": "${P}4100000-0000-7000-8000-000000000001"}]');
SELECT * FROM whizbang.store_outbox_messages('[
  {"MessageId": "${P}4000000-0000-7000-8000-000000000004", "Destination": "d", "MessageType": "t", "Envelope": {}},
  {"MessageId": "${P}4000000-0000-7000-8000-000000000001", "Destination": "d", "MessageType": "t", "Envelope": {}}]',
  p_instance_id => '$D');
SELECT message_id, lease_token FROM whizbang.claim_work('$D', 'outbox');
SELECT whizbang.complete_outbox_published('{${P}4000000-0000-7000-8000-000000000001}');
SELECT whizbang.complete_outbox_published('{${P}4000000-0000-7000-8000-000000000002}', true);
SELECT lease_token AS o4 FROM whizbang.leases WHERE source OPERATOR(pg_catalog.=) 'outbox'
   AND message_id OPERATOR(pg_catalog.=) '${P}4000000-0000-7000-8000-000000000004' \gset
SELECT * FROM whizbang.complete_work('outbox', '{${P}4000000-0000-7000-8000-000000000004}', ARRAY[:o4]::pg_catalog.int8[]);
SELECT message_id FROM whizbang.claim_work('$E', NULL);
SELECT * FROM whizbang.fail_work('outbox', '{${P}4000000-0000-7000-8000-000000000003}', '{"broker down"}',
    NULL, '{false}');
SELECT message_id FROM whizbang.claim_work('$C', NULL, p_max_rows => 10, p_lease_seconds => 1);

-- per-consumer operations (0.5.0): counts, peek, cancel (a pending, a leased and an unknown id)
SELECT * FROM whizbang.queues;
SELECT * FROM whizbang.queues(pg_catalog.now() OPERATOR(pg_catalog.+) '1 hour'::pg_catalog.interval);
SELECT pg_catalog.count(*) FROM whizbang.leases;
SELECT * FROM whizbang.leases;
SELECT * FROM whizbang._leases();
SELECT * FROM whizbang.leases WHERE lease_expiry OPERATOR(pg_catalog.>) pg_catalog.now() ORDER BY message_id;
SELECT * FROM whizbang.store_inbox_messages('[
  {"MessageId": "${P}5000000-0000-7000-8000-000000000001", "HandlerName": "h", "MessageType": "t", "Envelope": {},
   "StreamId": "${P}5100000-0000-7000-8000-000000000001"},
  {"MessageId": "${P}5000000-0000-7000-8000-000000000002", "HandlerName": "h", "MessageType": "t", "Envelope": {},
   "StreamId": "${P}5100000-0000-7000-8000-000000000001"}]', p_consumer => 'q$P');
SELECT message_id FROM whizbang.peek();
SELECT message_id FROM whizbang.peek('inbox', 'q$P', 10, pg_catalog.now() OPERATOR(pg_catalog.+) '1 hour'::pg_catalog.interval);
SELECT message_id FROM whizbang.peek('outbox');
SELECT message_id FROM whizbang.claim_work('$G', 'inbox', p_max_rows => 1, p_max_per_stream => 1, p_consumer => 'q$P');
SELECT * FROM whizbang.cancel_work('inbox', '{${P}5000000-0000-7000-8000-000000000002,${P}5000000-0000-7000-8000-000000000001,${P}5000000-0000-7000-8000-000000000009}', 'q$P');
SELECT * FROM whizbang.cancel_work('outbox', '{${P}4000000-0000-7000-8000-000000000003}');

-- work rows deleted by hand end their leases (the _lease_row_deleted triggers): a leased row
-- deleted; a TRUNCATE of each work table (rolled back: the triggers ran, the rows stay)
SELECT * FROM whizbang.store_inbox_messages('[
  {"MessageId": "${P}6000000-0000-7000-8000-000000000001", "HandlerName": "h", "MessageType": "t", "Envelope": {},
   "StreamId": "${P}6100000-0000-7000-8000-000000000001"},
  {"MessageId": "${P}6000000-0000-7000-8000-000000000002", "HandlerName": "h", "MessageType": "t", "Envelope": {}}]',
  p_consumer => 'd$P');
SELECT message_id FROM whizbang.claim_work('$G', 'inbox', p_consumer => 'd$P');
DELETE FROM whizbang.wh_inbox WHERE consumer OPERATOR(pg_catalog.=) 'd$P';
SELECT message_id FROM whizbang.claim_work('$G', 'inbox', p_consumer => 'd$P');

-- a claim that waits (0.7.0): nothing due, so it looks for when something falls due (a
-- scheduled row, a scheduled stream head, a lease lapsing) and sleeps until the time is up
SELECT * FROM whizbang.store_inbox_messages('[
  {"MessageId": "${P}7000000-0000-7000-8000-000000000001", "HandlerName": "h", "MessageType": "t", "Envelope": {},
   "StreamId": "${P}7100000-0000-7000-8000-000000000001", "ScheduledFor": "2999-01-01T00:00:00Z"},
  {"MessageId": "${P}7000000-0000-7000-8000-000000000002", "HandlerName": "h", "MessageType": "t", "Envelope": {},
   "ScheduledFor": "2999-01-01T00:00:00Z"}]', p_consumer => 'w$P');
SELECT message_id FROM whizbang.claim_work('$G', NULL, p_consumer => 'w$P', p_wait => '300 milliseconds');
BEGIN;
TRUNCATE whizbang.wh_inbox;
TRUNCATE whizbang.wh_outbox;
ROLLBACK;

-- idempotency keys: policy, claim, busy, complete, duplicate, conflict, release, old ones
INSERT INTO whizbang.wh_idempotency_policies (scope, default_result_ttl) VALUES ('s$P', '1 hour');
SELECT * FROM whizbang.idempotency_policy('s$P');
SELECT token AS k1 FROM whizbang.idempotency_begin('s$P', 'k1', '\x01', p_owner => 'w1') \gset
SELECT outcome FROM whizbang.idempotency_begin('s$P', 'k1', '\x01', p_wait => '50 milliseconds');
SELECT whizbang.idempotency_complete('s$P', 'k1', :k1, '{"ok": true}');
SELECT outcome, result FROM whizbang.idempotency_begin('s$P', 'k1', '\x01');
SELECT outcome FROM whizbang.idempotency_begin('s$P', 'k1', '\x02');
SELECT token AS k2 FROM whizbang.idempotency_begin('s$P', 'k2', p_in_progress_ttl => '1 minute', p_result_ttl => '2 hours') \gset
SELECT whizbang.idempotency_release('s$P', 'k2', :k2 OPERATOR(pg_catalog.+) 1000);
SELECT whizbang.idempotency_release('s$P', 'k2', :k2);
SELECT whizbang.idempotency_release('s$P', 'nope', 1);
SELECT token AS k3 FROM whizbang.idempotency_begin('s$P', 'k3', p_now => '2000-01-01 00:00:00+00') \gset
SELECT whizbang.idempotency_complete('s$P', 'k3', :k3, '{}', p_now => '2000-01-01 00:00:00+00');

-- observability and maintenance (an old p_now first, then one that purges everything finished)
SELECT * FROM whizbang.stats();
SELECT * FROM whizbang.stats;
SELECT whizbang.retry_dead_letters(ARRAY(SELECT d.dead_letter_id FROM whizbang.wh_dead_letters d
    WHERE d.message_id OPERATOR(pg_catalog.=) '${P}4000000-0000-7000-8000-000000000003'));
SELECT * FROM whizbang.perform_maintenance();
SELECT * FROM whizbang.perform_maintenance('2000-01-01 00:00:00+00', 2);
SELECT * FROM whizbang.perform_maintenance('2100-01-01 00:00:00+00', 2);
$run_maintenance
SELECT * FROM whizbang.stats;
UPDATE whizbang.wh_settings SET setting_value = '10' WHERE setting_key OPERATOR(pg_catalog.=) 'max_attempts';
SQL
}

pass() {  # number description
  reset_planted
  calls "$1" >"$work/calls$1.sql"
  if attacked -f "$work/calls$1.sql" >"$work/calls$1.out" 2>&1; then
    check_eq "$2: every entry point called by the superuser succeeded" ok ok
  else
    check_eq "$2: every entry point called by the superuser succeeded" ok "a call failed"
    echo "--- the end of what the calls printed:"; tail -n 12 "$work/calls$1.out"
  fi
  check_eq "$2: no planted object ran" 0 "$(planted)"
}

check "every function of whizbang runs with search_path = pg_catalog, pg_temp (a procedure that commits sets it itself)" \
  "SELECT count(*) = 0 FROM pg_proc WHERE pronamespace = 'whizbang'::regnamespace AND prokind <> 'p'
      AND NOT coalesce('search_path=pg_catalog, pg_temp' = ANY (proconfig), false)"
pass 1 "pass 1 (as installed)"

# Pass 2: the SQL's qualification alone. The C functions lose their SET clause (the PL/pgSQL
# settings trigger, written in plain SQL, keeps its own: it relies on it).
clean -c "DO \$\$DECLARE f regprocedure; BEGIN
            FOR f IN SELECT oid FROM pg_proc WHERE pronamespace = 'whizbang'::regnamespace
                        AND prolang = (SELECT oid FROM pg_language WHERE lanname = 'c') AND prokind = 'f' LOOP
              EXECUTE format('ALTER FUNCTION %s RESET search_path', f);
            END LOOP; END\$\$"
pass 2 "pass 2 (no SET clause: qualified SQL only)"

# The worker: old rows for every task, twice; the worker (connected with the database's
# search_path) purges them and is not restarted.
if [ "$store" = table ]; then exit "$FAILED"; fi  # no maintenance worker without the preload
seed_old() {  # hex digit
  clean <<SQL >/dev/null
SELECT count(*) FROM whizbang.dedup_insert_many(
    ARRAY(SELECT ('${1}5000000-0000-4000-8000-' || lpad(to_hex(i), 12, '0'))::uuid FROM generate_series(1, 50) i),
    'old', NULL, NULL, '2000-01-01 00:00:00+00');
SELECT count(*) FROM whizbang.store_inbox_messages('[{"MessageId": "${1}6000000-0000-4000-8000-000000000001",
    "HandlerName": "h", "MessageType": "t", "Envelope": {}}, {"MessageId": "${1}6000000-0000-4000-8000-000000000002",
    "HandlerName": "h", "MessageType": "t", "Envelope": {}, "StreamId": "${1}6100000-0000-4000-8000-000000000001"}]',
    p_instance_id => '${1}6200000-0000-4000-8000-000000000001', p_lease_expiry => '2000-01-01 00:01:00+00',
    p_now => '2000-01-01 00:00:00+00', p_consumer => 'dead');
SELECT count(*) FROM whizbang.fail_work('inbox', '{${1}6000000-0000-4000-8000-000000000001}', '{x}', NULL, '{false}', 'dead',
    '2000-01-01 00:00:00+00');
SELECT count(*) FROM whizbang.complete_work('inbox', '{${1}6000000-0000-4000-8000-000000000002}', NULL, 'dead',
    '2000-01-01 00:00:00+00');
SELECT count(*) FROM whizbang.store_outbox_messages('[{"MessageId": "${1}6300000-0000-4000-8000-000000000001",
    "Destination": "d", "MessageType": "t", "Envelope": {}}]', p_now => '2000-01-01 00:00:00+00');
SELECT whizbang.complete_outbox_published('{${1}6300000-0000-4000-8000-000000000001}', true);
UPDATE whizbang.wh_outbox SET processed_at = '2000-01-01 00:00:00+00' WHERE processed_at IS NOT NULL;
UPDATE whizbang.wh_inbox SET processed_at = '2000-01-01 00:00:00+00' WHERE processed_at IS NOT NULL;
SELECT outcome FROM whizbang.idempotency_begin('s', 'old$1', p_now => '2000-01-01 00:00:00+00');
SELECT whizbang.idempotency_complete('s', 'old$1', (SELECT token FROM whizbang.wh_idempotency_keys
    WHERE idempotency_key = 'old$1'), '{}', p_now => '2000-01-01 00:00:00+00');
SQL
}
left_old() {
  # old records: first seen in 2000 (a dead letter's record moves forward before its generation is dropped)
  clean -c "SELECT (SELECT count(*) FROM whizbang.wh_message_deduplication WHERE consumer IN ('old', 'dead')
                      AND first_seen_at < '2001-01-01')
                || ' ' || (SELECT count(*) FROM whizbang.wh_dead_letters WHERE dead_lettered_at < '2001-01-01')
                || ' ' || (SELECT count(*) FROM whizbang.wh_idempotency_keys WHERE scope = 's')
                || ' ' || (SELECT count(*) FROM whizbang.wh_inbox WHERE processed_at IS NOT NULL)
                || ' ' || (SELECT count(*) FROM whizbang.wh_outbox WHERE processed_at IS NOT NULL)"
}
wait_purged() {
  local got="" i
  for ((i = 0; i < 150; i++)); do
    got=$(left_old)
    [ "$got" = "0 0 0 0 0" ] && break
    sleep 0.2
  done
  echo "$got"
}
reset_planted
for ((i = 0; i < 100; i++)); do
  pid_before=$(worker_pid)
  [ -n "$pid_before" ] && [ "$pid_before" != "$first_worker" ] && break
  sleep 0.2
done
check "the maintenance worker connected again after the attack was set up" \
  "SELECT '$pid_before' NOT IN ('', '$first_worker')"
seed_old a
check_eq "worker, round 1: old records, dead letters, tombstones and processed work purged" "0 0 0 0 0" "$(wait_purged)"
seed_old b
check_eq "worker, round 2: the same" "0 0 0 0 0" "$(wait_purged)"
check_eq "the worker was not restarted (no error)" "$pid_before" "$(worker_pid)"
check_eq "worker: no planted object ran" 0 "$(planted)"

exit "$FAILED"
