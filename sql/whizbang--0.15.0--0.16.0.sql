-- whizbang 0.15.0 -> 0.16.0: operating the queues, part one (issue 33, DESIGN §3.11): an
-- operator's requeue / reschedule of named work (refusing work under a live lease unless told
-- to take it over), dead letters discarded by id or by filter and retried by filter, and a
-- handler's own retry delay on fail_work (p_retry_after).

\echo Use "ALTER EXTENSION whizbang UPDATE TO '0.16.0'" to load this file. \quit

-- ---------------------------------------------------------------------------------------
-- fail_work(..., p_retry_after interval DEFAULT NULL)
-- ---------------------------------------------------------------------------------------
-- A new parameter makes a new function: the 8-argument fail_work is created next to the
-- 7-argument one, takes over every grant the old one carried (_carry_grants, below), and the old
-- one is dropped. Calls without p_retry_after are unchanged.
CREATE FUNCTION whizbang.fail_work(
    p_source text,
    p_message_ids uuid[],
    p_errors text[],
    p_lease_tokens bigint[] DEFAULT NULL,
    p_retryable boolean[] DEFAULT NULL,
    p_consumer text DEFAULT '',
    p_now timestamptz DEFAULT pg_catalog.now(),
    p_retry_after interval DEFAULT NULL)
RETURNS TABLE (message_id uuid, outcome text, scheduled_for timestamptz)
    AS 'MODULE_PATHNAME', 'wb_fail_work' LANGUAGE C VOLATILE ROWS 100
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION whizbang.fail_work(text, uuid[], text[], bigint[], boolean[], text, timestamptz, interval)
    FROM PUBLIC;
COMMENT ON FUNCTION whizbang.fail_work(text, uuid[], text[], bigint[], boolean[], text, timestamptz, interval) IS
    'Records failed deliveries, keeping p_errors as last_error: one row per id. Outcome: retry_scheduled '
    '(due again at scheduled_for: after the backoff, or after p_retry_after when given, e.g. an HTTP '
    'Retry-After) | dead_lettered (not retryable, or attempts exhausted) | not_found | lease_lost (nothing '
    'changed). Errors: 22004, 22023 (incl. a negative p_retry_after), 2202E, 54000, 22008, 25006, 42501.';

-- Used by this script only (dropped at its end): gives p_new every EXECUTE grant p_old carries
-- and p_old's owner. A grant given by a role other than the owner (one holding the grant
-- option) is given again by that role, so the grantor is kept; those are given once their
-- grantor holds the grant option on the new function.
CREATE FUNCTION whizbang._carry_grants(p_old pg_catalog.regprocedure, p_new pg_catalog.regprocedure)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $carry_grants$
DECLARE
    v_owner pg_catalog.oid;
    v_old_acl pg_catalog.aclitem[];
    v_initial pg_catalog.aclitem[];
    v_updater pg_catalog.name := pg_catalog.current_user();
    v_granted integer;
    v_pass integer;
    g record;
