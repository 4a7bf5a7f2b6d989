-- Every function documented for a capability works for a role granted that capability alone
-- (issue 30 item 12; docs/reference.md "grant_worker, grant_admin", docs/security.md): the
-- capability grants every function and view the docs name for it, and a role made by
-- grant_worker(role, ARRAY[capability]) or grant_admin(role, ARRAY[capability]) calls each of them,
-- with something to act on, without an error. Before 0.13.0, dedup_generations() failed for the
-- monitor role (42501 on a generation) and grant_admin granted neither peek, cancel_work nor
-- lease_store.
--
-- Roles and rows are made inside the test transaction and disappear with its ROLLBACK.
BEGIN;
SELECT * FROM no_plan();

CREATE FUNCTION pg_temp.msgs(p_tag text, p_n int DEFAULT 1) RETURNS jsonb LANGUAGE sql AS $$
    SELECT jsonb_agg(jsonb_build_object('MessageId', md5(p_tag || g)::uuid, 'HandlerName', 'h', 'MessageType', 't',
                                        'Destination', 'd', 'Envelope', '{}'::jsonb) ORDER BY g)
      FROM generate_series(1, p_n) g $$;

-- Something for every call to act on (as the superuser): a dedup record (its generation), inbox
-- and outbox work, a dead letter of each source, a claimed message of each.
SELECT is(whizbang.dedup_insert('0c0c0c0c-0000-4000-8000-00000000c001', 'cap'), 'new', 'fixture: a dedup record');
SELECT ok((SELECT count(*) FROM whizbang.inbox_receive(pg_temp.msgs('cap_in', 6), 'cap')) = 6, 'fixture: inbox work');
SELECT ok((SELECT count(*) FROM whizbang.store_outbox_messages(pg_temp.msgs('cap_out', 6))) = 6, 'fixture: outbox work');
SELECT ok((SELECT count(*) FROM whizbang.fail_work('inbox', ARRAY[md5('cap_in1')::uuid], ARRAY['e'], NULL, ARRAY[false], 'cap')
            WHERE outcome = 'dead_lettered') = 1, 'fixture: an inbox dead letter');
SELECT ok((SELECT count(*) FROM whizbang.fail_work('outbox', ARRAY[md5('cap_out1')::uuid], ARRAY['e'], NULL, ARRAY[false])
            WHERE outcome = 'dead_lettered') = 1, 'fixture: an outbox dead letter');

-- What the docs name for each capability: routines (every overload) and views.
CREATE TEMP TABLE documented (capability text, kind text, object_name text);
INSERT INTO documented VALUES
    ('dedup', 'routine', 'dedup_insert'), ('dedup', 'routine', 'dedup_insert_many'), ('dedup', 'routine', 'fingerprint'),
    ('dedup', 'routine', 'event_uuid'), ('dedup', 'routine', 'uuid_v7'), ('dedup', 'routine', 'partition_of'),
    ('dedup', 'routine', 'version'),
    ('idempotency', 'routine', 'idempotency_begin'), ('idempotency', 'routine', 'idempotency_complete'),
    ('idempotency', 'routine', 'idempotency_release'), ('idempotency', 'routine', 'idempotency_policy'),
    ('idempotency', 'routine', 'fingerprint'),
    ('inbox', 'routine', 'store_inbox_messages'), ('inbox', 'routine', 'inbox_receive'), ('inbox', 'routine', 'claim_work'),
    ('inbox', 'routine', 'complete_work'), ('inbox', 'routine', 'fail_work'), ('inbox', 'routine', 'renew_leases'),
    ('inbox', 'routine', 'release_work'), ('inbox', 'routine', 'partition_of'),
    ('outbox', 'routine', 'store_outbox_messages'),
    ('relay', 'routine', 'claim_work'), ('relay', 'routine', 'complete_work'), ('relay', 'routine', 'fail_work'),
    ('relay', 'routine', 'renew_leases'), ('relay', 'routine', 'release_work'),
    ('relay', 'routine', 'complete_outbox_published'), ('relay', 'routine', 'partition_of'),
    ('dead_letters', 'routine', 'retry_dead_letters'), ('dead_letters', 'routine', 'retry_dead_letters_matching'),
    ('dead_letters', 'routine', 'discard_dead_letters'), ('dead_letters', 'routine', 'discard_dead_letters_matching'),
    ('settings', 'table', 'settings'), ('settings', 'table', 'wh_settings'),
    ('policies', 'table', 'wh_idempotency_policies'), ('policies', 'table', 'wh_retry_policies'),
    ('maintenance', 'routine', 'perform_maintenance'), ('maintenance', 'routine', 'run_maintenance'),
    ('maintenance', 'routine', 'cancel_work'), ('maintenance', 'routine', 'requeue'), ('maintenance', 'routine', 'reschedule'),
    ('monitor', 'routine', 'stats'), ('monitor', 'table', 'stats'), ('monitor', 'routine', 'queues'),
    ('monitor', 'table', 'queues'), ('monitor', 'routine', 'peek'), ('monitor', 'table', 'leases'),
    ('monitor', 'routine', '_leases'), ('monitor', 'routine', 'lease_store'), ('monitor', 'routine', 'dedup_generations'),
    ('monitor', 'table', 'dedup_generations'), ('monitor', 'routine', 'check'), ('monitor', 'routine', 'counters'),
    ('monitor', 'table', 'counters');
