-- Baselines the native inbox functions are measured against (bench/inbox loads this; it needs
-- the extension: the tables are copied from whizbang's and partitions come from
-- whizbang.partition_of, so every method writes the same rows).
--
-- Tables. Every method writes into its own copy of whizbang's inbox tables, made with
-- LIKE ... INCLUDING ALL (columns, collations, defaults, constraints, indexes, partial indexes,
-- storage) plus the same reloptions (fillfactor), so no method benefits from another's rows or
-- caches and every method maintains the same indexes:
--   bench.ib_<m>_dedup  = whizbang.wh_message_deduplication
--   bench.ib_<m>_inbox  = whizbang.wh_inbox        (the message)
--   bench.ib_<m>_work   = whizbang.wh_inbox_work   (its work state; only while it is a table)
-- for m = plpgsql (a), plain (b), copy (c); and bench.ib_cycle_inbox, a one-table queue, for the
-- claim-cycle references (r) and (l).
--
-- Both shapes of whizbang (issue 31): up to 0.13.0 the work state is a table of its own,
-- whizbang.wh_inbox_work; once it moves into wh_inbox (its columns appended there) there is no
-- work table to copy, and the peers write one wh_inbox-like row that carries the work columns
-- (partition_number, scheduled_for; the others take their defaults), as the seed does. The work
-- copies are made only when whizbang.wh_inbox_work exists as a table; (a) is created for the
-- shape found; bench/inbox.cpp reads the shape too.
--
-- bench.ib_cycle_inbox is a one-table queue in both shapes (issue 31: (r) is "a one-table FOR
-- UPDATE SKIP LOCKED + DELETE queue"): a copy of wh_inbox, plus, while wh_inbox_work is a table,
-- its columns and its indexes other than the primary key (the due index the claim uses).
--
-- The seed keeps message and work state in one wh_inbox table. While whizbang has two, the store
-- baselines use whizbang's two tables instead, so that all methods do the same writes per new message: one dedup row,
-- one message row, one work row and the same index entries (dedup: primary key + first_seen_at;
-- message: primary key; work: primary key + the partial due index). A one-table baseline
-- would write one heap row and one primary-key entry less per message; the ratios would then
-- mix the cost of the two-table design into the cost of the implementation.
--
--   (a) bench.store_inbox_messages_plpgsql: the seed's PL/pgSQL loop (seed 000,
--       021_StoreInboxMessages.sql): per element of jsonb_array_elements one INSERT into the
--       dedup table ON CONFLICT ON CONSTRAINT ... DO NOTHING, GET DIAGNOSTICS ROW_COUNT, and
--       if new: the partition, the INSERT of the message (here: message row + work row, see
--       above) and RETURN QUERY of the result row.
--   (b) the plain set-based statement and (c) COPY are prepared / sent by the driver
--       (bench/inbox.cpp); (r), the claim-cycle reference, too.
--
-- Not in the baselines (whizbang does them; none is exercised by the benchmark's messages):
-- stream numbering (wh_inbox_streams; the messages have no StreamId), pre-leasing to an
-- instance (p_instance_id is NULL), the replay-horizon check of SentAt (every SentAt is recent)
-- and delivery counting of duplicates (every message is new).

CREATE SCHEMA IF NOT EXISTS bench;

-- Whether whizbang's work state is a table of its own (up to 0.13.0).
CREATE FUNCTION pg_temp.work_table() RETURNS boolean LANGUAGE sql AS $$
  SELECT EXISTS (SELECT FROM pg_class WHERE oid = to_regclass('whizbang.wh_inbox_work') AND relkind = 'r')
$$;

DO $$
DECLARE
  m text;
  pair text[];
  src regclass;
  opts text[];
  col record;
  idx text;
BEGIN
  DROP TABLE IF EXISTS bench.ib_plpgsql_work, bench.ib_plain_work, bench.ib_copy_work, bench.ib_cycle_work CASCADE;
  FOREACH pair SLICE 1 IN ARRAY ARRAY[
      ['ib_plpgsql_dedup', 'whizbang.wh_message_deduplication'], ['ib_plpgsql_inbox', 'whizbang.wh_inbox'],
      ['ib_plpgsql_work', 'whizbang.wh_inbox_work'],
      ['ib_plain_dedup', 'whizbang.wh_message_deduplication'], ['ib_plain_inbox', 'whizbang.wh_inbox'],
      ['ib_plain_work', 'whizbang.wh_inbox_work'],
      ['ib_copy_dedup', 'whizbang.wh_message_deduplication'], ['ib_copy_inbox', 'whizbang.wh_inbox'],
      ['ib_copy_work', 'whizbang.wh_inbox_work'],
      ['ib_cycle_inbox', 'whizbang.wh_inbox']] LOOP
    m := pair[1];
    CONTINUE WHEN pair[2] = 'whizbang.wh_inbox_work' AND NOT pg_temp.work_table();
    src := pair[2]::regclass;
    EXECUTE format('DROP TABLE IF EXISTS bench.%I CASCADE', m);
    EXECUTE format('CREATE TABLE bench.%I (LIKE %s INCLUDING ALL)', m, src);
    SELECT reloptions INTO opts FROM pg_class WHERE oid = src;
    IF opts IS NOT NULL THEN
      EXECUTE format('ALTER TABLE bench.%I SET (%s)', m, array_to_string(opts, ', '));
    END IF;
    -- Since 0.12.0 the dedup records are generations of a partitioned table with no key of its
    -- own (each generation has it): LIKE copies none, so the peers get what one generation has:
    -- its primary key, nothing else.
    IF (SELECT relkind FROM pg_class WHERE oid = src) = 'p' THEN
      EXECUTE format('ALTER TABLE bench.%I ADD CONSTRAINT %I PRIMARY KEY (message_id, consumer) WITH (fillfactor = 90)',
                     m, m || '_pkey');
    END IF;
  END LOOP;
  -- The one-table queue: the work table's columns and indexes (but its key) join the message row.
  IF pg_temp.work_table() THEN
    FOR col IN
      SELECT a.attname, format_type(a.atttypid, a.atttypmod) AS type, a.attnotnull, pg_get_expr(d.adbin, d.adrelid) AS def,
             (SELECT c.collname FROM pg_collation c WHERE c.oid = a.attcollation AND a.attcollation <> 100) AS coll
        FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
       WHERE a.attrelid = 'whizbang.wh_inbox_work'::regclass AND a.attnum > 0 AND NOT a.attisdropped
         AND NOT EXISTS (SELECT FROM pg_attribute i WHERE i.attrelid = 'whizbang.wh_inbox'::regclass
                                                      AND i.attname = a.attname AND NOT i.attisdropped)
       ORDER BY a.attnum
    LOOP
      EXECUTE format('ALTER TABLE bench.ib_cycle_inbox ADD COLUMN %I %s%s%s%s', col.attname, col.type,
                     CASE WHEN col.coll IS NULL THEN '' ELSE format(' COLLATE %I', col.coll) END,
                     CASE WHEN col.def IS NULL THEN '' ELSE ' DEFAULT ' || col.def END,
                     CASE WHEN col.attnotnull THEN ' NOT NULL' ELSE '' END);
    END LOOP;
    FOR idx IN SELECT pg_get_indexdef(indexrelid) FROM pg_index
                WHERE indrelid = 'whizbang.wh_inbox_work'::regclass AND NOT indisprimary LOOP
      EXECUTE regexp_replace(idx, '^CREATE (UNIQUE )?INDEX \S+ ON \S+ ', 'CREATE \1INDEX ON bench.ib_cycle_inbox ');
    END LOOP;
  END IF;
END
$$;

-- (a) The seed's loop. Same signature and result as whizbang.store_inbox_messages. Written for
-- the shape found (the DO block below fills in the message's insert): two inserts (message row,
-- work row) while whizbang has a work table, else one row carrying the work columns.
DO $create$
DECLARE
  body text := $body$
CREATE OR REPLACE FUNCTION bench.store_inbox_messages_plpgsql(
  p_messages        jsonb,
  p_instance_id     uuid        DEFAULT NULL,
  p_lease_expiry    timestamptz DEFAULT NULL,
  p_now             timestamptz DEFAULT now(),
  p_partition_count int         DEFAULT 10000,
  p_consumer        text        DEFAULT '')
RETURNS TABLE(message_id uuid, stream_id uuid, was_newly_created boolean)
LANGUAGE plpgsql
AS $$
DECLARE
  v_msg       record;
  v_was_new   int;
  v_partition int;
BEGIN
  FOR v_msg IN
    SELECT (e->>'MessageId')::uuid                  AS msg_id,
           e->>'HandlerName'                        AS handler_name,
           e->>'MessageType'                        AS message_type,
           e->'Envelope'                            AS envelope,
           e->'Metadata'                            AS metadata,
           e->'Scope'                               AS scope,
           (e->>'StreamId')::uuid                   AS stream_id,
           coalesce((e->>'IsEvent')::boolean, false) AS is_event,
           (e->>'SentAt')::timestamptz              AS sent_at,
           (e->>'ScheduledFor')::timestamptz        AS scheduled_for
      FROM jsonb_array_elements(p_messages) AS e
  LOOP
    -- Deduplication: if message_id is already on record, this inserts nothing.
    INSERT INTO bench.ib_plpgsql_dedup (consumer, message_id, first_seen_at)
    VALUES (p_consumer, v_msg.msg_id, p_now)
    ON CONFLICT ON CONSTRAINT ib_plpgsql_dedup_pkey DO NOTHING;

    GET DIAGNOSTICS v_was_new = ROW_COUNT;

    IF v_was_new = 1 THEN
      -- Partition for stream-based load balancing; stored without a lease (claimable now).
      v_partition := whizbang.partition_of(coalesce(v_msg.stream_id, v_msg.msg_id), p_partition_count);

      @insert@

      RETURN QUERY SELECT v_msg.msg_id, v_msg.stream_id, (v_was_new = 1);
    END IF;
  END LOOP;
END
$$;
$body$;
  two_tables text := $i$INSERT INTO bench.ib_plpgsql_inbox (consumer, message_id, handler_name, message_type, envelope, metadata,
                                          scope, stream_id, is_event, sent_at, received_at)
      VALUES (p_consumer, v_msg.msg_id, v_msg.handler_name, v_msg.message_type, v_msg.envelope, v_msg.metadata,
              v_msg.scope, v_msg.stream_id, v_msg.is_event, v_msg.sent_at, p_now)
      ON CONFLICT ON CONSTRAINT ib_plpgsql_inbox_pkey DO NOTHING;

      INSERT INTO bench.ib_plpgsql_work (consumer, message_id, stream_id, partition_number, scheduled_for)
      VALUES (p_consumer, v_msg.msg_id, v_msg.stream_id, v_partition, coalesce(v_msg.scheduled_for, p_now))
      ON CONFLICT ON CONSTRAINT ib_plpgsql_work_pkey DO NOTHING;$i$;
  one_table text := $i$INSERT INTO bench.ib_plpgsql_inbox (consumer, message_id, handler_name, message_type, envelope, metadata,
                                          scope, stream_id, is_event, sent_at, received_at, partition_number,
                                          scheduled_for)
      VALUES (p_consumer, v_msg.msg_id, v_msg.handler_name, v_msg.message_type, v_msg.envelope, v_msg.metadata,
              v_msg.scope, v_msg.stream_id, v_msg.is_event, v_msg.sent_at, p_now, v_partition,
              coalesce(v_msg.scheduled_for, p_now))
      ON CONFLICT ON CONSTRAINT ib_plpgsql_inbox_pkey DO NOTHING;$i$;
BEGIN
  EXECUTE replace(body, '@insert@', CASE WHEN pg_temp.work_table() THEN two_tables ELSE one_table END);
END
$create$;

-- The copies must match whizbang's tables column for column, index for index and in their
-- reloptions; stop here if they do not.
CREATE FUNCTION pg_temp.table_shape(t regclass) RETURNS text LANGUAGE sql AS $$
  SELECT concat_ws(' | ',
    (SELECT string_agg(format('%s %s %s %s %s', attname, format_type(atttypid, atttypmod), attnotnull,
                              attcollation, pg_get_expr(d.adbin, d.adrelid)), ', ' ORDER BY attnum)
       FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
      WHERE attrelid = t AND attnum > 0 AND NOT attisdropped),
    (SELECT string_agg(def, ', ' ORDER BY def COLLATE "C")
       FROM (SELECT regexp_replace(pg_get_indexdef(indexrelid), 'INDEX \S+ ON \S+ ', 'INDEX ON ') AS def
               FROM pg_index WHERE indrelid = t) i),
    (SELECT array_to_string(reloptions, ',') FROM pg_class WHERE oid = t))
$$;

DO $$
DECLARE
  pair text[];
BEGIN
  FOREACH pair SLICE 1 IN ARRAY ARRAY[
      ['bench.ib_plpgsql_dedup', 'whizbang.wh_message_deduplication'], ['bench.ib_plpgsql_inbox', 'whizbang.wh_inbox'],
      ['bench.ib_plpgsql_work', 'whizbang.wh_inbox_work'],
      ['bench.ib_plain_dedup', 'whizbang.wh_message_deduplication'], ['bench.ib_plain_inbox', 'whizbang.wh_inbox'],
      ['bench.ib_plain_work', 'whizbang.wh_inbox_work'],
      ['bench.ib_copy_dedup', 'whizbang.wh_message_deduplication'], ['bench.ib_copy_inbox', 'whizbang.wh_inbox'],
      ['bench.ib_copy_work', 'whizbang.wh_inbox_work'],
      ['bench.ib_cycle_inbox', 'whizbang.wh_inbox']] LOOP
    CONTINUE WHEN pair[2] = 'whizbang.wh_inbox_work' AND NOT pg_temp.work_table();
    -- The one-table queue has the work table's columns and indexes too, checked below.
    CONTINUE WHEN pair[1] = 'bench.ib_cycle_inbox' AND pg_temp.work_table();
    -- A partitioned source (the dedup generations) has no index of its own: columns only.
    IF (SELECT relkind FROM pg_class WHERE oid = pair[2]::regclass) = 'p' THEN
      IF split_part(pg_temp.table_shape(pair[1]::regclass), ' | ', 1)
         IS DISTINCT FROM split_part(pg_temp.table_shape(pair[2]::regclass), ' | ', 1) THEN
        RAISE EXCEPTION '% differs from % in its columns', pair[1], pair[2];
      END IF;
    ELSIF pg_temp.table_shape(pair[1]::regclass) IS DISTINCT FROM pg_temp.table_shape(pair[2]::regclass) THEN
      RAISE EXCEPTION '% differs from %', pair[1], pair[2]
        USING DETAIL = format('expected: %s; got: %s', pg_temp.table_shape(pair[2]::regclass),
                              pg_temp.table_shape(pair[1]::regclass));
    END IF;
  END LOOP;
END
$$;

-- The one-table queue next to the two tables: every column of both, the work table's due index.
DO $$
BEGIN
  IF pg_temp.work_table() AND EXISTS (
       SELECT attname FROM pg_attribute WHERE attrelid IN ('whizbang.wh_inbox'::regclass, to_regclass('whizbang.wh_inbox_work'))
          AND attnum > 0 AND NOT attisdropped
       EXCEPT SELECT attname FROM pg_attribute WHERE attrelid = 'bench.ib_cycle_inbox'::regclass) THEN
    RAISE EXCEPTION 'bench.ib_cycle_inbox lacks columns of whizbang.wh_inbox / wh_inbox_work';
  END IF;
END
$$;