BEGIN
    SELECT p.proowner, coalesce(p.proacl, pg_catalog.acldefault('f', p.proowner)) INTO v_owner, v_old_acl
      FROM pg_catalog.pg_proc p WHERE p.oid OPERATOR(pg_catalog.=) p_old::pg_catalog.oid;
    IF v_owner OPERATOR(pg_catalog.<>) (SELECT p.proowner FROM pg_catalog.pg_proc p
                                         WHERE p.oid OPERATOR(pg_catalog.=) p_new::pg_catalog.oid) THEN
        EXECUTE pg_catalog.format('ALTER FUNCTION %s OWNER TO %I', p_new, pg_catalog.pg_get_userbyid(v_owner));
    END IF;
    -- What a fresh install leaves: the owner's EXECUTE only. It is the function's initial
    -- privilege (pg_init_privs, below).
    SELECT p.proacl INTO v_initial FROM pg_catalog.pg_proc p WHERE p.oid OPERATOR(pg_catalog.=) p_new::pg_catalog.oid;

    -- A chain of grantors is at most as long as the list, so passes that many at most.
    FOR v_pass IN 1 .. pg_catalog.cardinality(v_old_acl) LOOP
        v_granted := 0;
        FOR g IN
            SELECT a.grantor, a.grantee, a.is_grantable
              FROM pg_catalog.aclexplode(v_old_acl) a
             WHERE a.privilege_type OPERATOR(pg_catalog.=) 'EXECUTE'
               -- not there yet (or there without the grant option the old one had)
               AND NOT EXISTS (SELECT FROM pg_catalog.pg_proc p, pg_catalog.aclexplode(p.proacl) b
                                WHERE p.oid OPERATOR(pg_catalog.=) p_new::pg_catalog.oid
                                  AND b.grantor OPERATOR(pg_catalog.=) a.grantor
                                  AND b.grantee OPERATOR(pg_catalog.=) a.grantee
                                  AND (b.is_grantable OR NOT a.is_grantable))
               -- its grantor may give it by now
               AND (a.grantor OPERATOR(pg_catalog.=) v_owner
                    OR EXISTS (SELECT FROM pg_catalog.pg_proc p, pg_catalog.aclexplode(p.proacl) b
                                WHERE p.oid OPERATOR(pg_catalog.=) p_new::pg_catalog.oid
                                  AND b.grantee OPERATOR(pg_catalog.=) a.grantor AND b.is_grantable))
        LOOP
            IF g.grantor OPERATOR(pg_catalog.<>) v_owner THEN
                EXECUTE pg_catalog.format('SET LOCAL ROLE %I', pg_catalog.pg_get_userbyid(g.grantor));
            END IF;
            EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %s%s', p_new,
                CASE WHEN g.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
                     ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(g.grantee)) END,
                CASE WHEN g.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
            IF g.grantor OPERATOR(pg_catalog.<>) v_owner THEN
                EXECUTE pg_catalog.format('SET LOCAL ROLE %I', v_updater);
            END IF;
            v_granted := v_granted OPERATOR(pg_catalog.+) 1;
        END LOOP;
        EXIT WHEN v_granted OPERATOR(pg_catalog.=) 0;
    END LOOP;
    -- An owner who had revoked its own EXECUTE stays without it.
    IF NOT EXISTS (SELECT FROM pg_catalog.aclexplode(v_old_acl) a
                    WHERE a.grantee OPERATOR(pg_catalog.=) v_owner AND a.grantor OPERATOR(pg_catalog.=) v_owner) THEN
        EXECUTE pg_catalog.format('REVOKE EXECUTE ON FUNCTION %s FROM %I', p_new, pg_catalog.pg_get_userbyid(v_owner));
    END IF;

    -- A GRANT run by an extension script is recorded as the extension's initial privilege
    -- (pg_init_privs), and pg_dump dumps only the grants that differ from those: left so, the
    -- users' grants would vanish from their dumps. The initial privileges are what a fresh
    -- install records, the users' grants stay theirs.
    UPDATE pg_catalog.pg_init_privs i SET initprivs = v_initial
     WHERE i.objoid OPERATOR(pg_catalog.=) p_new::pg_catalog.oid
       AND i.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
       AND i.objsubid OPERATOR(pg_catalog.=) 0;
END
$carry_grants$;

SELECT whizbang._carry_grants(
    'whizbang.fail_work(text, uuid[], text[], bigint[], boolean[], text, timestamptz)',
    'whizbang.fail_work(text, uuid[], text[], bigint[], boolean[], text, timestamptz, interval)');
DROP FUNCTION whizbang.fail_work(text, uuid[], text[], bigint[], boolean[], text, timestamptz);
DROP FUNCTION whizbang._carry_grants(pg_catalog.regprocedure, pg_catalog.regprocedure);

-- ---------------------------------------------------------------------------------------
-- requeue, reschedule: an operator moves named work to a new due time
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION whizbang.requeue(
    p_source text,
    p_message_ids uuid[],
    p_consumer text DEFAULT '',
    p_take_over boolean DEFAULT false,
    p_now timestamptz DEFAULT pg_catalog.now())
