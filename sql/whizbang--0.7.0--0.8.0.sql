-- whizbang 0.7.0 -> 0.8.0: a distributable schema and whizbang.distribute() (issue 14, DESIGN
-- §3.9). Every table that grows with traffic gets the distribution column partition_number
-- (the work partition of the message's stream, or of the message where it has none);
-- distribute() fills it, makes it part of every key and hands the tables to Citus. On a single
-- server nothing else changes: the column stays NULL there and no call reads or writes it.

\echo Use "ALTER EXTENSION whizbang UPDATE TO '0.8.0'" to load this file. \quit

-- ---------------------------------------------------------------------------------------
-- The distribution column (docs/scaleout.md). The work tables have carried partition_number
-- since 0.3.0; the other tables of a message get it here. Nullable, and no default: adding it
-- rewrites nothing, and a single server keeps its keys (message_id, consumer) and its speed.
-- ---------------------------------------------------------------------------------------
ALTER TABLE whizbang.wh_message_deduplication ADD COLUMN partition_number integer;
ALTER TABLE whizbang.wh_inbox ADD COLUMN partition_number integer;
ALTER TABLE whizbang.wh_inbox_streams ADD COLUMN partition_number integer;
ALTER TABLE whizbang.wh_inbox_preleased ADD COLUMN partition_number integer;
ALTER TABLE whizbang.wh_outbox ADD COLUMN partition_number integer;
ALTER TABLE whizbang.wh_outbox_streams ADD COLUMN partition_number integer;
ALTER TABLE whizbang.wh_outbox_preleased ADD COLUMN partition_number integer;
ALTER TABLE whizbang.wh_dead_letters ADD COLUMN partition_number integer;

COMMENT ON COLUMN whizbang.wh_message_deduplication.partition_number IS
    'Citus distribution column (0.8.0): NULL on a single server; whizbang.distribute() sets it to the work partition of the message.';
COMMENT ON COLUMN whizbang.wh_inbox.partition_number IS
    'Citus distribution column (0.8.0): NULL on a single server; whizbang.distribute() sets it to the partition of the message''s work row.';
COMMENT ON COLUMN whizbang.wh_inbox_streams.partition_number IS
    'Citus distribution column (0.8.0): NULL on a single server; whizbang.distribute() sets it to the stream''s partition.';
COMMENT ON COLUMN whizbang.wh_inbox_preleased.partition_number IS
    'Citus distribution column (0.8.0): NULL on a single server; whizbang.distribute() sets it to the partition of the message''s work row.';
COMMENT ON COLUMN whizbang.wh_outbox.partition_number IS
    'Citus distribution column (0.8.0): NULL on a single server; whizbang.distribute() sets it to the partition of the message''s work row.';
COMMENT ON COLUMN whizbang.wh_outbox_streams.partition_number IS
    'Citus distribution column (0.8.0): NULL on a single server; whizbang.distribute() sets it to the stream''s partition.';
COMMENT ON COLUMN whizbang.wh_outbox_preleased.partition_number IS
    'Citus distribution column (0.8.0): NULL on a single server; whizbang.distribute() sets it to the partition of the message''s work row.';
COMMENT ON COLUMN whizbang.wh_dead_letters.partition_number IS
    'Citus distribution column (0.8.0): NULL on a single server; whizbang.distribute() sets it to the work partition of the message.';

-- ---------------------------------------------------------------------------------------
-- Routed calls (docs/scaleout.md "How a call reaches its node"). On a distributed install a
-- whizbang function sends each part of its work to the node that holds the part's shard as one
-- router query on wh_partitions (one row per partition, colocated with the work tables), which
-- calls the same function there with its first argument passed through _on_shard(). Empty on
-- a single server.
-- ---------------------------------------------------------------------------------------
CREATE TABLE whizbang.wh_partitions (
    partition_number integer NOT NULL,
    CONSTRAINT wh_partitions_pkey PRIMARY KEY (partition_number)
);
COMMENT ON TABLE whizbang.wh_partitions IS
    'Routing anchor of a distributed install (0.8.0, docs/scaleout.md): one row per work partition, filled by whizbang.distribute(); empty on a single server.';
COMMENT ON COLUMN whizbang.wh_partitions.partition_number IS
    'A work partition, 0 to 9999; the Citus distribution column.';

CREATE FUNCTION whizbang._on_shard(p_partition integer, p_value anyelement, p_token bigint DEFAULT NULL,
                                   p_node boolean DEFAULT false, p_partitions integer[] DEFAULT NULL)
RETURNS anyelement
    AS 'MODULE_PATHNAME', 'wb_on_shard' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION whizbang._on_shard(integer, anyelement, bigint, boolean, integer[]) IS
    'internal: the first argument of a routed call on a distributed install (0.8.0): returns p_value; the whizbang function it is passed to runs next to the local shards of p_partition (with p_node: splits its work among the shards of this node, p_partitions: those of the rows it names) and hands out lease token p_token.';
REVOKE ALL ON FUNCTION whizbang._on_shard(integer, anyelement, bigint, boolean, integer[]) FROM PUBLIC;
ALTER FUNCTION whizbang._on_shard(integer, anyelement, bigint, boolean, integer[]) SET search_path = pg_catalog, pg_temp;

-- ---------------------------------------------------------------------------------------
-- The settings trigger: an INSERT of a known key updates that key in the trigger's own table,
-- which on a distributed install is a node's placement of the reference table (a statement on
-- wh_settings itself would be a distributed query inside one). Unchanged on a single server.
-- ---------------------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION whizbang._settings_validate() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    d whizbang.wh_setting_defaults%ROWTYPE;
    v bigint;
    updated bigint;