SELECT is((SELECT array_agg(d.capability || ': ' || d.object_name ORDER BY 1)
             FROM (SELECT capability, kind, object_name FROM documented
                   EXCEPT SELECT capability, kind, object_name FROM whizbang._capability_grants()) d),
          NULL, 'each capability grants every function and view the docs name for it');

-- What each capability grants covers what its functions check (whizbang._required_privileges(),
-- under the conditions the capability serves): the two lists cannot drift apart.
SELECT is((SELECT array_agg(DISTINCT g.capability || ': ' || r.function_name || ' needs ' || p || ' on ' || r.object_name)
             FROM whizbang._capability_grants() g
             JOIN whizbang._required_privileges() r ON g.kind = 'routine' AND r.function_name = g.object_name
             CROSS JOIN LATERAL unnest(string_to_array(r.privileges, ', ')) p
            WHERE r.needed_when = ANY (CASE g.capability
                      WHEN 'inbox' THEN ARRAY['always', 'inbox', 'p_instance_id', 'p_sent_at']
                      WHEN 'relay' THEN ARRAY['always', 'outbox']
                      WHEN 'outbox' THEN ARRAY['always', 'outbox', 'p_instance_id']
                      WHEN 'dedup' THEN ARRAY['always', 'p_sent_at']
                      ELSE ARRAY['always', 'inbox', 'outbox', 'p_instance_id', 'p_sent_at'] END)
              AND NOT EXISTS (SELECT FROM whizbang._capability_grants() h
                               WHERE h.capability = g.capability AND h.kind <> 'routine'
                                 AND h.object_name = r.object_name
                                 AND p = ANY (string_to_array(h.privileges, ', ')))),
          NULL, 'each capability grants every privilege its functions check when a call starts');