RETURNS TABLE (message_id uuid, outcome text, scheduled_for timestamptz)
    AS 'MODULE_PATHNAME', 'wb_requeue' LANGUAGE C VOLATILE ROWS 100
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION whizbang.requeue(text, uuid[], text, boolean, timestamptz) FROM PUBLIC;
COMMENT ON FUNCTION whizbang.requeue(text, uuid[], text, boolean, timestamptz) IS
    'Makes named pending or scheduled work due now: at p_now, or at its own earlier due time (attempts and stream '
    'order kept): one row per element, in input order. Outcome: requeued (scheduled_for: the due time) | leased (under a live lease: unchanged; '
    'p_take_over => true ends that lease, its holder''s token then answers lease_lost) | not_found (unknown, '
    'completed, dead-lettered, another consumer''s). p_consumer is ignored for the outbox. Errors: 22004, 22023, '
    '2202E, 54000, 25006, 42501.';

CREATE FUNCTION whizbang.reschedule(
    p_source text,
    p_message_ids uuid[],
    p_at timestamptz,
    p_consumer text DEFAULT '',
    p_take_over boolean DEFAULT false,
    p_now timestamptz DEFAULT pg_catalog.now())
RETURNS TABLE (message_id uuid, outcome text, scheduled_for timestamptz)
    AS 'MODULE_PATHNAME', 'wb_reschedule' LANGUAGE C VOLATILE ROWS 100
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION whizbang.reschedule(text, uuid[], timestamptz, text, boolean, timestamptz) FROM PUBLIC;
COMMENT ON FUNCTION whizbang.reschedule(text, uuid[], timestamptz, text, boolean, timestamptz) IS
    'Makes named work due at p_at, earlier or later (attempts and stream order kept: a later time on a stream''s '
    'head holds the stream back): one row per element, in input order. Outcome: rescheduled (scheduled_for = '
    'p_at) | leased (under a live lease: unchanged unless p_take_over) | not_found. Errors: 22004 (incl. NULL '
    'p_at), 22023 (p_at not finite), 2202E, 54000, 25006, 42501.';

-- ---------------------------------------------------------------------------------------
-- Dead letters: discarded by id or by filter, retried by filter
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION whizbang.discard_dead_letters(p_dead_letter_ids bigint[])
RETURNS integer LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_position integer;
    v_count integer;
BEGIN
    IF pg_catalog.array_ndims(p_dead_letter_ids) OPERATOR(pg_catalog.>) 1 THEN
        RAISE EXCEPTION 'p_dead_letter_ids must be a one-dimensional array' USING ERRCODE = '2202E',
            DETAIL = pg_catalog.format('It has %s dimensions.', pg_catalog.array_ndims(p_dead_letter_ids));
    END IF;
    IF pg_catalog.cardinality(p_dead_letter_ids) OPERATOR(pg_catalog.>) 1000000 THEN
        RAISE EXCEPTION 'p_dead_letter_ids has % elements, more than the limit of 1000000 per call',
            pg_catalog.cardinality(p_dead_letter_ids) USING ERRCODE = '54000', HINT = 'Split the batch into several calls.';
    END IF;
    v_position := pg_catalog.array_position(p_dead_letter_ids, NULL);
    IF v_position IS NOT NULL THEN
        RAISE EXCEPTION 'p_dead_letter_ids[%] must not be null', v_position USING ERRCODE = '22004';
    END IF;
    DELETE FROM whizbang.wh_dead_letters d
     WHERE d.dead_letter_id OPERATOR(pg_catalog.=) ANY (p_dead_letter_ids);
    GET DIAGNOSTICS v_count = ROW_COUNT;
    RETURN v_count;
END
$$;
REVOKE ALL ON FUNCTION whizbang.discard_dead_letters(bigint[]) FROM PUBLIC;
COMMENT ON FUNCTION whizbang.discard_dead_letters(bigint[]) IS
    'Deletes the dead letters named by id and returns how many there were; unknown and repeated ids are no-ops, '
    'NULL or empty input returns 0. An inbox message''s dedup record stays until its retention ends, so a '
    'redelivery is still a duplicate. Errors: 22004 a NULL element, 2202E a multidimensional array, 54000 over '
    '1,000,000 ids, 42501.';

