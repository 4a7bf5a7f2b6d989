-- whizbang 0.11.0 -> 0.12.0: retention by generations (issue 23, DESIGN §3.6 "Generations").
-- whizbang.wh_message_deduplication becomes a table partitioned by range of first_seen_at: one
-- partition (a generation) per period, made ahead of time, dropped whole when it has left the
-- retention window (docs/operations.md "Retention by generations"). The records already stored
-- stay where they are, as the generation wh_message_deduplication_legacy (from MINVALUE to just
-- after the newest of them), purged row by row until it leaves the window whole. A database with
-- Citus keeps the single table (docs/scaleout.md).

\echo Use "ALTER EXTENSION whizbang UPDATE TO '0.12.0'" to load this file. \quit

-- On a distributed install the settings are reference tables: the coordinator's update writes
-- the new setting to every node's placement, and Citus runs this script again on each worker,
-- inside the coordinator's command, where a write to a reference table would be a distributed
-- query from a shard (refused). So a worker of a distributed install leaves the rows to the
-- coordinator.
DO $settings$
BEGIN
    -- Nested: the inner test names Citus objects, parsed only where Citus is installed.
    IF EXISTS (SELECT FROM pg_catalog.pg_extension WHERE extname OPERATOR(pg_catalog.=) 'citus') THEN
        IF NOT pg_catalog.citus_is_coordinator()
           AND EXISTS (SELECT FROM pg_catalog.pg_dist_partition p
                        WHERE p.logicalrelid OPERATOR(pg_catalog.=) 'whizbang.wh_setting_defaults'::pg_catalog.regclass) THEN
            RETURN;
        END IF;
    END IF;
    INSERT INTO whizbang.wh_setting_defaults
        (setting_key, default_value, value_type, min_value, max_value, allowed_values, description)
    VALUES
        ('dedup_generations', '30', 'integer', 1, 1000, NULL,
         'Dedup generations the retention window is cut into: a generation lasts dedup_retention_days '
         '* 24 / dedup_generations hours, rounded up (a day by default)');
    -- Seeded as CREATE EXTENSION seeds every setting.
    INSERT INTO whizbang.wh_settings (setting_key, setting_value, value_type, description)
    SELECT setting_key, default_value, value_type, description FROM whizbang.wh_setting_defaults
     WHERE setting_key OPERATOR(pg_catalog.=) 'dedup_generations';
END
$settings$;

DO $convert$
DECLARE
    newest timestamptz;
    g record;
