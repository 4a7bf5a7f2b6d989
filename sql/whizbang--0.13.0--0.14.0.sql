-- whizbang 0.13.0 -> 0.14.0: lean writes (issue 31): one row per message and consumer carrying
-- its work state, dedup records without a speculative insertion, membership filters of sealed
-- dedup generations, streams served to every worker.

\echo Use "ALTER EXTENSION whizbang UPDATE TO '0.14.0'" to load this file. \quit

-- ---------------------------------------------------------------------------------------
-- One row per message and consumer (issue 31): the work state moves into the message row.
-- ---------------------------------------------------------------------------------------
-- Until 0.13.0 every stored message wrote two heap rows and three index entries beyond its
-- dedup record (the message, its work row, the work row's key and due entry). With leases in
-- shared memory a claim writes nothing to the row, so keeping the work state apart no longer
-- buys cheap lease updates; it only costs a row, a key and a second delete per message. The
-- work columns are appended to wh_inbox / wh_outbox (an update in place keeps the columns of a
-- fresh install), the rows are copied over, and the work tables go. With the row lease store a
-- claim now updates the wide message row (docs/performance.md measures that trade).

-- On a distributed install (Citus) the coordinator's update changes the distributed tables, and
-- Citus applies each change to every shard and every worker's copy. Citus also runs this script
-- on each worker after the coordinator's own run, when the changes to the distributed tables have
-- reached the worker already: the workers leave those tables alone. Each such change is EXECUTEd
-- on the coordinator: Citus sends on the statement itself (a plain statement of an extension
-- script has the whole script as its text: several commands, refused). (Dropped at the end.)
CREATE FUNCTION whizbang._update_runs_here() RETURNS boolean
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $f$
DECLARE
    worker boolean := false;
BEGIN
    IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
        EXECUTE 'SELECT NOT pg_catalog.citus_is_coordinator() AND EXISTS (SELECT FROM pg_catalog.pg_dist_partition p'
                '  WHERE p.logicalrelid OPERATOR(pg_catalog.=) ''whizbang.wh_inbox''::pg_catalog.regclass)'
           INTO worker;
    END IF;
    RETURN NOT worker;
END
$f$;

DO $$
BEGIN
    IF NOT whizbang._update_runs_here() THEN
        RETURN;
    END IF;
    EXECUTE $ddl$ALTER TABLE whizbang.wh_inbox
    ADD COLUMN stream_seq     bigint,
    ADD COLUMN scheduled_for  timestamptz,
    ADD COLUMN attempts       integer NOT NULL DEFAULT 0,
    ADD COLUMN lease_instance uuid,
    ADD COLUMN lease_token    bigint,
    ADD COLUMN lease_expiry   timestamptz,
    ADD COLUMN last_error     text,
    ADD COLUMN processed_at   timestamptz$ddl$;
END
$$;


-- The outbox's rows take the inbox's shape (consumer always ''), so one claim engine serves both.
DO $$
BEGIN
    IF NOT whizbang._update_runs_here() THEN
        RETURN;
    END IF;
    EXECUTE $ddl$ALTER TABLE whizbang.wh_outbox
    ADD COLUMN consumer       text COLLATE "C" NOT NULL DEFAULT '' CONSTRAINT wh_outbox_consumer_check CHECK (consumer = ''),
    ADD COLUMN stream_seq     bigint,
    ADD COLUMN scheduled_for  timestamptz,
    ADD COLUMN attempts       integer NOT NULL DEFAULT 0,
    ADD COLUMN lease_instance uuid,
    ADD COLUMN lease_token    bigint,
    ADD COLUMN lease_expiry   timestamptz,
    ADD COLUMN last_error     text,
    ADD COLUMN processed_at   timestamptz$ddl$;
END
$$;

-- The work rows' values move over. Distributed (Citus) tables are joined on their distribution
-- column too (the message row has the work row's partition there); on a single server the
-- message rows' partition_number is NULL until now and the work row's is taken.
DO $$
DECLARE
    distributed boolean := pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL;
    same_part text := '';
BEGIN
    IF distributed THEN
        EXECUTE 'SELECT EXISTS (SELECT FROM pg_catalog.pg_dist_partition p'
                '  WHERE p.logicalrelid OPERATOR(pg_catalog.=) ''whizbang.wh_inbox_work''::pg_catalog.regclass)'
           INTO distributed;
    END IF;
    IF NOT whizbang._update_runs_here() THEN
        RETURN;
    END IF;
    IF distributed THEN
        same_part := ' AND w.partition_number OPERATOR(pg_catalog.=) m.partition_number';
    END IF;
    EXECUTE 'UPDATE whizbang.wh_inbox m'
            '   SET stream_seq = w.stream_seq, scheduled_for = w.scheduled_for, attempts = w.attempts,'
            '       lease_instance = w.lease_instance, lease_token = w.lease_token, lease_expiry = w.lease_expiry,'
            '       last_error = w.last_error, processed_at = w.processed_at'
            || CASE WHEN distributed THEN '' ELSE ', partition_number = w.partition_number' END ||
            '  FROM whizbang.wh_inbox_work w'
            ' WHERE w.message_id OPERATOR(pg_catalog.=) m.message_id AND w.consumer OPERATOR(pg_catalog.=) m.consumer'
            || same_part;
    EXECUTE 'UPDATE whizbang.wh_outbox m'
            '   SET stream_seq = w.stream_seq, scheduled_for = w.scheduled_for, attempts = w.attempts,'
            '       lease_instance = w.lease_instance, lease_token = w.lease_token, lease_expiry = w.lease_expiry,'
            '       last_error = w.last_error, processed_at = w.processed_at'
            || CASE WHEN distributed THEN '' ELSE ', partition_number = w.partition_number' END ||
            '  FROM whizbang.wh_outbox_work w'
            ' WHERE w.message_id OPERATOR(pg_catalog.=) m.message_id'
            || same_part;
    -- A message without a work row (written by hand) is due since it arrived.
    UPDATE whizbang.wh_inbox SET scheduled_for = received_at WHERE scheduled_for IS NULL;
    UPDATE whizbang.wh_outbox SET scheduled_for = created_at WHERE scheduled_for IS NULL;
    IF NOT distributed THEN
        UPDATE whizbang.wh_inbox SET partition_number = whizbang.partition_of(coalesce(stream_id, message_id), 10000)
         WHERE partition_number IS NULL;
        UPDATE whizbang.wh_outbox SET partition_number = whizbang.partition_of(coalesce(stream_id, message_id), 10000)
         WHERE partition_number IS NULL;
        -- A message row deleted by hand ends its shared lease (as the work rows' triggers did;
        -- Citus keeps no triggers on distributed tables, _distribution_keys() dropped them there).
        CREATE TRIGGER wh_inbox_lease_end AFTER DELETE ON whizbang.wh_inbox
            FOR EACH ROW EXECUTE FUNCTION whizbang._lease_row_deleted('inbox');
        CREATE TRIGGER wh_inbox_lease_truncate AFTER TRUNCATE ON whizbang.wh_inbox
            FOR EACH STATEMENT EXECUTE FUNCTION whizbang._lease_row_deleted('inbox');
        CREATE TRIGGER wh_outbox_lease_end AFTER DELETE ON whizbang.wh_outbox
            FOR EACH ROW EXECUTE FUNCTION whizbang._lease_row_deleted('outbox');
        CREATE TRIGGER wh_outbox_lease_truncate AFTER TRUNCATE ON whizbang.wh_outbox
            FOR EACH STATEMENT EXECUTE FUNCTION whizbang._lease_row_deleted('outbox');
    END IF;
END
$$;
DO $$
BEGIN
    IF NOT whizbang._update_runs_here() THEN
        RETURN;
    END IF;
    EXECUTE $ddl$ALTER TABLE whizbang.wh_inbox ALTER COLUMN scheduled_for SET NOT NULL, ALTER COLUMN partition_number SET NOT NULL$ddl$;
    EXECUTE $ddl$ALTER TABLE whizbang.wh_outbox ALTER COLUMN scheduled_for SET NOT NULL, ALTER COLUMN partition_number SET NOT NULL$ddl$;
END
$$;

-- What roles were granted on the work tables (by hand, or by grant_worker / grant_admin) they
-- keep on the message tables that now hold the work state.
DO $$
DECLARE
    g record;
    v_initial pg_catalog.pg_init_privs[];
BEGIN
    IF NOT whizbang._update_runs_here() THEN
        RETURN;
    END IF;
    -- A GRANT run by an extension script is recorded as the extension's initial privilege
    -- (pg_init_privs), and pg_dump dumps only the grants that differ from those: left so, the
    -- copied grants would vanish from the applications' dumps. What the message tables had
    -- there before (a fresh install has the same) is put back after the grants.
    SELECT pg_catalog.array_agg(i) INTO v_initial
      FROM pg_catalog.pg_init_privs i
     WHERE i.objoid OPERATOR(pg_catalog.=) ANY (ARRAY['whizbang.wh_inbox'::pg_catalog.regclass,
                                                      'whizbang.wh_outbox'::pg_catalog.regclass]::pg_catalog.oid[])
       AND i.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass;
    FOR g IN
        SELECT t.message, a.grantee, a.privilege_type, a.is_grantable
          FROM (VALUES ('wh_inbox_work', 'wh_inbox'), ('wh_outbox_work', 'wh_outbox')) AS t(work, message)
          JOIN pg_catalog.pg_class c
            ON c.relname OPERATOR(pg_catalog.=) t.work
           AND c.relnamespace OPERATOR(pg_catalog.=) 'whizbang'::pg_catalog.regnamespace
         CROSS JOIN LATERAL pg_catalog.aclexplode(c.relacl) a
         WHERE a.grantee OPERATOR(pg_catalog.<>) c.relowner
    LOOP
        EXECUTE pg_catalog.format('GRANT %s ON whizbang.%I TO %s%s', g.privilege_type, g.message,
                                  CASE WHEN g.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
                                       ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(g.grantee)) END,
                                  CASE WHEN g.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
    END LOOP;
    DELETE FROM pg_catalog.pg_init_privs i
     WHERE i.objoid OPERATOR(pg_catalog.=) ANY (ARRAY['whizbang.wh_inbox'::pg_catalog.regclass,
                                                      'whizbang.wh_outbox'::pg_catalog.regclass]::pg_catalog.oid[])
       AND i.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass;
    INSERT INTO pg_catalog.pg_init_privs SELECT (pg_catalog.unnest(v_initial)).*;
END
$$;
-- The work tables go; claims find due rows through partial indexes of the message tables:
-- wh_*_due the rows without a stream in due order, wh_*_stream the head of each stream (its
-- oldest unfinished row) by skipping from stream to stream, so rows waiting behind a busy head
-- are never visited (it also answers "is there an older unfinished row of this stream?" with
-- one probe), wh_*_processed debug_mode's leftovers for purge_processed.
DO $$
BEGIN
    IF NOT whizbang._update_runs_here() THEN
        -- The coordinator's DROP took the work tables out of Citus's metadata here, and left
        -- this node's copies: plain tables now, which only this script may drop.
        DROP TABLE IF EXISTS whizbang.wh_inbox_work, whizbang.wh_outbox_work;
        RETURN;
    END IF;
    EXECUTE $ddl$DROP TABLE whizbang.wh_inbox_work$ddl$;
    EXECUTE $ddl$DROP TABLE whizbang.wh_outbox_work$ddl$;
    EXECUTE $ddl$CREATE INDEX wh_inbox_due ON whizbang.wh_inbox (scheduled_for)
    WHERE processed_at IS NULL AND stream_id IS NULL$ddl$;
    EXECUTE $ddl$CREATE INDEX wh_inbox_stream ON whizbang.wh_inbox (consumer, stream_id, stream_seq)
    WHERE stream_id IS NOT NULL AND processed_at IS NULL$ddl$;
    EXECUTE $ddl$CREATE INDEX wh_inbox_processed ON whizbang.wh_inbox (processed_at) WHERE processed_at IS NOT NULL$ddl$;
    EXECUTE $ddl$CREATE INDEX wh_outbox_due ON whizbang.wh_outbox (scheduled_for)
    WHERE processed_at IS NULL AND stream_id IS NULL$ddl$;
    EXECUTE $ddl$CREATE INDEX wh_outbox_stream ON whizbang.wh_outbox (consumer, stream_id, stream_seq)
    WHERE stream_id IS NOT NULL AND processed_at IS NULL$ddl$;
    EXECUTE $ddl$CREATE INDEX wh_outbox_processed ON whizbang.wh_outbox (processed_at) WHERE processed_at IS NOT NULL$ddl$;
    EXECUTE $ddl$COMMENT ON TABLE whizbang.wh_inbox IS
    'One row per received message and consumer: the message as received and its work state (schedule, '
    'attempts, lease, stream position). Deleted when its work completes (debug_mode: marked processed).'$ddl$;
    EXECUTE $ddl$COMMENT ON TABLE whizbang.wh_outbox IS
    'One row per message to publish: the message and its work state (as wh_inbox). Deleted when published '
    '(debug_mode: marked processed).'$ddl$;
    EXECUTE $ddl$COMMENT ON COLUMN whizbang.wh_inbox.stream_seq IS 'Arrival number within (consumer, stream_id); NULL without a stream.'$ddl$;
    EXECUTE $ddl$COMMENT ON COLUMN whizbang.wh_inbox.partition_number IS
    'partition_of(coalesce(stream_id, message_id), p_partition_count of the store): claim_work''s p_partitions, and the distribution column under Citus.'$ddl$;
    EXECUTE $ddl$COMMENT ON COLUMN whizbang.wh_inbox.scheduled_for IS 'Not handed out before this time (ScheduledFor, or a retry''s backoff).'$ddl$;
    EXECUTE $ddl$COMMENT ON COLUMN whizbang.wh_inbox.attempts IS 'Deliveries so far: + 1 per claim, - 1 per release.'$ddl$;
    EXECUTE $ddl$COMMENT ON COLUMN whizbang.wh_inbox.lease_instance IS
    'Row lease store: instance (p_instance_id) holding the current lease; NULL when unleased, and always NULL with leases in shared memory (whizbang.leases lists those).'$ddl$;
    EXECUTE $ddl$COMMENT ON COLUMN whizbang.wh_inbox.lease_token IS
    'Row lease store: fencing token of the current lease (wh_lease_token_seq); NULL when unleased or with leases in shared memory.'$ddl$;
    EXECUTE $ddl$COMMENT ON COLUMN whizbang.wh_inbox.lease_expiry IS
    'Row lease store: end of the current lease; NULL when unleased or with leases in shared memory.'$ddl$;
    EXECUTE $ddl$COMMENT ON COLUMN whizbang.wh_inbox.last_error IS 'Error text of the last fail_work.'$ddl$;
    EXECUTE $ddl$COMMENT ON COLUMN whizbang.wh_inbox.processed_at IS 'With debug_mode: when it was completed (kept, not deleted); NULL otherwise.'$ddl$;
    EXECUTE $ddl$COMMENT ON COLUMN whizbang.wh_outbox.consumer IS 'Always '''' (CHECK): the outbox has no consumer; kept so one claim engine serves both.'$ddl$;
    EXECUTE $ddl$COMMENT ON COLUMN whizbang.wh_outbox.stream_seq IS 'Arrival number within stream_id; NULL without a stream.'$ddl$;
    EXECUTE $ddl$COMMENT ON COLUMN whizbang.wh_outbox.partition_number IS
    'partition_of(coalesce(stream_id, message_id), p_partition_count of the store): claim_work''s p_partitions, and the distribution column under Citus.'$ddl$;
    EXECUTE $ddl$COMMENT ON COLUMN whizbang.wh_outbox.scheduled_for IS 'Not handed out before this time (ScheduledFor, or a retry''s backoff).'$ddl$;
    EXECUTE $ddl$COMMENT ON COLUMN whizbang.wh_outbox.attempts IS 'Deliveries so far: + 1 per claim, - 1 per release.'$ddl$;
    EXECUTE $ddl$COMMENT ON COLUMN whizbang.wh_outbox.lease_instance IS
    'Row lease store: instance (p_instance_id) holding the current lease; NULL when unleased or with leases in shared memory.'$ddl$;
    EXECUTE $ddl$COMMENT ON COLUMN whizbang.wh_outbox.lease_token IS
    'Row lease store: fencing token of the current lease; NULL when unleased or with leases in shared memory.'$ddl$;
    EXECUTE $ddl$COMMENT ON COLUMN whizbang.wh_outbox.lease_expiry IS
    'Row lease store: end of the current lease; NULL when unleased or with leases in shared memory.'$ddl$;
    EXECUTE $ddl$COMMENT ON COLUMN whizbang.wh_outbox.last_error IS 'Error text of the last fail_work.'$ddl$;
    EXECUTE $ddl$COMMENT ON COLUMN whizbang.wh_outbox.processed_at IS 'With debug_mode: when it was published (kept, not deleted); NULL otherwise.'$ddl$;
END
$$;

COMMENT ON VIEW whizbang.leases IS
    'Every lease held on inbox and outbox work, in whichever lease store runs (whizbang.lease_store()): holder '
    'instance, fencing token, expiry, deliveries. A lease whose expiry has passed is listed until the message is '
    'handed out again or finished (its token still completes it); live ones are WHERE lease_expiry > now(). '
    'A lease another transaction is changing is listed as it was until that transaction ends (a prepared one '
    'included). Reading it needs SELECT on the view and on wh_inbox and wh_outbox, and EXECUTE on whizbang._leases().';

-- The functions that named the work tables, again without them.
CREATE OR REPLACE FUNCTION whizbang.check()
RETURNS TABLE (item text, ok boolean, detail text)
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_distributed boolean := false;
    v_have integer[];
    v_missing integer[];
    v_missing_count integer;
    v_extra bigint;
    v_owner oid;
    v_holders text[];
    v_groups bigint;
BEGIN
    SELECT e.extowner INTO v_owner FROM pg_catalog.pg_extension e WHERE e.extname OPERATOR(pg_catalog.=) 'whizbang';
    IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
        EXECUTE 'SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition p'
                '  WHERE p.logicalrelid OPERATOR(pg_catalog.=) ''whizbang.wh_inbox''::pg_catalog.regclass)'
           INTO v_distributed;
    END IF;

    item := 'distributed'; ok := true;
    detail := CASE WHEN v_distributed THEN 'whizbang''s tables are Citus tables (docs/scaleout.md)'
                   ELSE 'a single server' END;
    RETURN NEXT;

    -- Every privilege that changes the routing state (reading wh_partitions is harmless: a
    -- monitoring role's check() does), held by a role that is not the extension's owner.
    SELECT pg_catalog.array_agg(DISTINCT h ORDER BY h) INTO v_holders FROM (
        SELECT pg_catalog.format('%s on wh_partitions: %s',
                   CASE WHEN a.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC' ELSE a.grantee::pg_catalog.regrole::pg_catalog.text END,
                   a.privilege_type) AS h
          FROM pg_catalog.pg_class c, LATERAL pg_catalog.aclexplode(c.relacl) a
         WHERE c.oid OPERATOR(pg_catalog.=) 'whizbang.wh_partitions'::pg_catalog.regclass
           AND a.grantee OPERATOR(pg_catalog.<>) v_owner
           AND a.privilege_type OPERATOR(pg_catalog.<>) 'SELECT'
        UNION ALL
        SELECT pg_catalog.format('%s on %s: EXECUTE',
                   CASE WHEN a.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC' ELSE a.grantee::pg_catalog.regrole::pg_catalog.text END,
                   p.oid::pg_catalog.regprocedure)
          FROM pg_catalog.pg_proc p, LATERAL pg_catalog.aclexplode(p.proacl) a
         WHERE p.pronamespace OPERATOR(pg_catalog.=) 'whizbang'::pg_catalog.regnamespace
           AND p.proname OPERATOR(pg_catalog.=) '_on_shard'
           AND a.grantee OPERATOR(pg_catalog.<>) v_owner) s;
    item := 'routing privileges';
    ok := v_holders IS NULL;
    detail := CASE WHEN ok THEN 'only the extension''s owner may change routing rows or call _on_shard'
                   ELSE 'revoke: ' OPERATOR(pg_catalog.||) pg_catalog.array_to_string(v_holders, '; ') END;
    RETURN NEXT;

    IF v_distributed THEN
        SELECT pg_catalog.array_agg(p.partition_number) INTO v_have FROM whizbang.wh_partitions p;
        SELECT pg_catalog.count(*)::integer,
               (pg_catalog.array_agg(g.n ORDER BY g.n))[1:20]
          INTO v_missing_count, v_missing
          FROM pg_catalog.generate_series(0, 9999) AS g(n)
          LEFT JOIN pg_catalog.unnest(v_have) AS h(p) ON h.p OPERATOR(pg_catalog.=) g.n
         WHERE h.p IS NULL;
        SELECT pg_catalog.count(*) INTO v_extra
          FROM pg_catalog.unnest(v_have) AS h(p)
         WHERE h.p IS NULL OR h.p OPERATOR(pg_catalog.<) 0 OR h.p OPERATOR(pg_catalog.>) 9999;
        item := 'routing rows';
        ok := v_missing_count OPERATOR(pg_catalog.=) 0 AND v_extra OPERATOR(pg_catalog.=) 0;
        detail := CASE WHEN ok THEN '10000 partitions, each with its routing row'
                       ELSE pg_catalog.format('%s of the partitions 0..9999 have no routing row (first: %s), '
                                              '%s rows are outside 0..9999; restore with INSERT INTO '
                                              'whizbang.wh_partitions SELECT g FROM pg_catalog.generate_series(0, 9999) g '
                                              'ON CONFLICT DO NOTHING',
                                              v_missing_count, pg_catalog.array_to_string(v_missing, ', '), v_extra) END;
        RETURN NEXT;

        EXECUTE 'SELECT pg_catalog.count(DISTINCT p.colocationid) FROM pg_catalog.pg_dist_partition p'
                ' JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) p.logicalrelid'
                ' WHERE c.relnamespace OPERATOR(pg_catalog.=) ''whizbang''::pg_catalog.regnamespace'
                '   AND p.partmethod OPERATOR(pg_catalog.=) ''h'''
                '   AND c.relname OPERATOR(pg_catalog.<>) ''wh_idempotency_keys'''
           INTO v_groups;
        item := 'colocation';
        ok := v_groups OPERATOR(pg_catalog.=) 1;
        detail := pg_catalog.format('the distributed work tables are in %s colocation group(s); routing needs 1', v_groups);
        RETURN NEXT;
    END IF;
END;
$$;

CREATE OR REPLACE FUNCTION whizbang.distribute(p_shard_count integer DEFAULT 32) RETURNS void
    LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    failed text;
    tab text;
    v_dead_letter_seq bigint;
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
                WHERE logicalrelid OPERATOR(pg_catalog.=) 'whizbang.wh_inbox'::pg_catalog.regclass) THEN
        RAISE NOTICE 'whizbang is distributed already';
        RETURN;
    END IF;

    -- Dead letters restored from a dump of a cluster (docs/scaleout.md "Backup"): their ids came
    -- from that cluster's nodes, each made of the node's group id (the top 16 bits) and the node's
    -- own sequence, which no dump holds. A fresh cluster's nodes have the same group ids and start
    -- their sequences at 1, so they must start past the restored ids, or two dead letters share one.
    SELECT pg_catalog.max(d.dead_letter_id OPERATOR(pg_catalog.&) 281474976710655) INTO v_dead_letter_seq
      FROM whizbang.wh_dead_letters d;

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

    PERFORM pg_catalog.create_distributed_table('whizbang.wh_inbox', 'partition_number',
                                                shard_count => p_shard_count, colocate_with => 'none');
    INSERT INTO whizbang.wh_partitions (partition_number)
    SELECT p FROM pg_catalog.generate_series(0, 9999) AS p ON CONFLICT DO NOTHING;
    FOREACH tab IN ARRAY ARRAY['wh_partitions', 'wh_inbox_streams', 'wh_inbox_preleased',
                               'wh_outbox', 'wh_outbox_streams', 'wh_outbox_preleased',
                               'wh_message_deduplication', 'wh_dead_letters'] LOOP
        PERFORM pg_catalog.create_distributed_table(pg_catalog.format('whizbang.%I', tab), 'partition_number',
                                                    colocate_with => 'whizbang.wh_inbox');
    END LOOP;
    -- Idempotency keys go by a hash of their scope (Citus hashes the text): one scope, one node.
    PERFORM pg_catalog.create_distributed_table('whizbang.wh_idempotency_keys', 'scope',
                                                shard_count => p_shard_count, colocate_with => 'none');

    -- The coordinator's own copies are empty shells from now on.
    FOREACH tab IN ARRAY ARRAY['wh_setting_defaults', 'wh_settings', 'wh_idempotency_policies',
                               'wh_inbox', 'wh_inbox_streams', 'wh_inbox_preleased', 'wh_outbox',
                               'wh_outbox_streams', 'wh_outbox_preleased', 'wh_message_deduplication',
                               'wh_dead_letters', 'wh_idempotency_keys', 'wh_partitions'] LOOP
        PERFORM pg_catalog.truncate_local_data_after_distributing_table(pg_catalog.format('whizbang.%I', tab));
    END LOOP;

    IF v_dead_letter_seq IS NOT NULL THEN
        SELECT pg_catalog.string_agg(pg_catalog.format('%s:%s: %s', r.nodename, r.nodeport, r.result), '; ')
          INTO failed
          FROM pg_catalog.run_command_on_workers(pg_catalog.format(
                   $c$SELECT pg_catalog.setval('whizbang.wh_dead_letters_dead_letter_id_seq', GREATEST(%s,
                          (SELECT s.last_value FROM whizbang.wh_dead_letters_dead_letter_id_seq s)))$c$,
                   v_dead_letter_seq)) r
         WHERE NOT r.success;
        IF failed IS NOT NULL THEN
            RAISE EXCEPTION 'whizbang.distribute(): a worker''s dead-letter id sequence could not be moved past the restored ids: %', failed
                USING ERRCODE = '55000';
        END IF;
    END IF;
END
$$;

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
    -- A message row carries its partition since 0.14.0 (computed at store with the caller's
    -- p_partition_count); its companions take it from there, and what has none left takes
    -- partition_of(stream or id, 10000).
    UPDATE whizbang.wh_inbox_preleased p SET partition_number = w.partition_number
      FROM whizbang.wh_inbox w
     WHERE p.partition_number IS NULL AND w.message_id OPERATOR(pg_catalog.=) p.message_id
       AND w.consumer OPERATOR(pg_catalog.=) p.consumer;
    UPDATE whizbang.wh_inbox_preleased SET partition_number = whizbang.partition_of(message_id, c)
     WHERE partition_number IS NULL;
    UPDATE whizbang.wh_outbox_preleased p SET partition_number = w.partition_number
      FROM whizbang.wh_outbox w
     WHERE p.partition_number IS NULL AND w.message_id OPERATOR(pg_catalog.=) p.message_id;
    UPDATE whizbang.wh_outbox_preleased SET partition_number = whizbang.partition_of(message_id, c)
     WHERE partition_number IS NULL;
    -- A stream's rows and its counter: the stream's partition (the work rows' value where the
    -- stream has rows, so that a count other than 10000 still keeps them together).
    UPDATE whizbang.wh_inbox_streams s SET partition_number = w.partition_number
      FROM (SELECT DISTINCT ON (consumer, stream_id) consumer, stream_id, partition_number
              FROM whizbang.wh_inbox WHERE stream_id IS NOT NULL) w
     WHERE s.partition_number IS NULL AND w.stream_id OPERATOR(pg_catalog.=) s.stream_id
       AND w.consumer OPERATOR(pg_catalog.=) s.consumer;
    UPDATE whizbang.wh_inbox_streams SET partition_number = whizbang.partition_of(stream_id, c)
     WHERE partition_number IS NULL;
    UPDATE whizbang.wh_outbox_streams s SET partition_number = w.partition_number
      FROM (SELECT DISTINCT ON (stream_id) stream_id, partition_number
              FROM whizbang.wh_outbox WHERE stream_id IS NOT NULL) w
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
        ('wh_inbox_streams',         'stream_id, consumer, partition_number'),
        ('wh_inbox_preleased',       'instance_id, message_id, consumer, partition_number'),
        ('wh_outbox',                'message_id, partition_number'),
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

    DROP TRIGGER IF EXISTS wh_inbox_lease_end ON whizbang.wh_inbox;
    DROP TRIGGER IF EXISTS wh_inbox_lease_truncate ON whizbang.wh_inbox;
    DROP TRIGGER IF EXISTS wh_outbox_lease_end ON whizbang.wh_outbox;
    DROP TRIGGER IF EXISTS wh_outbox_lease_truncate ON whizbang.wh_outbox;
END
$$;

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
        ('inbox', 'table', 'wh_inbox', 'SELECT, INSERT, UPDATE, DELETE'),
        ('inbox', 'table', 'wh_inbox_streams', 'SELECT, INSERT, UPDATE'),
        ('inbox', 'table', 'wh_inbox_preleased', 'SELECT, INSERT, DELETE'),
        ('inbox', 'table', 'wh_dead_letters', 'INSERT'),
        ('inbox', 'sequence', 'wh_lease_token_seq', 'USAGE'),
        ('inbox', 'table', 'settings', 'SELECT'),
        ('outbox', 'routine', 'store_outbox_messages', 'EXECUTE'),
        ('outbox', 'table', 'wh_outbox', 'SELECT, INSERT'),
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
        ('relay', 'table', 'wh_outbox', 'SELECT, UPDATE, DELETE'),
        ('relay', 'table', 'wh_outbox_preleased', 'SELECT, DELETE'),
        ('relay', 'table', 'wh_dead_letters', 'INSERT'),
        ('relay', 'sequence', 'wh_lease_token_seq', 'USAGE'),
        ('relay', 'table', 'settings', 'SELECT'),
        -- grant_admin
        ('dead_letters', 'routine', 'retry_dead_letters', 'EXECUTE'),
        ('dead_letters', 'table', 'wh_dead_letters', 'SELECT, UPDATE, DELETE'),
        ('dead_letters', 'table', 'wh_inbox', 'SELECT, INSERT'),
        ('dead_letters', 'table', 'wh_inbox_streams', 'SELECT, INSERT, UPDATE'),
        ('dead_letters', 'table', 'wh_outbox', 'SELECT, INSERT'),
        ('dead_letters', 'table', 'wh_outbox_streams', 'SELECT, INSERT, UPDATE'),
        ('settings', 'table', 'wh_settings', 'SELECT, INSERT, UPDATE, DELETE'),
        ('settings', 'table', 'wh_setting_defaults', 'SELECT'),
        ('settings', 'table', 'settings', 'SELECT'),
        ('policies', 'table', 'wh_idempotency_policies', 'SELECT, INSERT, UPDATE, DELETE'),
        ('maintenance', 'routine', 'perform_maintenance', 'EXECUTE'),
        ('maintenance', 'routine', 'run_maintenance', 'EXECUTE'),
        ('maintenance', 'routine', 'cancel_work', 'EXECUTE'),
        ('maintenance', 'table', 'settings', 'SELECT'),
        ('maintenance', 'table', 'wh_inbox', 'SELECT, UPDATE, DELETE'),
        ('maintenance', 'table', 'wh_outbox', 'SELECT, UPDATE, DELETE'),
        ('maintenance', 'table', 'wh_message_deduplication', 'SELECT, UPDATE, DELETE'),
        ('maintenance', 'table', 'wh_idempotency_keys', 'SELECT, UPDATE, DELETE'),
        ('maintenance', 'table', 'wh_dead_letters', 'SELECT, UPDATE, DELETE'),
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
        ('monitor', 'table', 'wh_outbox', 'SELECT'),
        ('monitor', 'table', 'wh_dead_letters', 'SELECT'),
        ('monitor', 'table', 'wh_message_deduplication', 'SELECT'),
        ('monitor', 'table', 'wh_idempotency_keys', 'SELECT'),
        ('monitor', 'table', 'wh_partitions', 'SELECT'),
        ('monitor', 'routine', 'dedup_generations', 'EXECUTE'),
        ('monitor', 'table', 'dedup_generations', 'SELECT'),
        ('monitor', 'routine', 'peek', 'EXECUTE'),
        ('monitor', 'routine', 'lease_store', 'EXECUTE')
    ) AS c(capability, kind, object_name, privileges)