-- The dead letters a filter selects, oldest id first: every filter given must match; at least one
-- is required, so that no call acts on every dead letter by mistake.
CREATE FUNCTION whizbang._dead_letters_matching(
    p_function text,
    p_source text,
    p_consumer text,
    p_message_type text,
    p_dead_lettered_before timestamptz,
    p_dead_lettered_after timestamptz,
    p_limit integer)
RETURNS bigint[] LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF p_source IS NULL AND p_consumer IS NULL AND p_message_type IS NULL
       AND p_dead_lettered_before IS NULL AND p_dead_lettered_after IS NULL THEN
        RAISE EXCEPTION 'whizbang.%: name at least one filter', p_function USING ERRCODE = '22023',
            HINT = 'To act on every dead letter of a source, pass p_source => ''inbox'' or ''outbox''.';
    END IF;
    IF p_source IS NOT NULL AND p_source OPERATOR(pg_catalog.<>) ALL (ARRAY['inbox', 'outbox']) THEN
        RAISE EXCEPTION 'p_source must be ''inbox'' or ''outbox'' (or NULL for both), not %',
            pg_catalog.quote_literal(p_source) USING ERRCODE = '22023';
    END IF;
    IF p_limit OPERATOR(pg_catalog.<) 1 THEN
        RAISE EXCEPTION 'p_limit must be at least 1 (NULL: no limit)' USING ERRCODE = '22023';
    END IF;
    IF pg_catalog.isfinite(p_dead_lettered_before) IS FALSE OR pg_catalog.isfinite(p_dead_lettered_after) IS FALSE THEN
        RAISE EXCEPTION 'p_dead_lettered_before and p_dead_lettered_after must be finite timestamps'
            USING ERRCODE = '22023';
    END IF;
    RETURN ARRAY(
        SELECT d.dead_letter_id FROM whizbang.wh_dead_letters d
         WHERE (p_source IS NULL OR d.source OPERATOR(pg_catalog.=) p_source)
           AND (p_consumer IS NULL OR d.consumer OPERATOR(pg_catalog.=) p_consumer)
           AND (p_message_type IS NULL OR d.message_type OPERATOR(pg_catalog.=) p_message_type)
           AND (p_dead_lettered_before IS NULL OR d.dead_lettered_at OPERATOR(pg_catalog.<) p_dead_lettered_before)
           AND (p_dead_lettered_after IS NULL OR d.dead_lettered_at OPERATOR(pg_catalog.>=) p_dead_lettered_after)
         ORDER BY d.dead_letter_id
         LIMIT p_limit);
END
$$;
REVOKE ALL ON FUNCTION whizbang._dead_letters_matching(text, text, text, text, timestamptz, timestamptz, integer)
    FROM PUBLIC;
COMMENT ON FUNCTION whizbang._dead_letters_matching(text, text, text, text, timestamptz, timestamptz, integer) IS
    'internal: the ids of the dead letters that discard_dead_letters_matching / retry_dead_letters_matching act on.';

CREATE FUNCTION whizbang.discard_dead_letters_matching(
    p_source text DEFAULT NULL,
    p_consumer text DEFAULT NULL,
    p_message_type text DEFAULT NULL,
    p_dead_lettered_before timestamptz DEFAULT NULL,
    p_dead_lettered_after timestamptz DEFAULT NULL,
    p_limit integer DEFAULT NULL)
RETURNS integer LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_ids bigint[] := whizbang._dead_letters_matching('discard_dead_letters_matching', p_source, p_consumer,
                                                      p_message_type, p_dead_lettered_before, p_dead_lettered_after,
                                                      p_limit);
    v_count integer;
BEGIN
    -- By id, as selected: one statement a Citus coordinator sends to the shards as it is.
    DELETE FROM whizbang.wh_dead_letters d WHERE d.dead_letter_id OPERATOR(pg_catalog.=) ANY (v_ids);
    GET DIAGNOSTICS v_count = ROW_COUNT;
    RETURN v_count;
END
$$;
REVOKE ALL ON FUNCTION whizbang.discard_dead_letters_matching(text, text, text, timestamptz, timestamptz, integer)
    FROM PUBLIC;
