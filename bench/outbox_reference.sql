-- Baselines the native outbox functions are measured against (bench/outbox loads this; it
-- needs the extension: partitions come from whizbang.partition_of, so every method writes the
-- same partition numbers).
--
-- The work measured is one relay cycle: store a batch of messages (the application's
-- transaction), claim up to n of them with a lease (the relay), complete the published ones.
-- Every method does it with three statements, one transaction each, and every method's
-- statements are listed in bench.outbox_methods below; the driver (bench/outbox.cpp) reads
-- and prepares them, so this file is the one place that says what each method runs.
--
--   native      whizbang.store_outbox_messages, claim_work(.., 'outbox', ..),
--               complete_outbox_published(ids)            (the seed's completion contract)
--   native_cw   the same, completing with complete_work('outbox', ids, tokens) (fenced)
--   plpgsql     (a) PL/pgSQL functions in the style of the seed's store function
--   sql         (b) one plain SQL statement per step
--               (a) and (b) on a message table + a work table (whizbang's layout until 0.13.0)
--   plpgsql_1t, sql_1t   (a) and (b) on the seed's one-table outbox
--
-- Table shape. Since 0.14.0 whizbang keeps one row per message: wh_outbox carries the message
-- and its work state (docs/internals.md "One row per message (0.14.0)"). Until 0.13.0 it kept
-- the message (wh_outbox, immutable) apart from its work row (wh_outbox_work, narrow,
-- fillfactor 70). The references keep both shapes, each a baseline of its own, defined below
-- (not copied from whizbang, which no longer has the two-table one):
--   - plpgsql and sql: the 0.13.0 message + work tables, written out as 0.13.0 had them: two heap
--     rows and three index entries per message (message key; work key and due entry), two
--     DELETEs per completion, but a claim rewrites only the ~100-byte work row;
--   - plpgsql_1t and sql_1t: the seed's one table (one heap row, key and due entry per message,
--     one DELETE), where a claim rewrites the whole ~1.3 KB row to set its lease. This is the
--     shape native now has (with the row lease store; with the shared-memory lease store a
--     native claim writes nothing to the row).
-- So the ratios against plpgsql/sql compare whizbang's implementation AND its 0.14.0 table
-- design against the old design done in plain SQL; the ratios against the _1t methods are the
-- like-for-like ones on table shape. Before 0.14.0 (runs 2026-11-29T1818Z and T1821Z in
-- bench/results/) the two shapes were level within the noise on server CPU per message and on
-- messages/s, and the one-table shape wrote 1.55x the WAL per message (3,830 against 2,430
-- bytes).

-- What (a) and (b) do NOT do, and whizbang does (none is exercised by the benchmark's messages,
-- which have no StreamId, no ScheduledFor in the future and unique ids, and are completed on
-- their first attempt; the native functions still pay for the checks):
--   - per-stream order: the references claim only rows without a stream (that is what their
--     index, the same as whizbang's due index, covers); whizbang also looks for stream heads and
--     their followers on every claim (DESIGN §3.4), and numbers streams on store;
--   - pre-leased rows (p_instance_id of the store; whizbang looks for them on every claim);
--   - fencing: the references hand out a token per claim (a sequence, as whizbang does) but
--     their completion does not check it; native completes the same way with
--     complete_outbox_published (the seed's contract: no lease check), and native_cw is the
--     fenced completion (complete_work with tokens, lease_lost when a token is stale);
--   - dead letters: no max_attempts check on claim;
--   - canonical lock order: (a) inserts in input order and (b) in whatever order the plan
--     gives, so two overlapping batches can deadlock (the seed's known failure); native sorts
--     by message id (DESIGN §1.5);
--   - a repeated id inside one batch: (b) would insert its work row twice and fail; (a) and
--     native store its first occurrence and answer false for the others;
--   - debug mode, the outbox_notify wake-up (off by default, as here).

CREATE SCHEMA IF NOT EXISTS bench;

-- Fencing tokens of the references' claims: one per claim, strictly increasing (whizbang's
-- is whizbang.wh_lease_token_seq).
DROP SEQUENCE IF EXISTS bench.ob_lease_token_seq;
CREATE SEQUENCE bench.ob_lease_token_seq AS bigint;

-- The two-table baseline: whizbang's layout until 0.13.0, written out here (whizbang no longer
-- has it: 0.14.0 moved the work columns into wh_outbox and dropped wh_outbox_work). Message
-- table: 0.13.0's wh_outbox (immutable rows; partition_number nullable, as 0.10.0 added it,
-- and left empty: the work row carries it). Work table: 0.13.0's wh_outbox_work (narrow,
-- fillfactor 70 so lease updates can stay HOT; key (message_id, consumer); the due, stream and
-- processed indexes). Both statements as sql/whizbang--0.13.0.sql has them, renamed.
DO $$
DECLARE
  t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['ob_plpgsql', 'ob_sql'] LOOP
    EXECUTE format('DROP TABLE IF EXISTS bench.%I, bench.%I CASCADE', t || '_outbox', t || '_work');
    EXECUTE format($t$
      CREATE TABLE bench.%1$I (
        message_id       uuid        NOT NULL,
        destination      text        NOT NULL,
        message_type     text        NOT NULL,
        event_data       jsonb       NOT NULL,
        metadata         jsonb,
        scope            jsonb,
        stream_id        uuid,
        is_event         boolean     NOT NULL DEFAULT false,
        created_at       timestamptz NOT NULL,
        partition_number integer,
        CONSTRAINT %2$I PRIMARY KEY (message_id))$t$, t || '_outbox', t || '_outbox_pkey');
    EXECUTE format($t$
      CREATE TABLE bench.%1$I (
        consumer         text COLLATE "C" NOT NULL DEFAULT '' CHECK (consumer = ''),
        message_id       uuid        NOT NULL,
        stream_id        uuid,
        stream_seq       bigint,
        partition_number integer     NOT NULL,
        scheduled_for    timestamptz NOT NULL,
        attempts         integer     NOT NULL DEFAULT 0,
        lease_instance   uuid,
        lease_token      bigint,
        lease_expiry     timestamptz,
        last_error       text,
        processed_at     timestamptz,
        CONSTRAINT %2$I PRIMARY KEY (message_id, consumer))
      WITH (fillfactor = 70)$t$, t || '_work', t || '_work_pkey');
    EXECUTE format('CREATE INDEX %I ON bench.%I (scheduled_for) WHERE processed_at IS NULL AND stream_id IS NULL',
                   t || '_work_due', t || '_work');
    EXECUTE format('CREATE INDEX %I ON bench.%I (consumer, stream_id, stream_seq)'
                   ' WHERE stream_id IS NOT NULL AND processed_at IS NULL', t || '_work_stream', t || '_work');
    EXECUTE format('CREATE INDEX %I ON bench.%I (processed_at) WHERE processed_at IS NOT NULL',
                   t || '_work_processed', t || '_work');
  END LOOP;