-- Each call of a capability, as a role granted that capability alone: no error.
CREATE TEMP TABLE calls (capability text, label text, sql text);
INSERT INTO calls VALUES
    ('dedup', 'dedup_insert', $$SELECT whizbang.dedup_insert('0c0c0c0c-0000-4000-8000-00000000c002', 'cap', NULL, now())$$),
    ('dedup', 'dedup_insert_many', $$SELECT * FROM whizbang.dedup_insert_many(ARRAY['0c0c0c0c-0000-4000-8000-00000000c001']::uuid[], 'cap')$$),
    ('dedup', 'identity', $$SELECT whizbang.fingerprint('{}'), whizbang.event_uuid('a', 'b'), whizbang.uuid_v7(),
                                   whizbang.partition_of(whizbang.uuid_v7(), 8), whizbang.version()$$),
    ('idempotency', 'idempotency_*', $$SELECT whizbang.idempotency_complete('cap', 'k', (SELECT token FROM whizbang.idempotency_begin('cap', 'k')), '{}'),
                                              whizbang.idempotency_policy('cap')$$),
    ('idempotency', 'idempotency_release', $$SELECT whizbang.idempotency_release('cap', 'k2', (SELECT token FROM whizbang.idempotency_begin('cap', 'k2')))$$),
    ('inbox', 'stores', $$SELECT (SELECT count(*) FROM whizbang.inbox_receive(pg_temp.msgs('cap_w1'), 'cap')),
                                 (SELECT count(*) FROM whizbang.store_inbox_messages(pg_temp.msgs('cap_w2'), '0c0c0c0c-0000-4000-8000-0000000000c1', p_consumer => 'cap'))$$),
    ('inbox', 'claim and outcomes', $$WITH c AS (SELECT * FROM whizbang.claim_work('0c0c0c0c-0000-4000-8000-0000000000c2', 'inbox', 4, 30, p_consumer => 'cap'))
        SELECT (SELECT count(*) FROM whizbang.renew_leases('inbox', ARRAY(SELECT message_id FROM c), ARRAY(SELECT lease_token FROM c), 30, 'cap')),
               (SELECT count(*) FROM whizbang.release_work('inbox', ARRAY(SELECT message_id FROM c LIMIT 1), ARRAY(SELECT lease_token FROM c LIMIT 1), 'cap')),
               (SELECT count(*) FROM whizbang.fail_work('inbox', ARRAY(SELECT message_id FROM c OFFSET 1 LIMIT 1), ARRAY['e'], NULL, ARRAY[false], 'cap')),
               (SELECT count(*) FROM whizbang.complete_work('inbox', ARRAY(SELECT message_id FROM c OFFSET 2), NULL, 'cap'))$$),
    ('outbox', 'store_outbox_messages', $$SELECT count(*) FROM whizbang.store_outbox_messages(pg_temp.msgs('cap_o1'), '0c0c0c0c-0000-4000-8000-0000000000c3')$$),
    ('relay', 'claim and outcomes', $$WITH c AS (SELECT * FROM whizbang.claim_work('0c0c0c0c-0000-4000-8000-0000000000c4', 'outbox', 4, 30))
        SELECT (SELECT count(*) FROM whizbang.renew_leases('outbox', ARRAY(SELECT message_id FROM c), ARRAY(SELECT lease_token FROM c), 30)),
               (SELECT count(*) FROM whizbang.release_work('outbox', ARRAY(SELECT message_id FROM c LIMIT 1), ARRAY(SELECT lease_token FROM c LIMIT 1))),
               (SELECT count(*) FROM whizbang.fail_work('outbox', ARRAY(SELECT message_id FROM c OFFSET 1 LIMIT 1), ARRAY['e'], NULL, ARRAY[false])),
               (SELECT count(*) FROM whizbang.complete_work('outbox', ARRAY(SELECT message_id FROM c OFFSET 2 LIMIT 1), NULL)),
               whizbang.complete_outbox_published(ARRAY(SELECT message_id FROM c OFFSET 3))$$),
    ('dead_letters', 'retry_dead_letters', $$SELECT whizbang.retry_dead_letters(ARRAY(SELECT dead_letter_id FROM whizbang.wh_dead_letters))$$),
    ('dead_letters', 'by filter', $$SELECT whizbang.retry_dead_letters_matching(p_consumer => 'cap'),
                                          whizbang.discard_dead_letters_matching(p_consumer => 'nobody'),
                                          whizbang.discard_dead_letters(ARRAY[-1]::bigint[])$$),
    ('settings', 'settings', $$SELECT count(*) FROM whizbang.settings; UPDATE whizbang.wh_settings SET setting_value = setting_value WHERE setting_key = 'max_attempts'$$),
    ('policies', 'policies', $$SELECT count(*) FROM whizbang.wh_idempotency_policies$$),
    ('policies', 'retry policies', $$INSERT INTO whizbang.wh_retry_policies (source, consumer, max_attempts) VALUES ('inbox', 'cap-p', 3);
                                     UPDATE whizbang.wh_retry_policies SET max_attempts = 4; DELETE FROM whizbang.wh_retry_policies$$),
    ('maintenance', 'perform_maintenance', $$SELECT count(*) FROM whizbang.perform_maintenance()$$),
    ('maintenance', 'cancel_work', $$SELECT * FROM whizbang.cancel_work('inbox', ARRAY[md5('cap_in6')::uuid], 'cap')$$),
    ('maintenance', 'requeue, reschedule', $$SELECT * FROM whizbang.requeue('inbox', ARRAY[md5('cap_in6')::uuid], 'cap');
                                              SELECT * FROM whizbang.reschedule('inbox', ARRAY[md5('cap_in6')::uuid], now(), 'cap')$$),
    ('monitor', 'stats', $$SELECT count(*) FROM whizbang.stats(); SELECT count(*) FROM whizbang.stats$$),
    ('monitor', 'queues', $$SELECT count(*) FROM whizbang.queues(); SELECT count(*) FROM whizbang.queues$$),
    ('monitor', 'peek', $$SELECT count(*) FROM whizbang.peek(); SELECT count(*) FROM whizbang.peek('inbox', 'cap')$$),
    ('monitor', 'leases', $$SELECT count(*) FROM whizbang.leases$$),
    ('monitor', 'lease_store', $$SELECT whizbang.lease_store()$$),
    ('monitor', 'dedup_generations', $$SELECT count(*) FROM whizbang.dedup_generations(); SELECT count(*) FROM whizbang.dedup_generations$$),
    ('monitor', 'check', $$SELECT count(*) FROM whizbang.check()$$),
    ('monitor', 'counters', $$SELECT count(*) FROM whizbang.counters(); SELECT count(*) FROM whizbang.counters$$);