BEGIN
    SELECT * INTO d FROM whizbang.wh_setting_defaults WHERE setting_key = NEW.setting_key;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'unknown whizbang setting "%"', NEW.setting_key
            USING ERRCODE = 'undefined_object',
                  HINT = 'SELECT setting_key FROM whizbang.settings lists the known settings.';
    END IF;
    IF NEW.setting_value IS NULL THEN
        RAISE EXCEPTION 'setting "%" must not be null', NEW.setting_key
            USING ERRCODE = 'not_null_violation', HINT = 'Delete the row to go back to the default.';
    END IF;
    IF NEW.value_type IS NOT NULL AND NEW.value_type <> d.value_type THEN
        RAISE EXCEPTION 'setting "%" has type %, not %', NEW.setting_key, d.value_type, NEW.value_type
            USING ERRCODE = 'datatype_mismatch';
    END IF;
    NEW.value_type := d.value_type;
    NEW.description := coalesce(NEW.description, d.description);

    IF d.value_type = 'integer' THEN
        IF NEW.setting_value !~ '^\s*[+-]?[0-9]{1,18}\s*$' THEN
            RAISE EXCEPTION 'invalid value for setting "%": "%" is not an integer', NEW.setting_key, NEW.setting_value
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        v := NEW.setting_value::bigint;
        IF v < d.min_value OR v > d.max_value THEN
            RAISE EXCEPTION 'invalid value for setting "%": % is outside [%, %]', NEW.setting_key, v, d.min_value, d.max_value
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        NEW.setting_value := v::text;
    ELSIF d.value_type = 'boolean' THEN
        IF lower(btrim(NEW.setting_value)) NOT IN ('true', 'false', 't', 'f', 'on', 'off', 'yes', 'no', '1', '0') THEN
            RAISE EXCEPTION 'invalid value for setting "%": "%" is not a boolean', NEW.setting_key, NEW.setting_value
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        NEW.setting_value := NEW.setting_value::boolean::text;
    ELSIF d.allowed_values IS NOT NULL AND NOT (NEW.setting_value = ANY (d.allowed_values)) THEN
        RAISE EXCEPTION 'invalid value for setting "%": "%"', NEW.setting_key, NEW.setting_value
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('Allowed values: %s.', array_to_string(d.allowed_values, ', '));
    END IF;

    IF TG_OP = 'INSERT' THEN
        -- The trigger's own table: wh_settings on a single server, the node's placement of it on a
        -- distributed install (a reference table), which must not start a distributed query.
        EXECUTE format('UPDATE %I.%I SET setting_value = $1, value_type = $2, description = $3 WHERE setting_key = $4',
                       TG_TABLE_SCHEMA, TG_TABLE_NAME)
            USING NEW.setting_value, NEW.value_type, NEW.description, NEW.setting_key;
        GET DIAGNOSTICS updated = ROW_COUNT;
        IF updated > 0 THEN
            RETURN NULL;
        END IF;
    END IF;
    RETURN NEW;
END
$$;

