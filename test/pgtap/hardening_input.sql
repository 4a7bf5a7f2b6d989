-- Input handling hardened in 0.4.1 (issue 10, item 9). Each case was accepted, or answered
-- badly, by 0.4.0:
--   a. echoed input is cut to 64 characters and its size (a 10 MB MessageId made a 10 MB error);
--   b. one nesting limit (10,000) for every JSON whizbang reads: the stores, inbox_receive and
--      fingerprint refuse the same documents with the same SQLSTATE and a message naming them;
--   c. p_partitions must be one-dimensional and at most 1,000,000 elements long;
--   d. claim_work's p_consumer has the 1024-byte limit of the other functions;
--   e. a pre-lease (p_instance_id) must end after p_now;
--   f. a NULL p_message_ids is an empty array, so other arrays of the call must be empty too;
--   g. idempotency_* name p_now when a time computed from it is out of range;
--   h. a near miss of a known field name (`ScheduleFor`) is an error whose hint names the field.
BEGIN;
SELECT plan(63);

-- Stores in the simulated time of 2030 find their generations made by maintenance then (0.13.0: a
-- store makes none further ahead than now() plus one period).
DO $$ BEGIN PERFORM whizbang.perform_maintenance('2030-01-01 00:00:00+00'); END $$;

SET LOCAL TimeZone = 'UTC';

CREATE FUNCTION pg_temp.msg(p_n int, p_extra jsonb DEFAULT '{}', p_target text DEFAULT 'HandlerName') RETURNS jsonb
LANGUAGE sql AS $$
    SELECT jsonb_build_object('MessageId', ('00000000-0000-4000-8000-' || lpad(to_hex(p_n), 12, '0'))::uuid,
                              p_target, 'h', 'MessageType', 'type', 'Envelope', jsonb_build_object('n', p_n)) || p_extra
$$;
CREATE FUNCTION pg_temp.out_msg(p_n int, p_extra jsonb DEFAULT '{}') RETURNS jsonb
LANGUAGE sql AS $$ SELECT pg_temp.msg(p_n, p_extra, 'Destination') $$;
-- Arrays nested p_depth deep.
CREATE FUNCTION pg_temp.nested(p_depth int) RETURNS jsonb
LANGUAGE sql AS $$ SELECT (repeat('[', p_depth) || repeat(']', p_depth))::jsonb $$;

-- SQLSTATE, message and hint of the error p_sql raises ('(no error)' when it raises none).
CREATE FUNCTION pg_temp.error_of(p_sql text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    v_state text;
    v_message text;
    v_hint text;
BEGIN
    BEGIN
        EXECUTE p_sql;
        RETURN '(no error)';
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE, v_message = MESSAGE_TEXT, v_hint = PG_EXCEPTION_HINT;
        RETURN v_state || ' ' || v_message || ' | ' || v_hint;
    END;
END
$$;

-- a. Echoed input is bounded --------------------------------------------------------------

SELECT throws_ok(
    format($$SELECT * FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(1, jsonb_build_object('MessageId', %L))))$$,
           repeat('x', 10000000)),
    '22023', 'p_messages[0].MessageId is not a valid uuid: "' || repeat('x', 64) || '..." (10000000 bytes)',
    'a: a 10 MB MessageId is echoed as its first 64 characters and its size');
SELECT cmp_ok(length(pg_temp.error_of(
    format($$SELECT * FROM whizbang.inbox_receive(jsonb_build_array(pg_temp.msg(1, jsonb_build_object('MessageId', %L))))$$,
           repeat('y', 10000000)))), '<', 300,
    'a: the whole error of inbox_receive with a 10 MB MessageId is short');
SELECT throws_ok(
    $$SELECT * FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(1, '{"MessageId": "nope"}')))$$,
    '22023', 'p_messages[0].MessageId is not a valid uuid: "nope"', 'a: a short value is echoed whole');
SELECT throws_ok(
    format($$SELECT * FROM whizbang.store_outbox_messages(jsonb_build_array(pg_temp.out_msg(1, jsonb_build_object('StreamId', %L))))$$,
           repeat('é', 100)),
    '22023', 'p_messages[0].StreamId is not a valid uuid: "' || repeat('é', 64) || '..." (200 bytes)',
    'a: characters are counted, not bytes, and never split');
SELECT throws_ok(
    format($$SELECT * FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(1, jsonb_build_object('ScheduledFor', %L))))$$,
           repeat('soon ', 1000)),
    '22023', 'p_messages[0].ScheduledFor is not a valid timestamp: "' || left(repeat('soon ', 1000), 64) || '..." (5000 bytes)',
    'a: an unparsable timestamp is cut too');
