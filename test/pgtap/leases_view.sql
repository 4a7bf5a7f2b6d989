-- whizbang.leases (DESIGN §3.8): every lease held on inbox and outbox work, with its holder,
-- token and expiry; gone once the message is completed, released or given back.
BEGIN;
SELECT plan(9);

-- Stores in the simulated time of 2030 find their generations made by maintenance then (0.13.0: a
-- store makes none further ahead than now() plus one period).
DO $$ BEGIN PERFORM whizbang.perform_maintenance('2030-01-01 00:00:00+00'); END $$;
SET LOCAL TimeZone = 'UTC';

SELECT is((SELECT count(*) FROM whizbang.store_inbox_messages(jsonb_build_array(
    jsonb_build_object('MessageId', '1ea5e000-0000-4000-8000-000000000001', 'HandlerName', 'h', 'MessageType', 't',
                       'Envelope', '{}'::jsonb, 'StreamId', '1ea5e000-0000-4000-8000-0000000000aa'),
    jsonb_build_object('MessageId', '1ea5e000-0000-4000-8000-000000000002', 'HandlerName', 'h', 'MessageType', 't',
                       'Envelope', '{}'::jsonb, 'StreamId', '1ea5e000-0000-4000-8000-0000000000aa')),
    NULL, NULL, '2030-01-01 00:00:00+00', 10000, 'lv')), 2::bigint, 'two inbox messages of one stream');
SELECT is((SELECT count(*) FROM whizbang.store_outbox_messages(jsonb_build_array(
    jsonb_build_object('MessageId', '1ea5e000-0000-4000-8000-000000000003', 'Destination', 'd', 'MessageType', 't',
                       'Envelope', '{}'::jsonb)), NULL, NULL, '2030-01-01 00:00:00+00')), 1::bigint, 'one outbox message');
SELECT is_empty($$SELECT * FROM whizbang.leases WHERE message_id::text LIKE '1ea5e000-%'$$, 'nothing leased yet');

CREATE TEMP TABLE got AS
SELECT source, message_id, lease_token, lease_expiry, attempts
  FROM whizbang.claim_work('1ea5e000-0000-4000-8000-0000000000c1', NULL, 10, 30, NULL, 10000, 100,
                           '2030-01-01 00:00:01+00', NULL)
 WHERE message_id::text LIKE '1ea5e000-%';
SELECT is((SELECT count(*) FROM got), 3::bigint, 'one claim takes all three');
SELECT set_eq(
    $$SELECT source, consumer, message_id, stream_id, instance_id, lease_token, lease_expiry, attempts
        FROM whizbang.leases WHERE message_id::text LIKE '1ea5e000-%'$$,
    $$SELECT g.source, CASE WHEN g.source = 'inbox' THEN 'lv' END AS consumer, g.message_id,
             CASE WHEN g.source = 'inbox' THEN '1ea5e000-0000-4000-8000-0000000000aa'::uuid END AS stream_id,
             '1ea5e000-0000-4000-8000-0000000000c1'::uuid AS instance_id, g.lease_token, g.lease_expiry, 1 AS attempts
        FROM got g$$,
    'the view shows each lease as the claim handed it out: holder, token, expiry, consumer, stream');
SELECT is((SELECT count(*) FROM whizbang.leases WHERE message_id::text LIKE '1ea5e000-%'
             AND lease_expiry > '2030-01-01 00:01:00+00'), 0::bigint,
          'a minute later none is live (lease_expiry > now() selects the live ones)');

SELECT is((SELECT outcome FROM whizbang.complete_work('inbox', ARRAY['1ea5e000-0000-4000-8000-000000000001'::uuid],
              ARRAY[(SELECT lease_token FROM got WHERE message_id = '1ea5e000-0000-4000-8000-000000000001')], 'lv',
              '2030-01-01 00:00:02+00')), 'completed', 'the head is completed');
SELECT is((SELECT outcome FROM whizbang.release_work('outbox', ARRAY['1ea5e000-0000-4000-8000-000000000003'::uuid],
              ARRAY[(SELECT lease_token FROM got WHERE message_id = '1ea5e000-0000-4000-8000-000000000003')], '',
              '2030-01-01 00:00:02+00')), 'released', 'the outbox message is released');
SELECT results_eq($$SELECT message_id FROM whizbang.leases WHERE message_id::text LIKE '1ea5e000-%'$$,
                  $$VALUES ('1ea5e000-0000-4000-8000-000000000002'::uuid)$$,
                  'completed and released messages leave the view; the other lease stays');

SELECT * FROM finish();
ROLLBACK;