END
$$;

-- The seed's one-table outbox: the message columns and the delivery state in one row (the
-- shape whizbang's wh_outbox took in 0.14.0, without its consumer column and its stream and
-- processed indexes); primary key and due index as whizbang's; default fillfactor.
DO $$
DECLARE
  t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['ob_plpgsql_1t', 'ob_sql_1t'] LOOP
    EXECUTE format('DROP TABLE IF EXISTS bench.%I CASCADE', t);
    EXECUTE format($t$
      CREATE TABLE bench.%1$I (
        message_id       uuid        NOT NULL,
        destination      text        NOT NULL,
        message_type     text        NOT NULL,
        event_data       jsonb       NOT NULL,
        metadata         jsonb,
        scope            jsonb,
        stream_id        uuid,
        is_event         boolean     NOT NULL DEFAULT false,
        created_at       timestamptz NOT NULL,
        partition_number integer     NOT NULL,
        scheduled_for    timestamptz NOT NULL,
        attempts         integer     NOT NULL DEFAULT 0,
        lease_instance   uuid,
        lease_token      bigint,
        lease_expiry     timestamptz,
        last_error       text,
        processed_at     timestamptz,
        CONSTRAINT %2$I PRIMARY KEY (message_id))$t$, t, t || '_pkey');
    EXECUTE format('CREATE INDEX %I ON bench.%I (scheduled_for) WHERE processed_at IS NULL AND stream_id IS NULL',
                   t || '_due', t);
  END LOOP;