SELECT throws_ok(
    format($$SELECT * FROM whizbang.claim_work('c0000000-0000-4000-8000-000000000001', %L)$$, repeat('inbox', 1000)),
    '22023', 'p_source must be ''inbox'' or ''outbox'', got "' || left(repeat('inbox', 1000), 64) || '..." (5000 bytes)',
    'a: p_source is cut');
SELECT throws_ok(
    format($$SELECT whizbang.fingerprint('{}', ARRAY[%L])$$, repeat('a.', 5000) || '.'),
    '22023', 'ignore path "' || repeat('a.', 32) || '..." (10001 bytes) has an empty segment at byte 10000',
    'a: an ignore path is cut');

-- b. One nesting limit --------------------------------------------------------------------

SELECT throws_ok(
    $$SELECT * FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(1, jsonb_build_object('Envelope', pg_temp.nested(10001)))))$$,
    '54000', 'p_messages[0].Envelope nests arrays and objects deeper than 10000 levels',
    'b: store_inbox_messages refuses an envelope nested 10,001 deep');
SELECT throws_ok(
    $$SELECT * FROM whizbang.inbox_receive(jsonb_build_array(pg_temp.msg(1, jsonb_build_object('Envelope', pg_temp.nested(10001)))))$$,
    '54000', 'p_messages[0].Envelope nests arrays and objects deeper than 10000 levels',
    'b: inbox_receive refuses it with the same error');
SELECT throws_ok(
    $$SELECT * FROM whizbang.store_outbox_messages(jsonb_build_array(pg_temp.out_msg(1), pg_temp.out_msg(2, jsonb_build_object('Envelope', pg_temp.nested(10001)))))$$,
    '54000', 'p_messages[1].Envelope nests arrays and objects deeper than 10000 levels',
    'b: store_outbox_messages refuses it, naming the element');
SELECT throws_ok(
    $$SELECT whizbang.fingerprint(pg_temp.nested(10001))$$,
    '54000', 'p_payload nests arrays and objects deeper than 10000 levels',
    'b: fingerprint refuses it with the same SQLSTATE');
SELECT is(pg_temp.error_of($$SELECT whizbang.fingerprint(pg_temp.nested(10001))$$),
          '54000 p_payload nests arrays and objects deeper than 10000 levels | whizbang reads JSON nested at most 10000 levels deep.',
          'b: with a hint naming the limit');
SELECT throws_ok(
    format($$SELECT * FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(1, jsonb_build_object('Metadata', %L::jsonb))))$$,
           repeat('{"k": ', 10001) || '1' || repeat('}', 10001)),
    '54000', 'p_messages[0].Metadata nests arrays and objects deeper than 10000 levels',
    'b: objects count as levels, and Metadata has the limit too');
SELECT throws_ok(
    $$SELECT * FROM whizbang.store_outbox_messages(jsonb_build_array(pg_temp.out_msg(1, jsonb_build_object('Scope', pg_temp.nested(10001)))))$$,
    '54000', 'p_messages[0].Scope nests arrays and objects deeper than 10000 levels',
    'b: and Scope');
SELECT is((SELECT count(*) FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(1, jsonb_build_object('Envelope', pg_temp.nested(10000)))),
                                                              p_consumer => 'deep')),
          1::bigint, 'b: store_inbox_messages takes an envelope nested exactly 10,000 deep');
SELECT is((SELECT outcome FROM whizbang.inbox_receive(jsonb_build_array(pg_temp.msg(2, jsonb_build_object('Envelope', pg_temp.nested(10000)))),
                                                      p_consumer => 'deep')),
          'new', 'b: so does inbox_receive');
SELECT is((SELECT count(*) FROM whizbang.store_outbox_messages(jsonb_build_array(pg_temp.out_msg(3, jsonb_build_object('Envelope', pg_temp.nested(10000)))))),
          1::bigint, 'b: and store_outbox_messages');
SELECT isnt(whizbang.fingerprint(pg_temp.nested(10000)), NULL, 'b: and fingerprint');
SELECT is((SELECT count(*) FROM whizbang.store_inbox_messages(
               jsonb_build_array(pg_temp.msg(4, jsonb_build_object('Envelope', jsonb_build_object('big', repeat('z', 200000), 'deep', pg_temp.nested(500))))),
               p_consumer => 'deep')),
          1::bigint, 'b: a big but shallow envelope is read and taken');

-- c. p_partitions -------------------------------------------------------------------------