BEGIN
    -- Citus keeps the single table (docs/scaleout.md): its shards are plain tables, and the
    -- generations' DDL would have to be made on every node at once.
    IF EXISTS (SELECT FROM pg_catalog.pg_extension WHERE extname OPERATOR(pg_catalog.=) 'citus') THEN
        RETURN;
    END IF;
    -- Stores wait for this transaction: the rename and the attach take a moment, the attach's
    -- check of the records' first_seen_at reads the table once (docs/performance.md, "Retention by generations", has figures).
    LOCK TABLE whizbang.wh_message_deduplication IN ACCESS EXCLUSIVE MODE;
    SELECT pg_catalog.max(first_seen_at) INTO newest FROM whizbang.wh_message_deduplication;
    ALTER TABLE whizbang.wh_message_deduplication RENAME TO wh_message_deduplication_legacy;
    ALTER INDEX whizbang.wh_message_deduplication_pkey RENAME TO wh_message_deduplication_legacy_pkey;

    CREATE TABLE whizbang.wh_message_deduplication (
        consumer          text COLLATE "C" NOT NULL DEFAULT '',
        message_id        uuid        NOT NULL,
        first_seen_at     timestamptz NOT NULL DEFAULT pg_catalog.now(),
        observation_count integer     NOT NULL DEFAULT 1,
        conflict_count    integer     NOT NULL DEFAULT 0,
        fingerprint       bytea,
        partition_number  integer
    ) PARTITION BY RANGE (first_seen_at);

    -- The applications' grants go with the name.
    FOR g IN SELECT a.grantee, a.privilege_type, a.is_grantable
               FROM pg_catalog.pg_class c, pg_catalog.aclexplode(c.relacl) a
              WHERE c.oid OPERATOR(pg_catalog.=) 'whizbang.wh_message_deduplication_legacy'::pg_catalog.regclass
                AND a.grantee OPERATOR(pg_catalog.<>) c.relowner
    LOOP
        EXECUTE pg_catalog.format('GRANT %s ON whizbang.wh_message_deduplication TO %s%s', g.privilege_type,
                                  CASE WHEN g.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
                                       ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(g.grantee)) END,
                                  CASE WHEN g.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
    END LOOP;
    -- A GRANT run by an extension script is recorded as the extension's initial privilege
    -- (pg_init_privs), and pg_dump dumps only the grants that differ from those: left so, the
    -- applications' grants would vanish from their dumps. A fresh install records none.
    DELETE FROM pg_catalog.pg_init_privs i
     WHERE i.objoid OPERATOR(pg_catalog.=) 'whizbang.wh_message_deduplication'::pg_catalog.regclass
       AND i.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass;

    IF newest IS NULL THEN
        DROP TABLE whizbang.wh_message_deduplication_legacy;
    ELSE
        -- No longer a member of the extension: like every generation, pg_dump dumps it whole.
        ALTER EXTENSION whizbang DROP TABLE whizbang.wh_message_deduplication_legacy;
        COMMENT ON TABLE whizbang.wh_message_deduplication_legacy IS
            'The dedup records stored before whizbang 0.12.0, a generation of whizbang.wh_message_deduplication: '
            'purged row by row by perform_maintenance until all of it has left the retention window, then dropped whole.';
        EXECUTE pg_catalog.format('ALTER TABLE whizbang.wh_message_deduplication ATTACH PARTITION '
                                  'whizbang.wh_message_deduplication_legacy FOR VALUES FROM (MINVALUE) TO (%L)',
                                  newest OPERATOR(pg_catalog.+) interval '1 microsecond');
    END IF;
END
$convert$;

-- The comments go with the name (a new table): the 0.11.0 ones, first_seen_at's and the table's
-- telling of generations.
COMMENT ON TABLE whizbang.wh_message_deduplication IS
    'One row per (consumer, message_id) received: the dedup decision of dedup_insert, dedup_insert_many, '
    'store_inbox_messages and inbox_receive. Kept after completion; perform_maintenance purges it after '
    'dedup_retention_days, never while its message waits. From 0.12.0 partitioned by first_seen_at into '
    'generations that maintenance drops whole (whizbang.dedup_generations; a database with Citus keeps one '
    'table). Do not alter the table: whizbang writes it natively.';