END
$$;

-- ---------------------------------------------------------------------------------------------
-- (a) PL/pgSQL, two tables

-- Store: the seed's loop (021_StoreInboxMessages.sql, which 020_StoreOutboxMessages.sql follows
-- without the dedup table): per element of jsonb_array_elements one INSERT ... ON CONFLICT DO
-- NOTHING, GET DIAGNOSTICS ROW_COUNT, and if new the work row; RETURN QUERY of the element's
-- result row. Same signature and result as whizbang.store_outbox_messages (one row per input).
CREATE OR REPLACE FUNCTION bench.store_outbox_messages_plpgsql(
  p_messages        jsonb,
  p_instance_id     uuid        DEFAULT NULL,
  p_lease_expiry    timestamptz DEFAULT NULL,
  p_now             timestamptz DEFAULT now(),
  p_partition_count int         DEFAULT 10000)
RETURNS TABLE(message_id uuid, stream_id uuid, was_newly_created boolean)
LANGUAGE plpgsql
AS $$
DECLARE
  v_msg     record;
  v_was_new int;
BEGIN
  FOR v_msg IN
    SELECT (e->>'MessageId')::uuid                   AS msg_id,
           e->>'Destination'                         AS destination,
           e->>'MessageType'                         AS message_type,
           e->'Envelope'                             AS envelope,
           e->'Metadata'                             AS metadata,
           e->'Scope'                                AS scope,
           (e->>'StreamId')::uuid                    AS stream_id,
           coalesce((e->>'IsEvent')::boolean, false) AS is_event,
           (e->>'ScheduledFor')::timestamptz         AS scheduled_for
      FROM jsonb_array_elements(p_messages) AS e
  LOOP
    -- No dedup table on the outbox side: the primary key decides.
    INSERT INTO bench.ob_plpgsql_outbox (message_id, destination, message_type, event_data, metadata, scope,
                                         stream_id, is_event, created_at)
    VALUES (v_msg.msg_id, v_msg.destination, v_msg.message_type, v_msg.envelope, v_msg.metadata, v_msg.scope,
            v_msg.stream_id, v_msg.is_event, p_now)
    ON CONFLICT ON CONSTRAINT ob_plpgsql_outbox_pkey DO NOTHING;

    GET DIAGNOSTICS v_was_new = ROW_COUNT;

    IF v_was_new = 1 THEN
      INSERT INTO bench.ob_plpgsql_work (consumer, message_id, stream_id, partition_number, scheduled_for)
      VALUES ('', v_msg.msg_id, v_msg.stream_id,
              whizbang.partition_of(coalesce(v_msg.stream_id, v_msg.msg_id), p_partition_count),
              coalesce(v_msg.scheduled_for, p_now));
    END IF;

    RETURN QUERY SELECT v_msg.msg_id, v_msg.stream_id, (v_was_new = 1);
  END LOOP;
END
$$;

-- Claim: lock up to p_max_rows due rows without a live lease, oldest due first, through the
-- due index, skipping rows another claim holds; lease them (attempts + 1, instance, one token
-- per claim, expiry) and return them with their message, in due order, as claim_work's rows.
CREATE OR REPLACE FUNCTION bench.claim_outbox_plpgsql(
  p_instance_id   uuid,
  p_max_rows      int         DEFAULT 100,
  p_lease_seconds int         DEFAULT 300,
  p_now           timestamptz DEFAULT now())
RETURNS TABLE(source text, message_id uuid, stream_id uuid, partition_number int, handler_name text,
              destination text, message_type text, envelope jsonb, metadata jsonb, scope jsonb,
              attempts int, lease_token bigint, lease_expiry timestamptz, consumer text)
LANGUAGE plpgsql
AS $$
DECLARE
  v_ids   uuid[];
  v_token bigint;