SELECT throws_ok(
    $$SELECT * FROM whizbang.claim_work('c0000000-0000-4000-8000-000000000001', p_partitions => '{{1,2},{3,4}}')$$,
    '2202E', 'p_partitions must be a one-dimensional array', 'c: a two-dimensional p_partitions is refused');
SELECT throws_ok(
    $$SELECT * FROM whizbang.claim_work('c0000000-0000-4000-8000-000000000001', p_partitions => array_fill(1, ARRAY[1000001]))$$,
    '54000', 'p_partitions has 1000001 elements, more than the limit of 1000000 per call',
    'c: 1,000,001 partitions are refused');
SELECT lives_ok(
    $$SELECT * FROM whizbang.claim_work('c0000000-0000-4000-8000-000000000001', 'inbox', p_partitions => array_fill(1, ARRAY[1000000]), p_consumer => 'none')$$,
    'c: 1,000,000 partitions are taken');
SELECT throws_ok(
    $$SELECT * FROM whizbang.claim_work('c0000000-0000-4000-8000-000000000001', p_partitions => ARRAY[1, NULL])$$,
    '22004', 'p_partitions must not contain nulls', 'c: a NULL partition is still 22004');

-- d. claim_work's p_consumer --------------------------------------------------------------

SELECT throws_ok(
    format($$SELECT * FROM whizbang.claim_work('c0000000-0000-4000-8000-000000000001', p_consumer => %L)$$, repeat('c', 1025)),
    '22023', 'p_consumer is 1025 bytes, more than the limit of 1024', 'd: claim_work refuses a 1,025-byte consumer');
SELECT throws_ok(
    format($$SELECT * FROM whizbang.complete_work('inbox', '{}', NULL, %L)$$, repeat('c', 1025)),
    '22023', 'p_consumer is 1025 bytes, more than the limit of 1024', 'd: as complete_work does');
SELECT throws_ok(
    format($$SELECT * FROM whizbang.claim_work('c0000000-0000-4000-8000-000000000001', p_consumer => %L)$$, repeat('é', 513)),
    '22023', 'p_consumer is 1026 bytes, more than the limit of 1024', 'd: bytes are counted, not characters');
SELECT lives_ok(
    format($$SELECT * FROM whizbang.claim_work('c0000000-0000-4000-8000-000000000001', p_consumer => %L)$$, repeat('c', 1024)),
    'd: a 1,024-byte consumer is taken');
SELECT lives_ok($$SELECT * FROM whizbang.claim_work('c0000000-0000-4000-8000-000000000001', p_consumer => NULL)$$,
                'd: a NULL consumer still means every consumer');

-- e. p_lease_expiry of a pre-lease --------------------------------------------------------

SELECT throws_ok(
    $$SELECT * FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(10)), 'a0000000-0000-4000-8000-000000000001',
                                                  '2030-01-01 00:00:00Z', '2030-01-01 00:00:01Z', p_consumer => 'pre')$$,
    '22023', 'p_lease_expiry must be later than p_now', 'e: store_inbox_messages refuses a pre-lease that already ended');
SELECT is(pg_temp.error_of(
    $$SELECT * FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(10)), 'a0000000-0000-4000-8000-000000000001',
                                                  '2030-01-01 00:00:00Z', '2030-01-01 00:00:00Z', p_consumer => 'pre')$$),
    '22023 p_lease_expiry must be later than p_now | Omit p_lease_expiry for a lease of 300 seconds, or give a time in the future.',
    'e: one ending at p_now too, with a hint');
SELECT throws_ok(
    $$SELECT * FROM whizbang.store_outbox_messages(jsonb_build_array(pg_temp.out_msg(10)), 'a0000000-0000-4000-8000-000000000001',
                                                   '2029-12-31 00:00:00Z', '2030-01-01 00:00:00Z')$$,
    '22023', 'p_lease_expiry must be later than p_now', 'e: and so does store_outbox_messages');
SELECT is((SELECT count(*) FROM whizbang.wh_message_deduplication WHERE consumer = 'pre'), 0::bigint,
          'e: nothing was recorded');
SELECT is((SELECT count(*) FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(11)), NULL,
                                                              '2000-01-01 00:00:00Z', '2030-01-01 00:00:00Z', p_consumer => 'pre')),
          1::bigint, 'e: without p_instance_id, p_lease_expiry is ignored as documented');
SELECT is((SELECT count(*) FROM whizbang.leases WHERE source = 'inbox' AND consumer = 'pre'), 0::bigint,
          'e: and the message is stored unleased');