-- ---------------------------------------------------------------------------------------
-- _distribution_keys(): one node's share of distribute(). Fills the distribution column of the
-- rows there, makes it NOT NULL and part of every primary key, and drops the triggers Citus
-- would refuse (the shared-memory lease store's: a distributed install keeps leases in the
-- rows). Run on the coordinator and, by distribute(), on every worker, whose whizbang tables
-- are the shells Citus keeps for an extension's tables and must have the coordinator's keys.
-- Idempotent: a key that already includes partition_number is left alone.
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION whizbang._distribution_keys() RETURNS void
    LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    -- The partition count of every distributed call (DESIGN §3.4's default).
    c CONSTANT integer := 10000;
    t record;
BEGIN
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

COMMENT ON FUNCTION whizbang._distribution_keys() IS
    'internal: one node''s share of whizbang.distribute() (0.8.0): fills partition_number, makes it NOT NULL and part of every primary key.';

-- ---------------------------------------------------------------------------------------
-- distribute(p_shard_count): hands whizbang's tables to Citus (DESIGN §3.9, docs/scaleout.md).
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION whizbang.distribute(p_shard_count integer DEFAULT 32) RETURNS void
    LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    failed text;
    tab text;
BEGIN
    IF p_shard_count IS NULL THEN
        RAISE EXCEPTION 'p_shard_count must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF p_shard_count < 1 OR p_shard_count > 64000 THEN
        RAISE EXCEPTION 'p_shard_count must be between 1 and 64000, not %', p_shard_count USING ERRCODE = '22023';
    END IF;
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_extension WHERE extname OPERATOR(pg_catalog.=) 'citus') THEN
        RAISE EXCEPTION 'whizbang.distribute() needs the citus extension in this database'
            USING ERRCODE = '55000', HINT = 'docs/scaleout.md shows how to set up a Citus cluster.';
    END IF;
    IF NOT pg_catalog.citus_is_coordinator() THEN
        RAISE EXCEPTION 'whizbang.distribute() runs on the Citus coordinator' USING ERRCODE = '55000';
    END IF;
    IF EXISTS (SELECT FROM pg_catalog.pg_dist_partition
                WHERE logicalrelid OPERATOR(pg_catalog.=) 'whizbang.wh_inbox_work'::pg_catalog.regclass) THEN
        RAISE NOTICE 'whizbang is distributed already';
        RETURN;
    END IF;

    PERFORM whizbang._distribution_keys();
    -- The workers' whizbang tables (Citus keeps them as the shells of the extension's tables)
    -- must have the same keys before Citus creates the shards.
    SELECT pg_catalog.string_agg(pg_catalog.format('%s:%s: %s', r.nodename, r.nodeport, r.result), '; ')
      INTO failed
      FROM pg_catalog.run_command_on_workers('SELECT whizbang._distribution_keys()') r
     WHERE NOT r.success;
    IF failed IS NOT NULL THEN
        RAISE EXCEPTION 'whizbang.distribute(): a worker could not take the distribution keys: %', failed
            USING ERRCODE = '55000', HINT = 'Every node needs whizbang at the coordinator''s version.';
    END IF;

    -- The settings' validation and cache triggers go with the reference tables (Citus asks
    -- for this setting to keep triggers on a distributed table).
    PERFORM pg_catalog.set_config('citus.enable_unsafe_triggers', 'on', true);
    PERFORM pg_catalog.set_config('citus.multi_shard_modify_mode', 'sequential', true);
    PERFORM pg_catalog.create_reference_table('whizbang.wh_setting_defaults');
    -- The rows were validated when written; copying them to the placements must not run the
    -- validation again (its INSERT-of-a-known-key path writes wh_settings from inside the copy).
    ALTER TABLE whizbang.wh_settings DISABLE TRIGGER wh_settings_validate;
    PERFORM pg_catalog.create_reference_table('whizbang.wh_settings');
    ALTER TABLE whizbang.wh_settings ENABLE TRIGGER wh_settings_validate;
    PERFORM pg_catalog.create_reference_table('whizbang.wh_idempotency_policies');

    PERFORM pg_catalog.create_distributed_table('whizbang.wh_inbox_work', 'partition_number',
                                                shard_count => p_shard_count, colocate_with => 'none');
    INSERT INTO whizbang.wh_partitions (partition_number)
    SELECT p FROM pg_catalog.generate_series(0, 9999) AS p ON CONFLICT DO NOTHING;
    FOREACH tab IN ARRAY ARRAY['wh_partitions', 'wh_inbox', 'wh_inbox_streams', 'wh_inbox_preleased', 'wh_outbox_work',
                               'wh_outbox', 'wh_outbox_streams', 'wh_outbox_preleased',
                               'wh_message_deduplication', 'wh_dead_letters'] LOOP
        PERFORM pg_catalog.create_distributed_table(pg_catalog.format('whizbang.%I', tab), 'partition_number',
                                                    colocate_with => 'whizbang.wh_inbox_work');
    END LOOP;
    -- Idempotency keys go by a hash of their scope (Citus hashes the text): one scope, one node.
    PERFORM pg_catalog.create_distributed_table('whizbang.wh_idempotency_keys', 'scope',
                                                shard_count => p_shard_count, colocate_with => 'none');

    -- The coordinator's own copies are empty shells from now on.
    FOREACH tab IN ARRAY ARRAY['wh_setting_defaults', 'wh_settings', 'wh_idempotency_policies', 'wh_inbox_work',
                               'wh_inbox', 'wh_inbox_streams', 'wh_inbox_preleased', 'wh_outbox_work', 'wh_outbox',
                               'wh_outbox_streams', 'wh_outbox_preleased', 'wh_message_deduplication',
                               'wh_dead_letters', 'wh_idempotency_keys', 'wh_partitions'] LOOP
        PERFORM pg_catalog.truncate_local_data_after_distributing_table(pg_catalog.format('whizbang.%I', tab));
    END LOOP;
END
$$;

COMMENT ON FUNCTION whizbang.distribute(integer) IS
    'Scale-out on Citus (0.8.0, docs/scaleout.md): on the coordinator, distributes whizbang''s tables by partition_number (idempotency keys by scope) with p_shard_count shards, settings and policies as reference tables. Errors: 22004 NULL p_shard_count; 22023 p_shard_count outside 1..64000; 55000 no citus extension, not the coordinator, or a worker without whizbang.';

REVOKE ALL ON FUNCTION whizbang._distribution_keys() FROM PUBLIC;
REVOKE ALL ON FUNCTION whizbang.distribute(integer) FROM PUBLIC;