BEGIN
  SELECT array_agg(d.message_id) INTO v_ids
    FROM (SELECT w.message_id
            FROM bench.ob_plpgsql_work w
           WHERE w.processed_at IS NULL AND w.stream_id IS NULL AND w.scheduled_for <= p_now
             AND (w.lease_expiry IS NULL OR w.lease_expiry <= p_now)
           ORDER BY w.scheduled_for
           LIMIT p_max_rows
             FOR UPDATE SKIP LOCKED) d;
  IF v_ids IS NULL THEN
    RETURN;
  END IF;
  v_token := nextval('bench.ob_lease_token_seq');
  RETURN QUERY
    WITH c AS (
      UPDATE bench.ob_plpgsql_work w
         SET attempts = w.attempts + 1, lease_instance = p_instance_id, lease_token = v_token,
             lease_expiry = p_now + make_interval(secs => p_lease_seconds)
       WHERE w.consumer = '' AND w.message_id = ANY (v_ids)
      RETURNING w.*)
    SELECT 'outbox'::text, c.message_id, c.stream_id, c.partition_number, NULL::text, o.destination,
           o.message_type, o.event_data, o.metadata, o.scope, c.attempts, c.lease_token, c.lease_expiry, NULL::text
      FROM c JOIN bench.ob_plpgsql_outbox o ON o.message_id = c.message_id
     ORDER BY c.scheduled_for;
END
$$;

-- Complete: the seed's contract (delete, return how many); no lease check.
CREATE OR REPLACE FUNCTION bench.complete_outbox_published_plpgsql(p_ids uuid[])
RETURNS int
LANGUAGE plpgsql
AS $$
DECLARE
  v_count int;
BEGIN
  DELETE FROM bench.ob_plpgsql_work WHERE consumer = '' AND message_id = ANY (p_ids);
  DELETE FROM bench.ob_plpgsql_outbox WHERE message_id = ANY (p_ids);
  GET DIAGNOSTICS v_count = ROW_COUNT;
  RETURN v_count;
END
$$;

-- ---------------------------------------------------------------------------------------------
-- (a) PL/pgSQL, the seed's one table

CREATE OR REPLACE FUNCTION bench.store_outbox_messages_plpgsql_1t(
  p_messages        jsonb,
  p_instance_id     uuid        DEFAULT NULL,
  p_lease_expiry    timestamptz DEFAULT NULL,
  p_now             timestamptz DEFAULT now(),
  p_partition_count int         DEFAULT 10000)
RETURNS TABLE(message_id uuid, stream_id uuid, was_newly_created boolean)
LANGUAGE plpgsql
AS $$
DECLARE
  v_msg     record;
  v_was_new int;
BEGIN
  FOR v_msg IN
    SELECT (e->>'MessageId')::uuid                   AS msg_id,
           e->>'Destination'                         AS destination,
           e->>'MessageType'                         AS message_type,
           e->'Envelope'                             AS envelope,
           e->'Metadata'                             AS metadata,
           e->'Scope'                                AS scope,
           (e->>'StreamId')::uuid                    AS stream_id,
           coalesce((e->>'IsEvent')::boolean, false) AS is_event,
           (e->>'ScheduledFor')::timestamptz         AS scheduled_for
      FROM jsonb_array_elements(p_messages) AS e
  LOOP
    INSERT INTO bench.ob_plpgsql_1t (message_id, destination, message_type, event_data, metadata, scope,
                                     stream_id, is_event, created_at, partition_number, scheduled_for)
    VALUES (v_msg.msg_id, v_msg.destination, v_msg.message_type, v_msg.envelope, v_msg.metadata, v_msg.scope,
            v_msg.stream_id, v_msg.is_event, p_now,
            whizbang.partition_of(coalesce(v_msg.stream_id, v_msg.msg_id), p_partition_count),
            coalesce(v_msg.scheduled_for, p_now))
    ON CONFLICT ON CONSTRAINT ob_plpgsql_1t_pkey DO NOTHING;

    GET DIAGNOSTICS v_was_new = ROW_COUNT;

    RETURN QUERY SELECT v_msg.msg_id, v_msg.stream_id, (v_was_new = 1);
  END LOOP;
