-- fail_work, backoff, max_attempts, dead letters and retry_dead_letters (DESIGN §3.4).
-- Consumers 'retry_*', ids 1e000000-.... The retry delay is random in [0.75, 1.0] of
-- min(retry_base_seconds · 2^(attempts−1), retry_max_seconds): shown as "in the window".
SET client_min_messages = warning;
\set SHOW_CONTEXT never

CREATE TEMP TABLE c (message_id uuid, lease_token bigint);
CREATE FUNCTION pg_temp.tok(p_message_id uuid, p_nth int) RETURNS bigint LANGUAGE sql
  AS $$ SELECT lease_token FROM c WHERE message_id = p_message_id ORDER BY lease_token OFFSET p_nth - 1 LIMIT 1 $$;
CREATE FUNCTION pg_temp.claim(p_now timestamptz, p_consumer text)
  RETURNS TABLE(pos bigint, message_id uuid, attempts int) LANGUAGE sql AS $$
  WITH r AS (SELECT * FROM whizbang.claim_work('1e000000-aaaa-4000-8000-000000000001', 'inbox', 100, 60,
                                               p_now => p_now, p_consumer => p_consumer) WITH ORDINALITY),
       rec AS (INSERT INTO c SELECT message_id, lease_token FROM r)
  SELECT ordinality, message_id, attempts FROM r $$;
-- fail_work of one message with its latest token; the delay shown as within its window.
CREATE FUNCTION pg_temp.fail(p_message_id uuid, p_now timestamptz, p_consumer text, p_error text,
                             p_retryable boolean DEFAULT NULL, p_expected_delay_s int DEFAULT NULL)
  RETURNS TABLE(message_id uuid, outcome text, delay_in_window boolean) LANGUAGE sql AS $$
  SELECT f.message_id, f.outcome,
         f.scheduled_for BETWEEN p_now + 0.75 * make_interval(secs => p_expected_delay_s)
                             AND p_now + make_interval(secs => p_expected_delay_s)
    FROM whizbang.fail_work('inbox', ARRAY[p_message_id], ARRAY[p_error],
                            ARRAY[(SELECT max(lease_token) FROM c WHERE c.message_id = p_message_id)],
                            ARRAY[p_retryable], p_consumer, p_now) f $$;

INSERT INTO whizbang.wh_settings (setting_key, setting_value) VALUES
  ('max_attempts', '3'), ('retry_base_seconds', '10'), ('retry_max_seconds', '300');

-- A store makes the dedup generation of its p_now only up to one period ahead of the clock, and
-- none that would already have left the window (0.13.0): the generations of this file's
-- simulated day are made first, as an application simulating another time would.
SELECT count(*) > 0 AS generations_made FROM whizbang.perform_maintenance(p_now => '2030-04-01 00:00:00Z');
-- r1 and r2 of one stream. Delivery 1 of r1 fails: retry_scheduled 7.5 to 10 s later, the
-- error kept; r2 waits behind the retry.
SELECT count(*) AS stored FROM whizbang.store_inbox_messages('[
  {"MessageId": "1e000000-0000-7000-8000-0000000000a1", "StreamId": "1e5e0000-0000-7000-8000-00000000000a",
   "HandlerName": "mail", "MessageType": "SendWelcome", "Envelope": {"to": "ann@example.com"}},
  {"MessageId": "1e000000-0000-7000-8000-0000000000a2", "StreamId": "1e5e0000-0000-7000-8000-00000000000a",
   "HandlerName": "mail", "MessageType": "SendReceipt", "Envelope": {"to": "ann@example.com"}}
]', p_now => '2030-04-01 00:00:00Z', p_consumer => 'retry_mail');
SELECT * FROM pg_temp.claim('2030-04-01 00:00:00Z', 'retry_mail') ORDER BY pos;
SELECT * FROM pg_temp.fail('1e000000-0000-7000-8000-0000000000a1', '2030-04-01 00:00:00Z', 'retry_mail',
                           'SMTP 451: try again later', NULL, 10);
SELECT message_id, last_error FROM whizbang.wh_inbox WHERE consumer = 'retry_mail' AND last_error IS NOT NULL;
SELECT * FROM pg_temp.claim('2030-04-01 00:00:05Z', 'retry_mail') ORDER BY pos;
-- Delivery 2 fails: 15 to 20 s. Delivery 3 (= max_attempts) fails: dead_lettered.
SELECT * FROM pg_temp.claim('2030-04-01 00:01:00Z', 'retry_mail') ORDER BY pos;
SELECT * FROM pg_temp.fail('1e000000-0000-7000-8000-0000000000a1', '2030-04-01 00:01:00Z', 'retry_mail',
                           'SMTP 451: try again later', NULL, 20);
SELECT * FROM pg_temp.claim('2030-04-01 00:02:00Z', 'retry_mail') ORDER BY pos;
SELECT message_id, outcome, scheduled_for FROM whizbang.fail_work('inbox', '{1e000000-0000-7000-8000-0000000000a1}',
    '{"SMTP 451: try again later"}', ARRAY[pg_temp.tok('1e000000-0000-7000-8000-0000000000a1', 3)], NULL,
    'retry_mail', '2030-04-01 00:02:00Z');
-- The dead letter keeps the whole message, its deliveries and its last error.
SELECT source, consumer, message_id, handler_name, destination, message_type, envelope, stream_id, attempts,
       last_error, dead_lettered_at = '2030-04-01 00:02:00Z' AS dead_lettered_at_p_now
  FROM whizbang.wh_dead_letters WHERE consumer = 'retry_mail' ORDER BY message_id;
