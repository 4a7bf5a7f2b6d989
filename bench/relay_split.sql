-- Where a backend's time goes in emit_outbox_messages (bench/relay runs this after the driver,
-- in the same cluster; needs the extension and a logical slot; psql -v n=200 -v reps=3). One
-- session and one DO block, so one transaction: no commit and no fsync per batch in the figures.
-- The same batch of 100 messages (~1 KB envelopes) goes through each step :n times, the steps
-- alternated in :reps rounds; one markdown row per step: the median us per message over the
-- rounds, the range, and WAL bytes per message. The steps peel emit_outbox_messages apart:
--   parse        p_messages text -> jsonb (what $1::jsonb does before emit is called)
--   envelope     jsonb -> each element's Envelope back to text (what emit does per message
--                before it writes the message)
--   emit_jsonb   emit_outbox_messages on the jsonb already parsed: its own work + the WAL records
--   emit_text    emit_outbox_messages($1::jsonb) from text, as the benchmark's clients call it
--   floor        pg_logical_emit_message(true, 'whizbang.outbox', text) per message, the message
--                text given (no JSON work at all): the WAL record alone
\set ON_ERROR_STOP 1
SET client_min_messages = warning;
SET split.n = :n;
SET split.reps = :reps;
CREATE TEMP TABLE split_batch AS
SELECT pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object('MessageId', whizbang.uuid_v7(), 'Destination', 'orders.order-placed',
         'MessageType', 'Orders.Contracts.OrderPlaced, Orders.Contracts',
         'Envelope', pg_catalog.jsonb_build_object('MessageId', gen_random_uuid(), 'CorrelationId', gen_random_uuid(),
           'Payload', pg_catalog.jsonb_build_object('OrderId', gen_random_uuid(),
             'Lines', (SELECT pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object('Sku', 'SKU-' || (random() * 99999)::int,
                        'Quantity', (random() * 9)::int, 'UnitPrice', round((random() * 500)::numeric, 2)))
                         FROM generate_series(1, 14 + 0 * k)),
             'Note', md5(random()::text) || md5(random()::text))),
         'Metadata', '{"TenantId":"tenant-042","Transport":"rabbitmq","Attempt":1}'::jsonb, 'IsEvent', true))::text AS t
  FROM generate_series(1, 100) k;
CREATE TEMP TABLE split_result (step text, rep int, us_per_msg float8, wal_per_msg float8);

DO $$
DECLARE
  t text; j jsonb; lines text; t0 timestamptz; w0 pg_lsn; c bigint;
  n int := current_setting('split.n')::int; reps int := current_setting('split.reps')::int;
  steps text[] := ARRAY['parse', 'envelope', 'emit_jsonb', 'emit_text', 'floor'];
  s text;
BEGIN
  SELECT b.t INTO t FROM split_batch b;
  j := t::jsonb;
  SELECT string_agg(e::text, E'\n') INTO lines FROM jsonb_array_elements(j) e;
  FOR r IN 1..reps LOOP
    FOREACH s IN ARRAY steps LOOP
      w0 := pg_current_wal_insert_lsn();
      t0 := clock_timestamp();
      FOR i IN 1..n LOOP
        CASE s
          WHEN 'parse' THEN SELECT pg_catalog.jsonb_array_length(t::jsonb) INTO c;
          WHEN 'envelope' THEN SELECT sum(length((e->'Envelope')::text)) INTO c FROM jsonb_array_elements(j) e;
          WHEN 'emit_jsonb' THEN SELECT count(*) INTO c FROM whizbang.emit_outbox_messages(j);
          WHEN 'emit_text' THEN SELECT count(*) INTO c FROM whizbang.emit_outbox_messages(t::jsonb);
          WHEN 'floor' THEN SELECT count(pg_logical_emit_message(true, 'whizbang.outbox', m)) INTO c
                              FROM unnest(string_to_array(lines, E'\n')) m;
        END CASE;
      END LOOP;
      INSERT INTO split_result VALUES (s, r, extract(epoch FROM clock_timestamp() - t0) * 1e6 / (n * 100),
                                       pg_wal_lsn_diff(pg_current_wal_insert_lsn(), w0) / (n * 100));
    END LOOP;
  END LOOP;
END
$$;
\pset format unaligned
\pset tuples_only on
\pset footer off
SELECT '| ' || step || ' | ' || round(percentile_cont(0.5) WITHIN GROUP (ORDER BY us_per_msg)::numeric, 2)
       || ' | ' || round(min(us_per_msg)::numeric, 2) || '-' || round(max(us_per_msg)::numeric, 2)
       || ' | ' || round(percentile_cont(0.5) WITHIN GROUP (ORDER BY wal_per_msg)::numeric) || ' |'
  FROM split_result
 GROUP BY step
 ORDER BY array_position(ARRAY['parse', 'envelope', 'emit_jsonb', 'emit_text', 'floor'], step);