SELECT is((SELECT count(*) FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(12)), 'a0000000-0000-4000-8000-000000000001',
                                                              '2030-01-01 00:00:00.000001Z', '2030-01-01 00:00:00Z', p_consumer => 'pre')),
          1::bigint, 'e: a pre-lease ending after p_now is taken');
SELECT is((SELECT lease_expiry FROM whizbang.leases
            WHERE source = 'inbox' AND consumer = 'pre' AND message_id = '00000000-0000-4000-8000-00000000000c'),
          '2030-01-01 00:00:00.000001Z'::timestamptz, 'e: and stored with its lease');

-- f. NULL p_message_ids -------------------------------------------------------------------

SELECT throws_ok($$SELECT * FROM whizbang.complete_work('inbox', NULL, '{1}')$$,
                 '22023', 'p_lease_tokens has 1 elements but p_message_ids has 0',
                 'f: complete_work with NULL ids and one token is an error (lengths differ)');
SELECT is(pg_temp.error_of($$SELECT * FROM whizbang.complete_work('inbox', NULL, '{1}')$$),
          '22023 p_lease_tokens has 1 elements but p_message_ids has 0 | Array arguments of one call must have equal lengths, and a NULL p_message_ids counts as empty.',
          'f: the hint says that a NULL p_message_ids counts as empty');
SELECT is_empty($$SELECT * FROM whizbang.complete_work('inbox', NULL, NULL)$$, 'f: NULL ids and NULL tokens: no rows');
SELECT is_empty($$SELECT * FROM whizbang.complete_work('inbox', NULL, '{}')$$, 'f: NULL ids and no tokens: no rows');
SELECT throws_ok($$SELECT * FROM whizbang.fail_work('inbox', NULL, ARRAY['e'])$$,
                 '22023', 'p_errors has 1 elements but p_message_ids has 0', 'f: fail_work with NULL ids and one error');
SELECT throws_ok($$SELECT * FROM whizbang.release_work('inbox', NULL, '{1}')$$,
                 '22023', 'p_lease_tokens has 1 elements but p_message_ids has 0', 'f: release_work with NULL ids and one token');
SELECT is_empty($$SELECT * FROM whizbang.renew_leases('inbox', NULL, '{}')$$, 'f: renew_leases with NULL ids and no tokens: no rows');
SELECT throws_ok($$SELECT * FROM whizbang.renew_leases('inbox', NULL, NULL)$$,
                 '22004', 'p_lease_tokens must not be null', 'f: renew_leases still requires its token array');

-- g. idempotency_* and p_now at the end of the timestamp range -----------------------------

SELECT throws_ok(
    $$SELECT * FROM whizbang.idempotency_begin('hardening', 'k1', p_in_progress_ttl => '1 day', p_now => '294276-12-31 00:00:00Z')$$,
    '22008', 'p_now + the in-progress TTL is out of the timestamp range', 'g: idempotency_begin names p_now');
SELECT is((SELECT outcome FROM whizbang.idempotency_begin('hardening', 'k2', p_in_progress_ttl => '1 minute',
                                                          p_now => '294276-12-31 23:00:00Z')),
          'claimed', 'g: a begin whose lease fits is taken');
SELECT throws_ok(
    $$SELECT whizbang.idempotency_complete('hardening', 'k2',
          (SELECT token FROM whizbang.wh_idempotency_keys WHERE scope = 'hardening' AND idempotency_key = 'k2'),
          p_now => '294276-12-31 23:00:00Z')$$,
    '22008', 'p_now + the result TTL + the tombstone TTL is out of the timestamp range', 'g: idempotency_complete names p_now');
SELECT throws_ok(
    $$SELECT whizbang.idempotency_complete('hardening', 'k2', 1, p_now => 'infinity')$$,
    '22023', 'p_now must be a finite timestamp', 'g: an infinite p_now is still 22023');

-- h. Near misses of known field names -----------------------------------------------------

SELECT throws_ok(
    $$SELECT * FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(20, '{"ScheduleFor": "2031-01-01T00:00:00Z"}')))$$,
    '22023', 'p_messages[0] has the unknown field "ScheduleFor"', 'h: ScheduleFor is refused, not ignored');
SELECT is(pg_temp.error_of(
    $$SELECT * FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(20, '{"ScheduleFor": "2031-01-01T00:00:00Z"}')))$$),
    '22023 p_messages[0] has the unknown field "ScheduleFor" | Did you mean "ScheduledFor"? Elements are numbered from 0, as jsonb''s -> operator numbers them.',
    'h: the hint names the known field');