$$;

-- Sealed dedup generations (issue 31 item 3, DESIGN §3.6 "Generations"): maintenance seals a
-- generation whose span has ended and stores a Bloom filter of its keys; a store looks a new id
-- up in a sealed generation's index only when the filter says the id may be there. Sealed means
-- the generation carries the trigger wh_sealed (whizbang._refuse_sealed_write), which refuses
-- every record written into it by SQL; whizbang's own writers unseal it first.
-- ---------------------------------------------------------------------------------------
CREATE TABLE whizbang.wh_dedup_filters (
    generation  pg_catalog.regclass    PRIMARY KEY,
    key_count   bigint                 NOT NULL,
    bit_count   bigint                 NOT NULL,
    hash_count  integer                NOT NULL,
    bits        bytea                  NOT NULL,
    sealed_at   timestamptz            NOT NULL DEFAULT pg_catalog.now()
);
-- Random bits do not compress: stored out of line without trying.
ALTER TABLE whizbang.wh_dedup_filters ALTER COLUMN bits SET STORAGE EXTERNAL;
SELECT pg_catalog.pg_extension_config_dump('whizbang.wh_dedup_filters', '');
REVOKE ALL ON whizbang.wh_dedup_filters FROM PUBLIC;

COMMENT ON TABLE whizbang.wh_dedup_filters IS
    'The membership filters of sealed dedup generations (0.14.0): one Bloom filter of the keys '
    '(message_id, consumer) per generation, written by maintenance when it seals the generation and '
    'removed when it is unsealed or dropped. Internal: stores read it, nobody writes it by hand.';