COMMENT ON COLUMN whizbang.wh_message_deduplication.consumer IS
    'The dedup scope (receiving service or subscription), compared byte for byte; '''' is the default scope.';
COMMENT ON COLUMN whizbang.wh_message_deduplication.message_id IS 'The message id.';
COMMENT ON COLUMN whizbang.wh_message_deduplication.first_seen_at IS
    'p_now of the call that recorded it (outcome new); retention counts from here, and it decides the '
    'generation. A record whose message still waited when its generation was dropped moved forward first: '
    'it then holds the start of the generation it moved to.';
COMMENT ON COLUMN whizbang.wh_message_deduplication.observation_count IS
    'Deliveries seen: 1 at the first, + 1 per duplicate or conflict.';
COMMENT ON COLUMN whizbang.wh_message_deduplication.conflict_count IS
    'Deliveries whose fingerprint differed from the stored one (outcome conflict).';
COMMENT ON COLUMN whizbang.wh_message_deduplication.fingerprint IS
    'Payload fingerprint of the delivery that recorded the id (normally whizbang.fingerprint, 32 bytes), '
    'or NULL; never changed afterwards.';
COMMENT ON COLUMN whizbang.wh_message_deduplication.partition_number IS
    'Citus distribution column (0.8.0): NULL on a single server; whizbang.distribute() sets it to the work partition of the message.';

-- ---------------------------------------------------------------------------------------
-- dedup_generations(): the generations, for operators (docs/operations.md).
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION whizbang.dedup_generations()
RETURNS TABLE (generation text, starts_at timestamptz, ends_at timestamptz, records bigint,
               leaves_window_at timestamptz)
    AS 'MODULE_PATHNAME', 'wb_dedup_generations' LANGUAGE C STABLE ROWS 40
    SET search_path = pg_catalog, pg_temp;

CREATE VIEW whizbang.dedup_generations AS
SELECT g.generation, g.starts_at, g.ends_at, g.records, g.leaves_window_at FROM whizbang.dedup_generations() g;

REVOKE ALL ON FUNCTION whizbang.dedup_generations() FROM PUBLIC;
REVOKE ALL ON whizbang.dedup_generations FROM PUBLIC;

COMMENT ON FUNCTION whizbang.dedup_generations() IS
    'The generations of whizbang.wh_message_deduplication (0.12.0), oldest first: the table of each, the span '
    'of first_seen_at it holds (starts_at NULL: the records stored before 0.12.0), its records counted now (a '
    'scan of each), and when maintenance drops it (ends_at + dedup_retention_days). No rows on a table that is '
    'not in generations (a database with Citus). No errors.';
COMMENT ON VIEW whizbang.dedup_generations IS 'whizbang.dedup_generations() as a view.';
COMMENT ON COLUMN whizbang.dedup_generations.generation IS 'The generation''s table, in schema whizbang.';
COMMENT ON COLUMN whizbang.dedup_generations.starts_at IS
    'The first first_seen_at it holds; NULL for the records stored before 0.12.0 (from MINVALUE).';
COMMENT ON COLUMN whizbang.dedup_generations.ends_at IS 'The first first_seen_at it no longer holds.';
COMMENT ON COLUMN whizbang.dedup_generations.records IS 'Its records, counted now.';
COMMENT ON COLUMN whizbang.dedup_generations.leaves_window_at IS
    'From when maintenance drops it whole: ends_at + dedup_retention_days (its waiting messages'' records move forward first).';

COMMENT ON FUNCTION whizbang.stats() IS
    'Counters from one snapshot: inbox_ and outbox_ pending, leased, scheduled, dead_lettered, '
    'oldest_pending_seconds; dedup_rows, dedup_duplicates_observed, dedup_conflicts_observed; '
    'idempotency_in_progress, idempotency_completed, idempotency_tombstones; the lease store''s and claim '
    'waits''; dedup_generations (how many, 0.12.0: 0 when the table is not in generations) and '
    'dedup_oldest_generation_seconds (the age of the oldest one''s start). Read-only. '
    'Errors: 42501 without SELECT on a counted table.';

-- ---------------------------------------------------------------------------------------
-- Grants of a capability: monitor reads the generations.
-- ---------------------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION whizbang._capability_grants()
RETURNS TABLE (capability text, kind text, object_name text, privileges text)
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp
AS $$
    SELECT c.capability, c.kind, c.object_name, c.privileges FROM (VALUES
        -- grant_worker
        ('dedup', 'routine', 'dedup_insert', 'EXECUTE'),
        ('dedup', 'routine', 'dedup_insert_many', 'EXECUTE'),
        ('dedup', 'routine', 'fingerprint', 'EXECUTE'),
        ('dedup', 'routine', 'event_uuid', 'EXECUTE'),
        ('dedup', 'routine', 'uuid_v7', 'EXECUTE'),
        ('dedup', 'routine', 'partition_of', 'EXECUTE'),
        ('dedup', 'routine', 'version', 'EXECUTE'),
        ('dedup', 'table', 'wh_message_deduplication', 'SELECT, INSERT, UPDATE, DELETE'),
        ('dedup', 'table', 'settings', 'SELECT'),
        ('idempotency', 'routine', 'idempotency_begin', 'EXECUTE'),
        ('idempotency', 'routine', 'idempotency_complete', 'EXECUTE'),
        ('idempotency', 'routine', 'idempotency_release', 'EXECUTE'),
        ('idempotency', 'routine', 'idempotency_policy', 'EXECUTE'),
        ('idempotency', 'routine', 'fingerprint', 'EXECUTE'),
        ('idempotency', 'table', 'wh_idempotency_keys', 'SELECT, INSERT, UPDATE, DELETE'),
        ('idempotency', 'sequence', 'wh_idempotency_token_seq', 'USAGE'),
        ('idempotency', 'table', 'wh_idempotency_policies', 'SELECT'),
        ('idempotency', 'table', 'settings', 'SELECT'),
        ('inbox', 'routine', 'store_inbox_messages', 'EXECUTE'),
        ('inbox', 'routine', 'inbox_receive', 'EXECUTE'),
        ('inbox', 'routine', 'claim_work', 'EXECUTE'),
        ('inbox', 'routine', 'complete_work', 'EXECUTE'),
        ('inbox', 'routine', 'fail_work', 'EXECUTE'),
        ('inbox', 'routine', 'renew_leases', 'EXECUTE'),
        ('inbox', 'routine', 'release_work', 'EXECUTE'),
        ('inbox', 'routine', 'partition_of', 'EXECUTE'),
        ('inbox', 'table', 'wh_message_deduplication', 'SELECT, INSERT, UPDATE, DELETE'),
        ('inbox', 'table', 'wh_inbox', 'SELECT, INSERT, DELETE'),
        ('inbox', 'table', 'wh_inbox_work', 'SELECT, INSERT, UPDATE, DELETE'),
        ('inbox', 'table', 'wh_inbox_streams', 'SELECT, INSERT, UPDATE'),
        ('inbox', 'table', 'wh_inbox_preleased', 'SELECT, INSERT, DELETE'),
        ('inbox', 'table', 'wh_dead_letters', 'INSERT'),
        ('inbox', 'sequence', 'wh_lease_token_seq', 'USAGE'),
        ('inbox', 'table', 'settings', 'SELECT'),
        ('outbox', 'routine', 'store_outbox_messages', 'EXECUTE'),
        ('outbox', 'table', 'wh_outbox', 'SELECT, INSERT'),
        ('outbox', 'table', 'wh_outbox_work', 'SELECT, INSERT'),
        ('outbox', 'table', 'wh_outbox_streams', 'SELECT, INSERT, UPDATE'),
        ('outbox', 'table', 'wh_outbox_preleased', 'INSERT'),
        ('outbox', 'sequence', 'wh_lease_token_seq', 'USAGE'),
        ('outbox', 'table', 'settings', 'SELECT'),
        ('relay', 'routine', 'claim_work', 'EXECUTE'),
        ('relay', 'routine', 'complete_work', 'EXECUTE'),
        ('relay', 'routine', 'fail_work', 'EXECUTE'),
        ('relay', 'routine', 'renew_leases', 'EXECUTE'),
        ('relay', 'routine', 'release_work', 'EXECUTE'),
        ('relay', 'routine', 'complete_outbox_published', 'EXECUTE'),
        ('relay', 'routine', 'partition_of', 'EXECUTE'),
        ('relay', 'table', 'wh_outbox', 'SELECT, DELETE'),
        ('relay', 'table', 'wh_outbox_work', 'SELECT, UPDATE, DELETE'),
        ('relay', 'table', 'wh_outbox_preleased', 'SELECT, DELETE'),
        ('relay', 'table', 'wh_dead_letters', 'INSERT'),
        ('relay', 'sequence', 'wh_lease_token_seq', 'USAGE'),
        ('relay', 'table', 'settings', 'SELECT'),
        -- grant_admin
        ('dead_letters', 'routine', 'retry_dead_letters', 'EXECUTE'),
        ('dead_letters', 'table', 'wh_dead_letters', 'SELECT, UPDATE, DELETE'),
        ('dead_letters', 'table', 'wh_inbox', 'SELECT, INSERT'),
        ('dead_letters', 'table', 'wh_inbox_work', 'INSERT'),
        ('dead_letters', 'table', 'wh_inbox_streams', 'SELECT, INSERT, UPDATE'),
        ('dead_letters', 'table', 'wh_outbox', 'SELECT, INSERT'),
        ('dead_letters', 'table', 'wh_outbox_work', 'INSERT'),
        ('dead_letters', 'table', 'wh_outbox_streams', 'SELECT, INSERT, UPDATE'),
        ('settings', 'table', 'wh_settings', 'SELECT, INSERT, UPDATE, DELETE'),
        ('settings', 'table', 'wh_setting_defaults', 'SELECT'),
        ('settings', 'table', 'settings', 'SELECT'),
        ('policies', 'table', 'wh_idempotency_policies', 'SELECT, INSERT, UPDATE, DELETE'),
        ('maintenance', 'routine', 'perform_maintenance', 'EXECUTE'),
        ('maintenance', 'routine', 'run_maintenance', 'EXECUTE'),
        ('maintenance', 'table', 'settings', 'SELECT'),
        ('maintenance', 'table', 'wh_inbox', 'SELECT, DELETE'),
        ('maintenance', 'table', 'wh_outbox', 'SELECT, DELETE'),
        ('maintenance', 'table', 'wh_message_deduplication', 'SELECT, UPDATE, DELETE'),
        ('maintenance', 'table', 'wh_idempotency_keys', 'SELECT, UPDATE, DELETE'),
        ('maintenance', 'table', 'wh_dead_letters', 'SELECT, UPDATE, DELETE'),
        ('maintenance', 'table', 'wh_inbox_work', 'SELECT, UPDATE, DELETE'),
        ('maintenance', 'table', 'wh_outbox_work', 'SELECT, UPDATE, DELETE'),
        ('maintenance', 'table', 'wh_inbox_preleased', 'SELECT, UPDATE, DELETE'),
        ('maintenance', 'table', 'wh_outbox_preleased', 'SELECT, UPDATE, DELETE'),
        ('maintenance', 'table', 'wh_inbox_streams', 'SELECT, UPDATE, DELETE'),
        ('maintenance', 'table', 'wh_outbox_streams', 'SELECT, UPDATE, DELETE'),
        ('monitor', 'routine', 'stats', 'EXECUTE'),
        ('monitor', 'routine', 'queues', 'EXECUTE'),
        ('monitor', 'routine', '_leases', 'EXECUTE'),
        ('monitor', 'routine', 'check', 'EXECUTE'),
        ('monitor', 'table', 'stats', 'SELECT'),
        ('monitor', 'table', 'queues', 'SELECT'),
        ('monitor', 'table', 'leases', 'SELECT'),
        ('monitor', 'table', 'wh_inbox', 'SELECT'),
        ('monitor', 'table', 'wh_inbox_work', 'SELECT'),
        ('monitor', 'table', 'wh_outbox', 'SELECT'),
        ('monitor', 'table', 'wh_outbox_work', 'SELECT'),
        ('monitor', 'table', 'wh_dead_letters', 'SELECT'),
        ('monitor', 'table', 'wh_message_deduplication', 'SELECT'),
        ('monitor', 'table', 'wh_idempotency_keys', 'SELECT'),
        ('monitor', 'table', 'wh_partitions', 'SELECT'),
        ('monitor', 'routine', 'dedup_generations', 'EXECUTE'),
        ('monitor', 'table', 'dedup_generations', 'SELECT')
    ) AS c(capability, kind, object_name, privileges)
$$;

-- ---------------------------------------------------------------------------------------
-- _distribution_keys(): as in 0.8.0, refusing a table in generations with a clear error.
-- ---------------------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION whizbang._distribution_keys() RETURNS void
    LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    -- The partition count of every distributed call (DESIGN §3.4's default).
    c CONSTANT integer := 10000;
    t record;
BEGIN
    -- A table in generations (0.12.0: whizbang was created before citus in this database) is
    -- not distributed: a database with Citus keeps the single table (docs/scaleout.md).
    IF (SELECT r.relkind FROM pg_catalog.pg_class r
         WHERE r.oid OPERATOR(pg_catalog.=) 'whizbang.wh_message_deduplication'::pg_catalog.regclass)
       OPERATOR(pg_catalog.=) 'p' THEN
        RAISE EXCEPTION 'whizbang.wh_message_deduplication is in generations, which Citus does not distribute'
            USING ERRCODE = '55000',
                  DETAIL = 'whizbang was created (or updated to 0.12.0) before the citus extension in this database.',
                  HINT = 'Create the citus extension first, then whizbang: it then keeps one dedup table (docs/scaleout.md).';
    END IF;
    -- A message's tables take its work row's partition (computed at store with the caller's
    -- p_partition_count); what has no work row left takes partition_of(stream or id, 10000).
    UPDATE whizbang.wh_inbox i SET partition_number = w.partition_number
      FROM whizbang.wh_inbox_work w
     WHERE i.partition_number IS NULL AND w.message_id OPERATOR(pg_catalog.=) i.message_id
       AND w.consumer OPERATOR(pg_catalog.=) i.consumer;
    UPDATE whizbang.wh_inbox SET partition_number = whizbang.partition_of(coalesce(stream_id, message_id), c)
     WHERE partition_number IS NULL;
    UPDATE whizbang.wh_outbox o SET partition_number = w.partition_number
      FROM whizbang.wh_outbox_work w
     WHERE o.partition_number IS NULL AND w.message_id OPERATOR(pg_catalog.=) o.message_id;
    UPDATE whizbang.wh_outbox SET partition_number = whizbang.partition_of(coalesce(stream_id, message_id), c)
     WHERE partition_number IS NULL;
    UPDATE whizbang.wh_inbox_preleased p SET partition_number = w.partition_number
      FROM whizbang.wh_inbox_work w
     WHERE p.partition_number IS NULL AND w.message_id OPERATOR(pg_catalog.=) p.message_id
       AND w.consumer OPERATOR(pg_catalog.=) p.consumer;
    UPDATE whizbang.wh_inbox_preleased SET partition_number = whizbang.partition_of(message_id, c)
     WHERE partition_number IS NULL;
    UPDATE whizbang.wh_outbox_preleased p SET partition_number = w.partition_number
      FROM whizbang.wh_outbox_work w
     WHERE p.partition_number IS NULL AND w.message_id OPERATOR(pg_catalog.=) p.message_id;
    UPDATE whizbang.wh_outbox_preleased SET partition_number = whizbang.partition_of(message_id, c)
     WHERE partition_number IS NULL;
    -- A stream's rows and its counter: the stream's partition (the work rows' value where the
    -- stream has rows, so that a count other than 10000 still keeps them together).
    UPDATE whizbang.wh_inbox_streams s SET partition_number = w.partition_number
      FROM (SELECT DISTINCT ON (consumer, stream_id) consumer, stream_id, partition_number
              FROM whizbang.wh_inbox_work WHERE stream_id IS NOT NULL) w
     WHERE s.partition_number IS NULL AND w.stream_id OPERATOR(pg_catalog.=) s.stream_id
       AND w.consumer OPERATOR(pg_catalog.=) s.consumer;
    UPDATE whizbang.wh_inbox_streams SET partition_number = whizbang.partition_of(stream_id, c)
     WHERE partition_number IS NULL;
    UPDATE whizbang.wh_outbox_streams s SET partition_number = w.partition_number
      FROM (SELECT DISTINCT ON (stream_id) stream_id, partition_number
              FROM whizbang.wh_outbox_work WHERE stream_id IS NOT NULL) w
     WHERE s.partition_number IS NULL AND w.stream_id OPERATOR(pg_catalog.=) s.stream_id;
    UPDATE whizbang.wh_outbox_streams SET partition_number = whizbang.partition_of(stream_id, c)
     WHERE partition_number IS NULL;
    -- Dedup records: the inbox message's partition while it is there; a record whose message
    -- is gone (completed) does not know its stream and takes its id's partition (docs/scaleout.md).
    UPDATE whizbang.wh_message_deduplication d SET partition_number = i.partition_number
      FROM whizbang.wh_inbox i
     WHERE d.partition_number IS NULL AND i.message_id OPERATOR(pg_catalog.=) d.message_id
       AND i.consumer OPERATOR(pg_catalog.=) d.consumer;
    UPDATE whizbang.wh_message_deduplication SET partition_number = whizbang.partition_of(message_id, c)
     WHERE partition_number IS NULL;
    UPDATE whizbang.wh_dead_letters SET partition_number = whizbang.partition_of(coalesce(stream_id, message_id), c)
     WHERE partition_number IS NULL;

    FOR t IN SELECT * FROM (VALUES
        ('wh_message_deduplication', 'message_id, consumer, partition_number'),
        ('wh_inbox',                 'message_id, consumer, partition_number'),
        ('wh_inbox_work',            'message_id, consumer, partition_number'),
        ('wh_inbox_streams',         'stream_id, consumer, partition_number'),
        ('wh_inbox_preleased',       'instance_id, message_id, consumer, partition_number'),
        ('wh_outbox',                'message_id, partition_number'),
        ('wh_outbox_work',           'message_id, consumer, partition_number'),
        ('wh_outbox_streams',        'stream_id, consumer, partition_number'),
        ('wh_outbox_preleased',      'instance_id, message_id, consumer, partition_number'),
        ('wh_dead_letters',          'dead_letter_id, partition_number')) AS k(tab, cols)
    LOOP
        EXECUTE pg_catalog.format('ALTER TABLE whizbang.%I ALTER COLUMN partition_number SET NOT NULL', t.tab);
        IF NOT EXISTS (SELECT FROM pg_catalog.pg_constraint k
                        WHERE k.conrelid OPERATOR(pg_catalog.=) pg_catalog.format('whizbang.%I', t.tab)::pg_catalog.regclass
                          AND k.contype OPERATOR(pg_catalog.=) 'p'
                          AND k.conkey OPERATOR(pg_catalog.@>) ARRAY[(
                              SELECT a.attnum FROM pg_catalog.pg_attribute a
                               WHERE a.attrelid OPERATOR(pg_catalog.=) k.conrelid
                                 AND a.attname OPERATOR(pg_catalog.=) 'partition_number')]) THEN
            EXECUTE pg_catalog.format('ALTER TABLE whizbang.%1$I DROP CONSTRAINT %2$I, ADD CONSTRAINT %2$I PRIMARY KEY (%3$s)',
                                      t.tab, t.tab || '_pkey', t.cols);
        END IF;
    END LOOP;

    DROP TRIGGER IF EXISTS wh_inbox_work_lease_end ON whizbang.wh_inbox_work;
    DROP TRIGGER IF EXISTS wh_inbox_work_lease_truncate ON whizbang.wh_inbox_work;
    DROP TRIGGER IF EXISTS wh_outbox_work_lease_end ON whizbang.wh_outbox_work;
    DROP TRIGGER IF EXISTS wh_outbox_work_lease_truncate ON whizbang.wh_outbox_work;
END
$$;