-- A dead letter leaves its stream and the rest of the run stays the caller's: r2, handed out
-- with r1, still completes or fails with that token. It fails in a way a retry cannot fix.
SELECT * FROM pg_temp.fail('1e000000-0000-7000-8000-0000000000a2', '2030-04-01 00:02:10Z', 'retry_mail',
                           'invalid address', false);
SELECT message_id, attempts, last_error FROM whizbang.wh_dead_letters WHERE consumer = 'retry_mail' ORDER BY message_id;
SELECT count(*) AS work_left FROM whizbang.wh_inbox WHERE consumer = 'retry_mail';

-- retry_dead_letters puts r1 back as fresh work (delivery 1 again) and deletes its dead
-- letter; a second call finds nothing. The dedup record was kept: a redelivery is a duplicate.
SELECT whizbang.retry_dead_letters(ARRAY(SELECT dead_letter_id FROM whizbang.wh_dead_letters
                                          WHERE consumer = 'retry_mail' AND message_id = '1e000000-0000-7000-8000-0000000000a1'));
SELECT message_id FROM whizbang.wh_dead_letters WHERE consumer = 'retry_mail' ORDER BY message_id;
SELECT * FROM pg_temp.claim('2030-04-01 00:03:00Z', 'retry_mail') ORDER BY pos;
SELECT outcome FROM whizbang.inbox_receive('[
  {"MessageId": "1e000000-0000-7000-8000-0000000000a1", "StreamId": "1e5e0000-0000-7000-8000-00000000000a",
   "HandlerName": "mail", "MessageType": "SendWelcome", "Envelope": {"to": "ann@example.com"}}
]', 'retry_mail', '2030-04-01 00:03:00Z');
SELECT whizbang.retry_dead_letters(ARRAY[-1]::bigint[]) AS unknown_id,
       whizbang.retry_dead_letters('{}') AS empty,
       whizbang.retry_dead_letters(NULL) AS null_array;
SELECT whizbang.retry_dead_letters(ARRAY[NULL]::bigint[]);
\echo :SQLSTATE

-- A claim dead-letters a message instead of handing it out for the (max_attempts + 1)st time:
-- delivered 3 times by claims whose leases lapsed, the 4th claim returns nothing.
SELECT count(*) AS stored FROM whizbang.store_inbox_messages('[
  {"MessageId": "1e000000-0000-7000-8000-0000000000b1", "HandlerName": "h", "MessageType": "T", "Envelope": {}}
]', p_now => '2030-04-01 00:00:00Z', p_consumer => 'retry_stalled');
SELECT * FROM pg_temp.claim('2030-04-01 00:00:00Z', 'retry_stalled') ORDER BY pos;
SELECT * FROM pg_temp.claim('2030-04-01 00:01:00Z', 'retry_stalled') ORDER BY pos;
SELECT * FROM pg_temp.claim('2030-04-01 00:02:00Z', 'retry_stalled') ORDER BY pos;
SELECT * FROM pg_temp.claim('2030-04-01 00:03:00Z', 'retry_stalled') ORDER BY pos;
SELECT message_id, attempts, last_error, dead_lettered_at = '2030-04-01 00:03:00Z' AS dead_lettered_at_claim
  FROM whizbang.wh_dead_letters WHERE consumer = 'retry_stalled';

-- The delay is capped by retry_max_seconds (here 20): delivery 3 waits 15 to 20 s, not 30 to 40.
INSERT INTO whizbang.wh_settings (setting_key, setting_value) VALUES ('retry_max_seconds', '20'), ('max_attempts', '10');
SELECT count(*) AS stored FROM whizbang.store_inbox_messages('[
  {"MessageId": "1e000000-0000-7000-8000-0000000000c1", "HandlerName": "h", "MessageType": "T", "Envelope": {}}
]', p_now => '2030-04-01 00:00:00Z', p_consumer => 'retry_cap');
SELECT * FROM pg_temp.claim('2030-04-01 00:00:00Z', 'retry_cap') ORDER BY pos;
SELECT * FROM pg_temp.fail('1e000000-0000-7000-8000-0000000000c1', '2030-04-01 00:00:00Z', 'retry_cap', 'timeout', NULL, 10);
SELECT * FROM pg_temp.claim('2030-04-01 00:01:00Z', 'retry_cap') ORDER BY pos;
SELECT * FROM pg_temp.fail('1e000000-0000-7000-8000-0000000000c1', '2030-04-01 00:01:00Z', 'retry_cap', 'timeout', NULL, 20);
SELECT * FROM pg_temp.claim('2030-04-01 00:02:00Z', 'retry_cap') ORDER BY pos;
SELECT * FROM pg_temp.fail('1e000000-0000-7000-8000-0000000000c1', '2030-04-01 00:02:00Z', 'retry_cap', 'timeout', NULL, 20);

-- Bad arguments.
SELECT * FROM whizbang.fail_work('inbox', '{1e000000-0000-7000-8000-0000000000c1}', '{"a","b"}', NULL, NULL, 'retry_cap');
\echo :SQLSTATE
SELECT * FROM whizbang.fail_work('inbox', '{1e000000-0000-7000-8000-0000000000c1}', '{"a"}', NULL, '{true,false}',
                                 'retry_cap');
\echo :SQLSTATE

UPDATE whizbang.wh_settings s SET setting_value = d.default_value
  FROM whizbang.wh_setting_defaults d
 WHERE d.setting_key = s.setting_key AND s.setting_key IN ('max_attempts', 'retry_base_seconds', 'retry_max_seconds');
