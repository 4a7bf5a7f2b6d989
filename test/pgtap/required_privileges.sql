-- One table of required privileges (issue 30 item 11, docs/security.md "What each function
-- needs"): whizbang._required_privileges() lists, per function, the privileges its caller needs
-- on whizbang's tables; every routed function is in it; and for each function, called the way
-- its case says, a role granted exactly the rows that apply (and EXECUTE, USAGE) succeeds, while
-- a role lacking any one privilege of them is refused with 42501 before anything is written,
-- the error naming the function in its DETAIL and the one-call grant in its HINT, with no
-- internal SQL in its CONTEXT. test/citus/grants.sh runs the same cases through a coordinator.
--
-- Roles and rows are made inside the test transaction and disappear with its ROLLBACK.
BEGIN;
SELECT * FROM no_plan();

-- Every routed function (whizbang._routing_policies()) is in the table.
SELECT is((SELECT array_agg(f ORDER BY f) FROM (
              SELECT substr(symbol, 4) AS f FROM whizbang._routing_policies()
               WHERE policy NOT IN ('local', 'citus_sql')
              EXCEPT SELECT function_name FROM whizbang._required_privileges()) m),
          NULL, 'every routed function has its rows in whizbang._required_privileges()');
SELECT ok((SELECT bool_and(privileges ~ '^(SELECT|INSERT|UPDATE|DELETE|USAGE)(, (SELECT|INSERT|UPDATE|DELETE|USAGE))*$'
                   AND needed_when IN ('always', 'inbox', 'outbox', 'p_instance_id', 'p_sent_at')
                   AND to_regclass('whizbang.' || object_name) IS NOT NULL)
             FROM whizbang._required_privileges()),
          'each row names an existing object, known privileges and a known condition');

-- Messages of a test, of one stream per tag (the stores' stream counters and look-ups run too).
CREATE FUNCTION pg_temp.msgs(p_tag text, p_n int DEFAULT 1) RETURNS jsonb LANGUAGE sql AS $$
    SELECT jsonb_agg(jsonb_build_object('MessageId', md5(p_tag || g)::uuid, 'HandlerName', 'h', 'MessageType', 't',
                                        'Destination', 'd', 'Envelope', '{}'::jsonb,
                                        'StreamId', md5('stream' || p_tag)::uuid) ORDER BY g)
      FROM generate_series(1, p_n) g $$;

-- A role granted USAGE, EXECUTE on p_function, and every privilege the table lists for it under
-- the conditions p_when, except (p_skip_object, p_skip_privilege).
CREATE FUNCTION pg_temp.grant_exactly(p_role text, p_function text, p_when text[], p_skip_object text,
                                      p_skip_privilege text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    r record;
    p text;
BEGIN
    EXECUTE format('CREATE ROLE %I NOLOGIN', p_role);
    EXECUTE format('GRANT USAGE ON SCHEMA whizbang TO %I', p_role);
    FOR r IN SELECT oid::regprocedure AS f FROM pg_proc
              WHERE pronamespace = 'whizbang'::regnamespace AND proname = p_function LOOP
        EXECUTE format('GRANT EXECUTE ON ROUTINE %s TO %I', r.f, p_role);
    END LOOP;
    FOR r IN SELECT object_name, privileges FROM whizbang._required_privileges()
              WHERE function_name = p_function AND needed_when = ANY (p_when) LOOP
        FOREACH p IN ARRAY string_to_array(r.privileges, ', ') LOOP
            CONTINUE WHEN r.object_name = p_skip_object AND p = p_skip_privilege;
            EXECUTE format('GRANT %s ON %s whizbang.%I TO %I', p,
                           CASE WHEN p = 'USAGE' THEN 'SEQUENCE' ELSE 'TABLE' END, r.object_name, p_role);
        END LOOP;
    END LOOP;
END $$;

-- One case: p_setup (run once, as the superuser) makes what the call acts on and answers one
-- row of values, which fill p_call's %s (format). Then, for each privilege the rows of p_when
-- list, a role without it calls: 42501, with the function in DETAIL and nothing written
-- (wh_inbox, wh_outbox, wh_dead_letters and the dedup table unchanged); then a role with exactly
-- the rows calls and succeeds.
CREATE FUNCTION pg_temp.check_case(p_case text, p_function text, p_when text[], p_setup text, p_call text)
RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
    v text[];
    call text;
    need record;
    p text;
    n int := 0;
    role text;
    state text;
    detail text;
    context text;
    before bigint;
    written bigint;
BEGIN
    IF p_setup IS NOT NULL THEN
        EXECUTE p_setup INTO v;
    END IF;
    call := format(p_call, VARIADIC coalesce(v, ARRAY[]::text[]));
    FOR need IN SELECT object_name, privileges FROM whizbang._required_privileges()
                 WHERE function_name = p_function AND needed_when = ANY (p_when) ORDER BY object_name LOOP
        FOREACH p IN ARRAY string_to_array(need.privileges, ', ') LOOP
            n := n + 1;
            role := format('wb_rp_%s_%s', left(md5(p_case), 8), n);
            PERFORM pg_temp.grant_exactly(role, p_function, p_when, need.object_name, p);
            SELECT (SELECT count(*) FROM whizbang.wh_inbox) + (SELECT count(*) FROM whizbang.wh_outbox)
                   + (SELECT count(*) FROM whizbang.wh_dead_letters) + (SELECT count(*) FROM whizbang.wh_message_deduplication)
              INTO before;
            state := '00000';
            detail := NULL;
            context := NULL;
            BEGIN
                EXECUTE format('SET LOCAL ROLE %I', role);
                EXECUTE call;
                RESET ROLE;
            EXCEPTION WHEN OTHERS THEN
                GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, detail = PG_EXCEPTION_DETAIL,
                                        context = PG_EXCEPTION_CONTEXT;
            END;
            RESET ROLE;
            SELECT (SELECT count(*) FROM whizbang.wh_inbox) + (SELECT count(*) FROM whizbang.wh_outbox)
                   + (SELECT count(*) FROM whizbang.wh_dead_letters) + (SELECT count(*) FROM whizbang.wh_message_deduplication)
              INTO written;
            RETURN NEXT is(state || CASE WHEN written = before THEN '' ELSE ' (wrote)' END, '42501',
                           format('%s: without %s on %s: 42501, nothing written', p_case, p, need.object_name));
            RETURN NEXT ok(coalesce(detail, '') LIKE '%whizbang.' || p_function || ' needs %'
                           AND coalesce(context, '') NOT LIKE '%whizbang.wh\_%',  -- whizbang's own statements name its tables
                           format('%s: without %s on %s: the detail names the function, no internal SQL (detail %s)',
                                  p_case, p, need.object_name, coalesce(detail, 'none')));
        END LOOP;
    END LOOP;
    role := format('wb_rp_%s_all', left(md5(p_case), 8));
    PERFORM pg_temp.grant_exactly(role, p_function, p_when, NULL, NULL);
    state := '00000';
    detail := NULL;
    BEGIN
        EXECUTE format('SET LOCAL ROLE %I', role);
        EXECUTE call;
        RESET ROLE;
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, detail = MESSAGE_TEXT;
    END;
    RESET ROLE;
    RETURN NEXT is(state || coalesce(' ' || detail, ''), '00000',
                   format('%s: a role with exactly the listed privileges (%s) succeeds', p_case, n));
END $$;

-- Fixtures (as the superuser): a claimed inbox message of consumer p_consumer, its id and token.
CREATE FUNCTION pg_temp.claimed_inbox(p_consumer text) RETURNS text[] LANGUAGE sql AS $$
    SELECT count(*) FROM whizbang.inbox_receive(pg_temp.msgs(p_consumer), p_consumer);
    SELECT ARRAY[c.message_id::text, c.lease_token::text]
      FROM whizbang.claim_work('0c0c0c0c-0000-4000-8000-0000000000f1', 'inbox', 1, 30, p_consumer => p_consumer) c $$;
CREATE FUNCTION pg_temp.claimed_outbox(p_tag text) RETURNS text[] LANGUAGE sql AS $$
    SELECT count(*) FROM whizbang.store_outbox_messages(pg_temp.msgs(p_tag));
    SELECT ARRAY[c.message_id::text, c.lease_token::text]
      FROM whizbang.claim_work('0c0c0c0c-0000-4000-8000-0000000000f2', 'outbox', 1000, 30) c
     WHERE c.message_id = md5(p_tag || 1)::uuid $$;
CREATE FUNCTION pg_temp.dead_letter(p_source text, p_tag text) RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE
    v text[];
BEGIN
    v := CASE p_source WHEN 'inbox' THEN pg_temp.claimed_inbox(p_tag) ELSE pg_temp.claimed_outbox(p_tag) END;
    PERFORM whizbang.fail_work(p_source, ARRAY[v[1]::uuid], ARRAY['e'], NULL, ARRAY[false], p_tag);
    RETURN ARRAY[(SELECT dead_letter_id::text FROM whizbang.wh_dead_letters WHERE message_id = v[1]::uuid)];
END $$;

SELECT * FROM pg_temp.check_case('dedup_insert', 'dedup_insert', ARRAY['always', 'p_sent_at'], NULL,
    $$SELECT whizbang.dedup_insert('0c0c0c0c-0000-4000-8000-00000000d001', 'rp', NULL, now(), now())$$);
SELECT * FROM pg_temp.check_case('dedup_insert_many', 'dedup_insert_many', ARRAY['always', 'p_sent_at'], NULL,
    $$SELECT * FROM whizbang.dedup_insert_many(ARRAY['0c0c0c0c-0000-4000-8000-00000000d002']::uuid[], 'rp', NULL,
                                                ARRAY[now()])$$);
SELECT * FROM pg_temp.check_case('store_inbox_messages', 'store_inbox_messages', ARRAY['always', 'p_instance_id'], NULL,
    $$SELECT * FROM whizbang.store_inbox_messages(pg_temp.msgs('rp_store_in'), '0c0c0c0c-0000-4000-8000-0000000000e1')$$);
SELECT * FROM pg_temp.check_case('inbox_receive', 'inbox_receive', ARRAY['always'], NULL,
    $$SELECT * FROM whizbang.inbox_receive(pg_temp.msgs('rp_receive'), 'rp')$$);
SELECT * FROM pg_temp.check_case('store_outbox_messages', 'store_outbox_messages', ARRAY['always', 'p_instance_id'], NULL,
    $$SELECT * FROM whizbang.store_outbox_messages(pg_temp.msgs('rp_store_out'), '0c0c0c0c-0000-4000-8000-0000000000e2')$$);
SELECT * FROM pg_temp.check_case('claim_work inbox', 'claim_work', ARRAY['always', 'inbox'],
    $$SELECT ARRAY[count(*)::text] FROM whizbang.inbox_receive(pg_temp.msgs('rp_claim'), 'rp_claim')$$,
    $$SELECT * FROM whizbang.claim_work('0c0c0c0c-0000-4000-8000-0000000000e3', 'inbox', 10, 30, p_consumer => 'rp_claim')$$);
SELECT * FROM pg_temp.check_case('claim_work outbox', 'claim_work', ARRAY['always', 'outbox'],
    $$SELECT ARRAY[count(*)::text] FROM whizbang.store_outbox_messages(pg_temp.msgs('rp_claim_out'))$$,
    $$SELECT * FROM whizbang.claim_work('0c0c0c0c-0000-4000-8000-0000000000e4', 'outbox', 10, 30)$$);
SELECT * FROM pg_temp.check_case('complete_work inbox', 'complete_work', ARRAY['always', 'inbox'],
    $$SELECT pg_temp.claimed_inbox('rp_complete')$$,
    $$SELECT * FROM whizbang.complete_work('inbox', ARRAY[%L]::uuid[], ARRAY[%s]::bigint[], 'rp_complete')$$);
SELECT * FROM pg_temp.check_case('complete_work outbox', 'complete_work', ARRAY['always', 'outbox'],
    $$SELECT pg_temp.claimed_outbox('rp_complete_out')$$,
    $$SELECT * FROM whizbang.complete_work('outbox', ARRAY[%L]::uuid[], ARRAY[%s]::bigint[])$$);
SELECT * FROM pg_temp.check_case('fail_work inbox (dead letter)', 'fail_work', ARRAY['always', 'inbox'],
    $$SELECT pg_temp.claimed_inbox('rp_fail')$$,
    $$SELECT * FROM whizbang.fail_work('inbox', ARRAY[%L]::uuid[], ARRAY['e'], ARRAY[%s]::bigint[], ARRAY[false], 'rp_fail')$$);
SELECT * FROM pg_temp.check_case('fail_work outbox (retry)', 'fail_work', ARRAY['always', 'outbox'],
    $$SELECT pg_temp.claimed_outbox('rp_fail_out')$$,
    $$SELECT * FROM whizbang.fail_work('outbox', ARRAY[%L]::uuid[], ARRAY['e'], ARRAY[%s]::bigint[])$$);
SELECT * FROM pg_temp.check_case('renew_leases inbox', 'renew_leases', ARRAY['always', 'inbox'],
    $$SELECT pg_temp.claimed_inbox('rp_renew')$$,
    $$SELECT * FROM whizbang.renew_leases('inbox', ARRAY[%L]::uuid[], ARRAY[%s]::bigint[], 60, 'rp_renew')$$);
SELECT * FROM pg_temp.check_case('release_work outbox', 'release_work', ARRAY['always', 'outbox'],
    $$SELECT pg_temp.claimed_outbox('rp_release_out')$$,
    $$SELECT * FROM whizbang.release_work('outbox', ARRAY[%L]::uuid[], ARRAY[%s]::bigint[])$$);
SELECT * FROM pg_temp.check_case('cancel_work inbox', 'cancel_work', ARRAY['always', 'inbox'],
    $$SELECT ARRAY[(SELECT message_id::text FROM whizbang.inbox_receive(pg_temp.msgs('rp_cancel'), 'rp_cancel'))]$$,
    $$SELECT * FROM whizbang.cancel_work('inbox', ARRAY[%L]::uuid[], 'rp_cancel')$$);
SELECT * FROM pg_temp.check_case('complete_outbox_published', 'complete_outbox_published', ARRAY['always'],
    $$SELECT pg_temp.claimed_outbox('rp_published')$$,
    $$SELECT whizbang.complete_outbox_published(ARRAY[%L]::uuid[])$$);
SELECT * FROM pg_temp.check_case('retry_dead_letters inbox', 'retry_dead_letters', ARRAY['always', 'inbox'],
    $$SELECT pg_temp.dead_letter('inbox', 'rp_retry')$$,
    $$SELECT whizbang.retry_dead_letters(ARRAY[%s]::bigint[])$$);
SELECT * FROM pg_temp.check_case('retry_dead_letters outbox', 'retry_dead_letters', ARRAY['always', 'outbox'],
    $$SELECT pg_temp.dead_letter('outbox', 'rp_retry_out')$$,
    $$SELECT whizbang.retry_dead_letters(ARRAY[%s]::bigint[])$$);
SELECT * FROM pg_temp.check_case('queues', 'queues', ARRAY['always'], NULL, $$SELECT * FROM whizbang.queues()$$);
SELECT * FROM pg_temp.check_case('peek both sources', 'peek', ARRAY['always', 'inbox', 'outbox'], NULL,
    $$SELECT * FROM whizbang.peek()$$);
SELECT * FROM pg_temp.check_case('stats', 'stats', ARRAY['always'], NULL, $$SELECT * FROM whizbang.stats()$$);
SELECT * FROM pg_temp.check_case('dedup_generations', 'dedup_generations', ARRAY['always'], NULL,
    $$SELECT * FROM whizbang.dedup_generations()$$);
SELECT * FROM pg_temp.check_case('perform_maintenance', 'perform_maintenance', ARRAY['always'], NULL,
    $$SELECT * FROM whizbang.perform_maintenance()$$);

SELECT * FROM finish();
ROLLBACK;