END
$$;

CREATE OR REPLACE FUNCTION bench.claim_outbox_plpgsql_1t(
  p_instance_id   uuid,
  p_max_rows      int         DEFAULT 100,
  p_lease_seconds int         DEFAULT 300,
  p_now           timestamptz DEFAULT now())
RETURNS TABLE(source text, message_id uuid, stream_id uuid, partition_number int, handler_name text,
              destination text, message_type text, envelope jsonb, metadata jsonb, scope jsonb,
              attempts int, lease_token bigint, lease_expiry timestamptz, consumer text)
LANGUAGE plpgsql
AS $$
DECLARE
  v_ids   uuid[];
  v_token bigint;
BEGIN
  SELECT array_agg(d.message_id) INTO v_ids
    FROM (SELECT o.message_id
            FROM bench.ob_plpgsql_1t o
           WHERE o.processed_at IS NULL AND o.stream_id IS NULL AND o.scheduled_for <= p_now
             AND (o.lease_expiry IS NULL OR o.lease_expiry <= p_now)
           ORDER BY o.scheduled_for
           LIMIT p_max_rows
             FOR UPDATE SKIP LOCKED) d;
  IF v_ids IS NULL THEN
    RETURN;
  END IF;
  v_token := nextval('bench.ob_lease_token_seq');
  RETURN QUERY
    WITH c AS (
      UPDATE bench.ob_plpgsql_1t o
         SET attempts = o.attempts + 1, lease_instance = p_instance_id, lease_token = v_token,
             lease_expiry = p_now + make_interval(secs => p_lease_seconds)
       WHERE o.message_id = ANY (v_ids)
      RETURNING o.*)
    SELECT 'outbox'::text, c.message_id, c.stream_id, c.partition_number, NULL::text, c.destination,
           c.message_type, c.event_data, c.metadata, c.scope, c.attempts, c.lease_token, c.lease_expiry, NULL::text
      FROM c
     ORDER BY c.scheduled_for;
END
$$;

CREATE OR REPLACE FUNCTION bench.complete_outbox_published_plpgsql_1t(p_ids uuid[])
RETURNS int
LANGUAGE plpgsql
AS $$
DECLARE
  v_count int;
BEGIN
  DELETE FROM bench.ob_plpgsql_1t WHERE message_id = ANY (p_ids);
  GET DIAGNOSTICS v_count = ROW_COUNT;
  RETURN v_count;
END
$$;

-- ---------------------------------------------------------------------------------------------
-- One row per message of each method's tables, for the driver's checks (content after the
-- first store, leases after the first claim, nothing left after a cell). In the two-table
-- baselines a message row without its work row, or the other way round, shows up with
-- has_message or has_work false; the one-row tables have both in every row.