COMMENT ON COLUMN whizbang.wh_dedup_filters.generation IS 'The sealed generation (a partition of whizbang.wh_message_deduplication).';
COMMENT ON COLUMN whizbang.wh_dedup_filters.key_count IS 'The records the generation held when it was sealed.';
COMMENT ON COLUMN whizbang.wh_dedup_filters.bit_count IS 'The size of the filter in bits (10 per key, in whole blocks of 512 bits: a key''s bits lie in one block).';
COMMENT ON COLUMN whizbang.wh_dedup_filters.hash_count IS 'Bits set per key (7: about 1% false positives).';
COMMENT ON COLUMN whizbang.wh_dedup_filters.bits IS 'The filter''s 64-bit words, in the server''s byte order.';
COMMENT ON COLUMN whizbang.wh_dedup_filters.sealed_at IS 'When the generation was sealed.';

CREATE FUNCTION whizbang._refuse_sealed_write()
RETURNS trigger
    LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RAISE EXCEPTION 'dedup generation %.% is sealed', TG_TABLE_SCHEMA, TG_TABLE_NAME
        USING ERRCODE = 'object_not_in_prerequisite_state',
              DETAIL = 'Stores skip a sealed generation whose membership filter lacks an id: a record '
                       'added unseen would let that id be new twice.',
              HINT = format('Unseal it first: SELECT whizbang.unseal_dedup_generation(%L); maintenance seals it again.',
                            TG_TABLE_SCHEMA || '.' || TG_TABLE_NAME);