COMMENT ON FUNCTION whizbang.discard_dead_letters_matching(text, text, text, timestamptz, timestamptz, integer) IS
    'Deletes the dead letters that match every filter given (p_source, p_consumer, p_message_type, dead-lettered '
    'before p_dead_lettered_before / at or after p_dead_lettered_after), at most p_limit of them oldest first, and '
    'returns how many. At least one filter is required. Errors: 22023 no filter, an unknown p_source, p_limit below 1, '
    'a timestamp not finite; 42501.';

CREATE FUNCTION whizbang.retry_dead_letters_matching(
    p_source text DEFAULT NULL,
    p_consumer text DEFAULT NULL,
    p_message_type text DEFAULT NULL,
    p_dead_lettered_before timestamptz DEFAULT NULL,
    p_dead_lettered_after timestamptz DEFAULT NULL,
    p_limit integer DEFAULT NULL)
RETURNS integer LANGUAGE sql VOLATILE SET search_path = pg_catalog, pg_temp
RETURN whizbang.retry_dead_letters(whizbang._dead_letters_matching(
    'retry_dead_letters_matching', p_source, p_consumer, p_message_type, p_dead_lettered_before,
    p_dead_lettered_after, p_limit));
REVOKE ALL ON FUNCTION whizbang.retry_dead_letters_matching(text, text, text, timestamptz, timestamptz, integer)
    FROM PUBLIC;
COMMENT ON FUNCTION whizbang.retry_dead_letters_matching(text, text, text, timestamptz, timestamptz, integer) IS
    'Puts the dead letters that match every filter given back as fresh work, as retry_dead_letters does (oldest '
    'first, at most p_limit, at most 1,000,000 per call), and returns how many went back. At least one filter is '
    'required. Errors: 22023 no filter, an unknown p_source, p_limit below 1, a timestamp not finite; 54000 over '
    '1,000,000 matches (pass p_limit); 42501.';

-- ---------------------------------------------------------------------------------------
-- Retry policy per consumer (issue 33 item 4)
-- ---------------------------------------------------------------------------------------
-- One row per (source, consumer) with a policy of its own; each NULL column is the database
-- setting. Read by claims (max_attempts: a row past it is dead-lettered) and fail_work (all of
-- it), as the extension's owner: the roles that claim and fail work need no grant on it.
CREATE TABLE whizbang.wh_retry_policies (
    source               text NOT NULL CHECK (source IN ('inbox', 'outbox')),
    consumer             text COLLATE "C" NOT NULL DEFAULT ''
                              CHECK (pg_catalog.octet_length(consumer) OPERATOR(pg_catalog.<=) 1024),
    max_attempts         integer CHECK (max_attempts BETWEEN 1 AND 1000000),
    retry_base_seconds   integer CHECK (retry_base_seconds BETWEEN 0 AND 31536000),
    retry_max_seconds    integer CHECK (retry_max_seconds BETWEEN 0 AND 31536000),
    retry_jitter_percent integer CHECK (retry_jitter_percent BETWEEN 0 AND 100),
    description          text,
    PRIMARY KEY (source, consumer),
    CONSTRAINT wh_retry_policies_outbox_consumer CHECK (source OPERATOR(pg_catalog.=) 'inbox' OR consumer OPERATOR(pg_catalog.=) '')
);

-- Backends cache the policies; a committed change drops those caches.
CREATE TRIGGER wh_retry_policies_changed
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON whizbang.wh_retry_policies
    FOR EACH STATEMENT EXECUTE FUNCTION whizbang._table_changed();
SELECT pg_catalog.pg_extension_config_dump('whizbang.wh_retry_policies', '');

COMMENT ON TABLE whizbang.wh_retry_policies IS
    'Retry policy per source and consumer (0.16.0): each column overrides the database setting of the same name '
    'for that consumer''s work (NULL: the setting). Read by claim_work (max_attempts) and fail_work (all). The '
    'outbox has one consumer, ''''.';
COMMENT ON COLUMN whizbang.wh_retry_policies.source IS 'inbox or outbox.';
COMMENT ON COLUMN whizbang.wh_retry_policies.consumer IS 'The inbox consumer the row applies to (exact, byte for byte; '''' for the outbox).';
COMMENT ON COLUMN whizbang.wh_retry_policies.max_attempts IS
    'Deliveries of one message before it is dead-lettered (1..1000000; NULL: the max_attempts setting).';