SELECT is(pg_temp.error_of(
    $$SELECT * FROM whizbang.inbox_receive(jsonb_build_array(pg_temp.msg(21), pg_temp.msg(22) - 'MessageId' || '{"messageId": "00000000-0000-4000-8000-000000000022"}'))$$),
    '22023 p_messages[1] has the unknown field "messageId" | Did you mean "MessageId"? Elements are numbered from 0, as jsonb''s -> operator numbers them.',
    'h: a misspelt required field is reported as the near miss, not as missing');
SELECT is(pg_temp.error_of(
    $$SELECT * FROM whizbang.store_outbox_messages(jsonb_build_array(pg_temp.out_msg(23, '{"Streamid": "00000000-0000-4000-8000-0000000000aa"}')))$$),
    '22023 p_messages[0] has the unknown field "Streamid" | Did you mean "StreamId"? Elements are numbered from 0, as jsonb''s -> operator numbers them.',
    'h: the outbox checks too (Streamid)');
SELECT throws_ok(
    $$SELECT * FROM whizbang.store_outbox_messages(jsonb_build_array(pg_temp.out_msg(24, '{"Destinaton": "x"}')))$$,
    '22023', 'p_messages[0] has the unknown field "Destinaton"', 'h: two letters off (Destinaton) is a near miss');
SELECT throws_ok(
    $$SELECT * FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(25, '{"scope": null}')))$$,
    '22023', 'p_messages[0] has the unknown field "scope"', 'h: another letter case is a near miss, also with a null value');
SELECT throws_ok(
    $$SELECT * FROM whizbang.store_inbox_messages(jsonb_build_array(pg_temp.msg(26, '{"IS_EVENT": true}')))$$,
    '22023', 'p_messages[0] has the unknown field "IS_EVENT"', 'h: IS_EVENT is a near miss of IsEvent');
SELECT is((SELECT count(*) FROM whizbang.wh_inbox WHERE message_id IN ('00000000-0000-4000-8000-000000000014',
                                                                            '00000000-0000-4000-8000-000000000019')),
          0::bigint, 'h: nothing of the refused batches was stored');
SELECT throws_ok(
    $$SELECT * FROM whizbang.store_inbox_messages(
          (SELECT jsonb_agg(pg_temp.msg(100 + g, jsonb_build_object('Extra' || g, g, 'TraceId', 't')) ORDER BY g)
             FROM generate_series(0, 39) g) || jsonb_build_array(pg_temp.msg(200, '{"TraceId": "t", "Sentat": null}')))$$,
    '22023', 'p_messages[40] has the unknown field "Sentat"',
    'h: a near miss after 40 elements with other unknown keys is still found');
SELECT is((SELECT count(*) FROM whizbang.store_inbox_messages(jsonb_build_array(
               pg_temp.msg(30, '{"TraceId": "t", "CorrelationId": "c", "SentBy": "me", "Destination": "d", "Version": 2}')),
               p_consumer => 'fwd')),
          1::bigint, 'h: unrelated unknown fields, and the outbox''s Destination, are still ignored by the inbox');
SELECT is((SELECT count(*) FROM whizbang.store_outbox_messages(jsonb_build_array(
               pg_temp.out_msg(31, '{"HandlerName": "h", "SentAt": "2030-01-01T00:00:00Z", "TraceId": "t"}')))),
          1::bigint, 'h: and the inbox''s HandlerName and SentAt by the outbox');
SELECT is((SELECT count(*) FROM whizbang.store_inbox_messages(jsonb_build_array(
               pg_temp.msg(32, jsonb_build_object(repeat('k', 10000000), 1))), p_consumer => 'fwd')),
          1::bigint, 'h: a 10 MB unknown key is ignored (too long to be a near miss)');
SELECT is((SELECT count(*) FROM whizbang.store_inbox_messages(jsonb_build_array(
               pg_temp.msg(33, '{"ScheduledFor": "2031-01-01T00:00:00Z", "StreamId": null, "IsEvent": null, "SentAt": null, "Metadata": null, "Scope": {}}')),
               p_consumer => 'fwd')),
          1::bigint, 'h: an element with every field, some null, is taken');
SELECT is((SELECT scheduled_for FROM whizbang.wh_inbox WHERE consumer = 'fwd' AND message_id = '00000000-0000-4000-8000-000000000021'),
          '2031-01-01 00:00:00Z'::timestamptz, 'h: and its ScheduledFor is read');
SELECT is((SELECT count(*) FROM whizbang.wh_inbox WHERE consumer = 'fwd'), 3::bigint,
          'h: the three accepted inbox elements were stored');

SELECT * FROM finish();
ROLLBACK;