END
$$;
REVOKE ALL ON FUNCTION whizbang._refuse_sealed_write() FROM PUBLIC;
COMMENT ON FUNCTION whizbang._refuse_sealed_write() IS
    'internal: the trigger wh_sealed of a sealed dedup generation (0.14.0): refuses every record written into it '
    '(INSERT, or an UPDATE of message_id or consumer) with 55000.';

CREATE FUNCTION whizbang.seal_dedup_generations(p_now timestamptz DEFAULT pg_catalog.now())
RETURNS integer
    AS 'MODULE_PATHNAME', 'wb_seal_dedup_generations' LANGUAGE C VOLATILE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION whizbang.seal_dedup_generations(timestamptz) FROM PUBLIC;
COMMENT ON FUNCTION whizbang.seal_dedup_generations(timestamptz) IS
    'Seals the dedup generations whose span ended at or before p_now and that are still in the window, '
    'as perform_maintenance does (0.14.0): waits for their writers, stores a membership filter of each '
    'and gives it the trigger wh_sealed. Returns how many it sealed (a generation whose lock is not '
    'granted is left alone). Errors: 42501 without DELETE on whizbang.wh_message_deduplication (the '
    'maintenance capability), 55000 on a table not in generations.';

CREATE FUNCTION whizbang.unseal_dedup_generation(p_generation pg_catalog.regclass)
RETURNS boolean
    AS 'MODULE_PATHNAME', 'wb_unseal_dedup_generation' LANGUAGE C VOLATILE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION whizbang.unseal_dedup_generation(pg_catalog.regclass) FROM PUBLIC;
COMMENT ON FUNCTION whizbang.unseal_dedup_generation(pg_catalog.regclass) IS
    'Unseals a dedup generation (0.14.0) so that SQL may write into it: takes ACCESS EXCLUSIVE on it '
    '(waits for the stores that hold it open, holds the next ones off until the transaction ends), drops '
    'its trigger wh_sealed and its filter. Returns false when it was not sealed. Errors: 22004 NULL '
    'p_generation, 22023 a table that is not a generation, 42501 without DELETE on '
    'whizbang.wh_message_deduplication (the maintenance capability), 55000 on a table not in generations.';

DROP FUNCTION whizbang._update_runs_here();