COMMENT ON COLUMN whizbang.wh_retry_policies.retry_base_seconds IS
    'First retry delay, doubled per attempt (0..31536000; NULL: the retry_base_seconds setting).';
COMMENT ON COLUMN whizbang.wh_retry_policies.retry_max_seconds IS
    'Cap of the retry delay (0..31536000; NULL: the retry_max_seconds setting).';
COMMENT ON COLUMN whizbang.wh_retry_policies.retry_jitter_percent IS
    'Random share of each retry delay: the delay is multiplied by a factor in [1 - percent/100, 1] (0..100; '
    'NULL: 25).';
COMMENT ON COLUMN whizbang.wh_retry_policies.description IS 'Free text.';
COMMENT ON TRIGGER wh_retry_policies_changed ON whizbang.wh_retry_policies IS
    'Drops the backends'' cached policies when a change commits.';

-- A distributed install: the policies are a reference table, on every node, as the settings.
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
        -- An install distributed before 0.16.0: the update made the retry policies' table on every
        -- node, each its own; it is shared from here on (the coordinator's rows are copied).
        IF NOT EXISTS (SELECT FROM pg_catalog.pg_dist_partition
                        WHERE logicalrelid OPERATOR(pg_catalog.=) 'whizbang.wh_retry_policies'::pg_catalog.regclass) THEN
            PERFORM pg_catalog.set_config('citus.enable_unsafe_triggers', 'on', true);
            PERFORM pg_catalog.create_reference_table('whizbang.wh_retry_policies');
            PERFORM pg_catalog.truncate_local_data_after_distributing_table('whizbang.wh_retry_policies');
            RAISE NOTICE 'whizbang: wh_retry_policies is a reference table now, on every node';
            RETURN;
        END IF;
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
    PERFORM pg_catalog.create_reference_table('whizbang.wh_retry_policies');

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
    FOREACH tab IN ARRAY ARRAY['wh_setting_defaults', 'wh_settings', 'wh_idempotency_policies', 'wh_retry_policies',
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

-- An install distributed before this update: the table can become a reference table only once
-- every node has it, and Citus updates the workers after the coordinator. Until the operator runs
-- whizbang.distribute() again (docs/scaleout.md; check() says so), every node reads its own,
-- empty copy: the database settings apply everywhere.
DO $$
DECLARE
    v_distributed boolean := false;
BEGIN
    IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
        EXECUTE 'SELECT pg_catalog.citus_is_coordinator() AND EXISTS (SELECT FROM pg_catalog.pg_dist_partition p'
                '  WHERE p.logicalrelid OPERATOR(pg_catalog.=) ''whizbang.wh_inbox''::pg_catalog.regclass)'
           INTO v_distributed;
    END IF;
    IF v_distributed THEN
        RAISE NOTICE 'whizbang 0.16.0: run SELECT whizbang.distribute() once every node is updated, so that the retry '
                     'policies (wh_retry_policies) are shared by every node';
    END IF;
END
$$;

-- ---------------------------------------------------------------------------------------
-- Throughput counters per source and consumer (issue 33 item 6)
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION whizbang._counters()
RETURNS TABLE (source text, consumer text, stored bigint, claimed bigint, completed bigint, failed bigint,
               dead_lettered bigint)
    AS 'MODULE_PATHNAME', 'wb_counters' LANGUAGE C VOLATILE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION whizbang._counters() FROM PUBLIC;
COMMENT ON FUNCTION whizbang._counters() IS
    'internal: this server''s throughput counters for this database (shared memory; no rows without '
    'shared_preload_libraries = whizbang); counters() adds up every node''s on a Citus coordinator.';

-- On a distributed install the work is counted where it runs, on the nodes: the coordinator adds
-- up its own and every worker's (a node that cannot be reached is left out, with a NOTICE).
CREATE FUNCTION whizbang.counters()
RETURNS TABLE (source text, consumer text, stored bigint, claimed bigint, completed bigint, failed bigint,
               dead_lettered bigint)
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_distributed boolean := false;
    v_unreachable bigint;
    v_results text[];
BEGIN
    IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
        EXECUTE 'SELECT pg_catalog.citus_is_coordinator() AND EXISTS (SELECT FROM pg_catalog.pg_dist_partition p'
                '  WHERE p.logicalrelid OPERATOR(pg_catalog.=) ''whizbang.wh_inbox''::pg_catalog.regclass)'
           INTO v_distributed;
    END IF;
    IF NOT v_distributed THEN
        RETURN QUERY SELECT c.source, c.consumer, c.stored, c.claimed, c.completed, c.failed, c.dead_lettered
                       FROM whizbang._counters() c ORDER BY 1, 2;
        RETURN;
    END IF;
    EXECUTE $q$SELECT pg_catalog.array_agg(r.result) FILTER (WHERE r.success),
                      pg_catalog.count(*) FILTER (WHERE NOT r.success)
                 FROM pg_catalog.run_command_on_workers(
                        'SELECT COALESCE(pg_catalog.json_agg(c), ''[]'') FROM whizbang._counters() c') r$q$
       INTO v_results, v_unreachable;
    IF v_unreachable OPERATOR(pg_catalog.>) 0 THEN
        RAISE NOTICE 'whizbang: counters() could not reach % node(s); their counts are missing', v_unreachable;
    END IF;
    RETURN QUERY
    SELECT a.source, a.consumer, pg_catalog.sum(a.stored)::bigint, pg_catalog.sum(a.claimed)::bigint,
           pg_catalog.sum(a.completed)::bigint, pg_catalog.sum(a.failed)::bigint, pg_catalog.sum(a.dead_lettered)::bigint
      FROM (SELECT c.source, c.consumer, c.stored, c.claimed, c.completed, c.failed, c.dead_lettered
              FROM whizbang._counters() c
            UNION ALL
            SELECT x.source, x.consumer, x.stored, x.claimed, x.completed, x.failed, x.dead_lettered
              FROM pg_catalog.unnest(v_results) AS n(result),
                   LATERAL pg_catalog.jsonb_to_recordset(n.result::pg_catalog.jsonb)
                       AS x(source text, consumer text, stored bigint, claimed bigint, completed bigint, failed bigint,
                            dead_lettered bigint)) a
     GROUP BY a.source, a.consumer
     ORDER BY 1, 2;
END
$$;
REVOKE ALL ON FUNCTION whizbang.counters() FROM PUBLIC;
COMMENT ON FUNCTION whizbang.counters() IS
    'Throughput per source and consumer since the server started: messages stored, claimed (deliveries), completed, '
    'failed (fail_work calls'' ids) and dead-lettered, monotonic (a restart starts them at 0 again); a transaction''s '
    'counts are added when it commits. consumer NULL: the consumers beyond whizbang.max_counted_consumers, together. '
    'Needs shared_preload_libraries = whizbang (no rows without it). On a Citus coordinator: every node''s, added up. '
    'Errors: 42501 (a missing grant).';

CREATE VIEW whizbang.counters AS
    SELECT c.source, c.consumer, c.stored, c.claimed, c.completed, c.failed, c.dead_lettered FROM whizbang.counters() c;
REVOKE ALL ON whizbang.counters FROM PUBLIC;
COMMENT ON VIEW whizbang.counters IS 'whizbang.counters(): throughput per source and consumer since the server started.';
COMMENT ON COLUMN whizbang.counters.source IS 'inbox or outbox.';
COMMENT ON COLUMN whizbang.counters.consumer IS
    'The inbox consumer ('''' for the outbox); NULL: the consumers beyond whizbang.max_counted_consumers, together.';
COMMENT ON COLUMN whizbang.counters.stored IS 'Messages stored as work (duplicates not; retried dead letters too).';
COMMENT ON COLUMN whizbang.counters.claimed IS 'Deliveries handed out by claim_work.';
COMMENT ON COLUMN whizbang.counters.completed IS 'Messages completed (complete_work, complete_outbox_published).';
COMMENT ON COLUMN whizbang.counters.failed IS 'Failed deliveries reported by fail_work (retried or dead-lettered).';
COMMENT ON COLUMN whizbang.counters.dead_lettered IS 'Messages moved to wh_dead_letters (by fail_work or by a claim).';

-- check() reports whether the retry policies are shared on a distributed install.
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

        -- 0.16.0's retry policies on an install distributed before it (the update cannot share them).
        item := 'retry policies';
        EXECUTE 'SELECT EXISTS (SELECT FROM pg_catalog.pg_dist_partition p'
                '  WHERE p.logicalrelid OPERATOR(pg_catalog.=) ''whizbang.wh_retry_policies''::pg_catalog.regclass)'
           INTO ok;
        detail := CASE WHEN ok THEN 'wh_retry_policies is a reference table: every node applies the same policies'
                       ELSE 'wh_retry_policies is not shared yet (an install distributed before 0.16.0): run SELECT '
                            'whizbang.distribute() on the coordinator once every node is updated' END;
        RETURN NEXT;
    END IF;
END;
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
        ('outbox', 'routine', 'emit_outbox_messages', 'EXECUTE'),
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
        ('dead_letters', 'routine', 'retry_dead_letters_matching', 'EXECUTE'),
        ('dead_letters', 'routine', 'discard_dead_letters', 'EXECUTE'),
        ('dead_letters', 'routine', 'discard_dead_letters_matching', 'EXECUTE'),
        ('dead_letters', 'routine', '_dead_letters_matching', 'EXECUTE'),
        ('dead_letters', 'table', 'wh_dead_letters', 'SELECT, UPDATE, DELETE'),
        ('dead_letters', 'table', 'wh_inbox', 'SELECT, INSERT'),
        ('dead_letters', 'table', 'wh_inbox_streams', 'SELECT, INSERT, UPDATE'),
        ('dead_letters', 'table', 'wh_outbox', 'SELECT, INSERT'),
        ('dead_letters', 'table', 'wh_outbox_streams', 'SELECT, INSERT, UPDATE'),
        ('settings', 'table', 'wh_settings', 'SELECT, INSERT, UPDATE, DELETE'),
        ('settings', 'table', 'wh_setting_defaults', 'SELECT'),
        ('settings', 'table', 'settings', 'SELECT'),
        ('policies', 'table', 'wh_idempotency_policies', 'SELECT, INSERT, UPDATE, DELETE'),
        ('policies', 'table', 'wh_retry_policies', 'SELECT, INSERT, UPDATE, DELETE'),
        ('maintenance', 'routine', 'perform_maintenance', 'EXECUTE'),
        ('maintenance', 'routine', 'run_maintenance', 'EXECUTE'),
        ('maintenance', 'routine', 'cancel_work', 'EXECUTE'),
        ('maintenance', 'routine', 'requeue', 'EXECUTE'),
        ('maintenance', 'routine', 'reschedule', 'EXECUTE'),
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
        ('monitor', 'table', 'wh_retry_policies', 'SELECT'),
        ('monitor', 'routine', 'counters', 'EXECUTE'),
        ('monitor', 'routine', '_counters', 'EXECUTE'),
        ('monitor', 'table', 'counters', 'SELECT'),
        ('monitor', 'routine', 'dedup_generations', 'EXECUTE'),
        ('monitor', 'table', 'dedup_generations', 'SELECT'),
        ('monitor', 'routine', 'peek', 'EXECUTE'),
        ('monitor', 'routine', 'lease_store', 'EXECUTE')
    ) AS c(capability, kind, object_name, privileges)
$$;
COMMENT ON FUNCTION whizbang.grant_admin(regrole, text[]) IS
    'Grants p_role what the operator capabilities need (dead_letters: retry_dead_letters, '
    'retry_dead_letters_matching, discard_dead_letters, discard_dead_letters_matching; settings; policies: '
    'wh_idempotency_policies, wh_retry_policies; '
    'maintenance: perform_maintenance, run_maintenance, cancel_work, requeue, reschedule; monitor: stats, queues, '
    'counters, peek, leases, lease_store, dedup_generations, check; default: all) and returns the GRANT statements it ran. '
    'The caller must be able to grant them. Errors: 22004 null p_role or no capability, 22023 unknown capability, '
    '42501 the caller may not grant.';