-- whizbang keeps one row per message since 0.14.0 (its work state in wh_outbox's appended
-- columns), so its view reads wh_outbox alone. Its leases come from whizbang.leases, which reads
-- whichever lease store runs (with the shared-memory store the row's lease columns stay empty).
CREATE OR REPLACE VIEW bench.ob_native_rows AS
  SELECT o.message_id, o.destination, o.message_type, o.event_data, o.metadata, o.scope, o.stream_id, o.is_event,
         o.created_at, o.stream_seq, o.partition_number, o.scheduled_for, coalesce(l.attempts, o.attempts) AS attempts,
         l.instance_id AS lease_instance, l.lease_token, l.lease_expiry, o.last_error, o.processed_at,
         true AS has_message, true AS has_work
    FROM whizbang.wh_outbox o
    LEFT JOIN whizbang.leases l ON l.source = 'outbox' AND l.message_id = o.message_id;

CREATE OR REPLACE VIEW bench.ob_plpgsql_rows AS
  SELECT coalesce(o.message_id, w.message_id) AS message_id, o.destination, o.message_type, o.event_data,
         o.metadata, o.scope, o.stream_id, o.is_event, o.created_at, w.stream_seq, w.partition_number,
         w.scheduled_for, w.attempts, w.lease_instance, w.lease_token, w.lease_expiry, w.last_error,
         w.processed_at, o.message_id IS NOT NULL AS has_message, w.message_id IS NOT NULL AS has_work
    FROM bench.ob_plpgsql_outbox o FULL JOIN bench.ob_plpgsql_work w ON w.message_id = o.message_id;

CREATE OR REPLACE VIEW bench.ob_sql_rows AS
  SELECT coalesce(o.message_id, w.message_id) AS message_id, o.destination, o.message_type, o.event_data,
         o.metadata, o.scope, o.stream_id, o.is_event, o.created_at, w.stream_seq, w.partition_number,
         w.scheduled_for, w.attempts, w.lease_instance, w.lease_token, w.lease_expiry, w.last_error,
         w.processed_at, o.message_id IS NOT NULL AS has_message, w.message_id IS NOT NULL AS has_work
    FROM bench.ob_sql_outbox o FULL JOIN bench.ob_sql_work w ON w.message_id = o.message_id;

CREATE OR REPLACE VIEW bench.ob_plpgsql_1t_rows AS
  SELECT message_id, destination, message_type, event_data, metadata, scope, stream_id, is_event, created_at,
         NULL::bigint AS stream_seq, partition_number, scheduled_for, attempts, lease_instance, lease_token,
         lease_expiry, last_error, processed_at, true AS has_message, true AS has_work
    FROM bench.ob_plpgsql_1t;

CREATE OR REPLACE VIEW bench.ob_sql_1t_rows AS
  SELECT message_id, destination, message_type, event_data, metadata, scope, stream_id, is_event, created_at,
         NULL::bigint AS stream_seq, partition_number, scheduled_for, attempts, lease_instance, lease_token,
         lease_expiry, last_error, processed_at, true AS has_message, true AS has_work
    FROM bench.ob_sql_1t;

-- ---------------------------------------------------------------------------------------------
-- Every method's three statements. Parameters: store $1 = p_messages (jsonb text); claim
-- $1 = instance uuid, $2 = rows, $3 = lease seconds; complete $1 = uuid[] of the claimed ids
-- and, for complete = 'outcomes', $2 = bigint[] of their lease tokens. Results: store one row
-- (message_id, stream_id, was_newly_created) per input, in input order; claim the 14 columns
-- of claim_work; complete one integer (complete = 'count') or (message_id, outcome) per id.

DROP TABLE IF EXISTS bench.outbox_methods;
CREATE TABLE bench.outbox_methods (
  method       text PRIMARY KEY,
  label        text NOT NULL,
  tables       text NOT NULL,  -- emptied (TRUNCATE) before every cell
  rows_view    text NOT NULL,
  store_sql    text NOT NULL,
  claim_sql    text NOT NULL,
  complete_sql text NOT NULL,
  complete     text NOT NULL CHECK (complete IN ('count', 'outcomes'))
);

INSERT INTO bench.outbox_methods VALUES
('native', 'native: store_outbox_messages, claim_work, complete_outbox_published',
 'whizbang.wh_outbox, whizbang.wh_outbox_streams, whizbang.wh_outbox_preleased',
 'bench.ob_native_rows',
 $q$SELECT message_id, stream_id, was_newly_created FROM whizbang.store_outbox_messages($1::jsonb)$q$,
 $q$SELECT source, message_id, stream_id, partition_number, handler_name, destination, message_type, envelope,
           metadata, scope, attempts, lease_token, lease_expiry, consumer
      FROM whizbang.claim_work($1::uuid, 'outbox', $2::int, $3::int)$q$,
 $q$SELECT whizbang.complete_outbox_published($1::uuid[])$q$,
 'count'),

('native_cw', 'native: store_outbox_messages, claim_work, complete_work (fenced)',
 'whizbang.wh_outbox, whizbang.wh_outbox_streams, whizbang.wh_outbox_preleased',
 'bench.ob_native_rows',
 $q$SELECT message_id, stream_id, was_newly_created FROM whizbang.store_outbox_messages($1::jsonb)$q$,
 $q$SELECT source, message_id, stream_id, partition_number, handler_name, destination, message_type, envelope,
           metadata, scope, attempts, lease_token, lease_expiry, consumer
      FROM whizbang.claim_work($1::uuid, 'outbox', $2::int, $3::int)$q$,
 $q$SELECT message_id, outcome FROM whizbang.complete_work('outbox', $1::uuid[], $2::bigint[])$q$,
 'outcomes'),

('plpgsql', '(a) PL/pgSQL functions, message + work tables (0.13.0 layout)',
 'bench.ob_plpgsql_outbox, bench.ob_plpgsql_work',
 'bench.ob_plpgsql_rows',
 $q$SELECT message_id, stream_id, was_newly_created FROM bench.store_outbox_messages_plpgsql($1::jsonb)$q$,
 $q$SELECT * FROM bench.claim_outbox_plpgsql($1::uuid, $2::int, $3::int)$q$,
 $q$SELECT bench.complete_outbox_published_plpgsql($1::uuid[])$q$,
 'count'),

-- (b) Store: jsonb_to_recordset -> INSERT ... ON CONFLICT DO NOTHING RETURNING, which feeds the
-- work-row INSERT in a data-modifying CTE; one row per input in input order. Claim: UPDATE the
-- rows a FOR UPDATE SKIP LOCKED LIMIT subquery locked (the token an InitPlan: one nextval per
-- claim), joined to their messages. Complete: DELETE = ANY of the work rows feeding the DELETE
-- of the messages, counted.
-- The claim names the locked rows as `message_id = ANY (ARRAY(subquery))`, not the textbook
-- `message_id IN (subquery)`: both lock the same rows, but for IN the planner builds a semi-join
-- that reads every row of the work table through the primary key (its leading column is not
-- bound), live and dead, on every claim: 3.5x slower in a trial run on this machine, with 27%
-- of the claims short. ARRAY(...) is an InitPlan run once, and the UPDATE probes the primary
-- key with its result (checked by the driver: the plan must use an index and no Seq Scan).
('sql', '(b) plain SQL statements, message + work tables (0.13.0 layout)',
 'bench.ob_sql_outbox, bench.ob_sql_work',
 'bench.ob_sql_rows',
 $q$WITH m AS (
      SELECT x.* FROM ROWS FROM (jsonb_to_recordset($1::jsonb) AS ("MessageId" uuid, "Destination" text,
          "MessageType" text, "Envelope" jsonb, "Metadata" jsonb, "Scope" jsonb, "StreamId" uuid, "IsEvent" boolean,
          "ScheduledFor" timestamptz)) WITH ORDINALITY
        AS x(id, destination, type, envelope, metadata, scope, stream_id, is_event, scheduled_for, ord)
    ), o AS (
      INSERT INTO bench.ob_sql_outbox (message_id, destination, message_type, event_data, metadata, scope, stream_id,
                                       is_event, created_at)
      SELECT m.id, m.destination, m.type, m.envelope, m.metadata, m.scope, m.stream_id, coalesce(m.is_event, false),
             now()
        FROM m
      ON CONFLICT (message_id) DO NOTHING
      RETURNING message_id
    ), w AS (
      INSERT INTO bench.ob_sql_work (consumer, message_id, stream_id, partition_number, scheduled_for)
      SELECT '', m.id, m.stream_id, whizbang.partition_of(coalesce(m.stream_id, m.id), 10000),
             coalesce(m.scheduled_for, now())
        FROM m JOIN o ON o.message_id = m.id
    )
    SELECT m.id, m.stream_id, o.message_id IS NOT NULL FROM m LEFT JOIN o ON o.message_id = m.id ORDER BY m.ord$q$,
 $q$WITH c AS (
      UPDATE bench.ob_sql_work w
         SET attempts = w.attempts + 1, lease_instance = $1::uuid,
             lease_token = (SELECT nextval('bench.ob_lease_token_seq')),
             lease_expiry = now() + make_interval(secs => $3::int)
       WHERE w.consumer = '' AND w.message_id = ANY (ARRAY(
               SELECT d.message_id FROM bench.ob_sql_work d
                WHERE d.processed_at IS NULL AND d.stream_id IS NULL AND d.scheduled_for <= now()
                  AND (d.lease_expiry IS NULL OR d.lease_expiry <= now())
                ORDER BY d.scheduled_for
                LIMIT $2::int
                  FOR UPDATE SKIP LOCKED))
      RETURNING w.*)
    SELECT 'outbox'::text, c.message_id, c.stream_id, c.partition_number, NULL::text, o.destination, o.message_type,
           o.event_data, o.metadata, o.scope, c.attempts, c.lease_token, c.lease_expiry, NULL::text
      FROM c JOIN bench.ob_sql_outbox o ON o.message_id = c.message_id
     ORDER BY c.scheduled_for$q$,
 $q$WITH w AS (DELETE FROM bench.ob_sql_work WHERE consumer = '' AND message_id = ANY ($1::uuid[])
               RETURNING message_id),
         o AS (DELETE FROM bench.ob_sql_outbox o USING w WHERE o.message_id = w.message_id RETURNING 1)
    SELECT count(*)::int FROM o$q$,
 'count'),

('plpgsql_1t', '(a) PL/pgSQL functions, one-table outbox (seed shape)',
 'bench.ob_plpgsql_1t',
 'bench.ob_plpgsql_1t_rows',
 $q$SELECT message_id, stream_id, was_newly_created FROM bench.store_outbox_messages_plpgsql_1t($1::jsonb)$q$,
 $q$SELECT * FROM bench.claim_outbox_plpgsql_1t($1::uuid, $2::int, $3::int)$q$,
 $q$SELECT bench.complete_outbox_published_plpgsql_1t($1::uuid[])$q$,
 'count'),

('sql_1t', '(b) plain SQL statements, one-table outbox (seed shape)',
 'bench.ob_sql_1t',
 'bench.ob_sql_1t_rows',
 $q$WITH m AS (
      SELECT x.* FROM ROWS FROM (jsonb_to_recordset($1::jsonb) AS ("MessageId" uuid, "Destination" text,
          "MessageType" text, "Envelope" jsonb, "Metadata" jsonb, "Scope" jsonb, "StreamId" uuid, "IsEvent" boolean,
          "ScheduledFor" timestamptz)) WITH ORDINALITY
        AS x(id, destination, type, envelope, metadata, scope, stream_id, is_event, scheduled_for, ord)
    ), o AS (
      INSERT INTO bench.ob_sql_1t (message_id, destination, message_type, event_data, metadata, scope, stream_id,
                                   is_event, created_at, partition_number, scheduled_for)
      SELECT m.id, m.destination, m.type, m.envelope, m.metadata, m.scope, m.stream_id, coalesce(m.is_event, false),
             now(), whizbang.partition_of(coalesce(m.stream_id, m.id), 10000), coalesce(m.scheduled_for, now())
        FROM m
      ON CONFLICT (message_id) DO NOTHING
      RETURNING message_id
    )
    SELECT m.id, m.stream_id, o.message_id IS NOT NULL FROM m LEFT JOIN o ON o.message_id = m.id ORDER BY m.ord$q$,
 $q$UPDATE bench.ob_sql_1t o
       SET attempts = o.attempts + 1, lease_instance = $1::uuid,
           lease_token = (SELECT nextval('bench.ob_lease_token_seq')),
           lease_expiry = now() + make_interval(secs => $3::int)
     WHERE o.message_id = ANY (ARRAY(
             SELECT d.message_id FROM bench.ob_sql_1t d
              WHERE d.processed_at IS NULL AND d.stream_id IS NULL AND d.scheduled_for <= now()
                AND (d.lease_expiry IS NULL OR d.lease_expiry <= now())
              ORDER BY d.scheduled_for
              LIMIT $2::int
                FOR UPDATE SKIP LOCKED))
    RETURNING 'outbox'::text, o.message_id, o.stream_id, o.partition_number, NULL::text, o.destination,
              o.message_type, o.event_data, o.metadata, o.scope, o.attempts, o.lease_token, o.lease_expiry, NULL::text$q$,
 $q$WITH o AS (DELETE FROM bench.ob_sql_1t WHERE message_id = ANY ($1::uuid[]) RETURNING 1)
    SELECT count(*)::int FROM o$q$,
 'count');