CREATE FUNCTION pg_temp.run_as_capability(p_capability text, p_label text, p_sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    role text := 'wb_cap_' || left(md5(p_capability || p_label), 10);
    state text := '00000';
    message text;
BEGIN
    EXECUTE format('CREATE ROLE %I NOLOGIN', role);
    IF p_capability IN ('dedup', 'idempotency', 'inbox', 'outbox', 'relay') THEN
        PERFORM count(*) FROM whizbang.grant_worker(role::regrole, ARRAY[p_capability]);
    ELSE
        PERFORM count(*) FROM whizbang.grant_admin(role::regrole, ARRAY[p_capability]);
    END IF;
    BEGIN
        EXECUTE format('SET LOCAL ROLE %I', role);
        EXECUTE p_sql;
        RESET ROLE;
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, message = MESSAGE_TEXT;
    END;
    RESET ROLE;
    RETURN state || coalesce(' ' || message, '');
END $$;

SELECT is(pg_temp.run_as_capability(capability, label, sql), '00000',
          format('%s (%s): works for a role granted only that capability', label, capability))
  FROM calls ORDER BY capability, label;

-- Every documented routine of a capability has a call above.
SELECT is((SELECT array_agg(d.capability || ': ' || d.object_name ORDER BY 1) FROM documented d
            WHERE d.kind = 'routine' AND d.object_name NOT IN ('run_maintenance', '_leases')
              AND NOT EXISTS (SELECT FROM calls c JOIN documented o ON o.capability = c.capability
                               WHERE o.object_name = d.object_name AND c.sql LIKE '%whizbang.' || d.object_name || '(%')),
          NULL, 'every documented routine is called above (run_maintenance: test/scripts/run_maintenance.sh; _leases: by the leases view)');

SELECT * FROM finish();
ROLLBACK;
