-- whizbang 0.10.0 -> 0.11.0: scale-out on Citus, production grade (issue 22, DESIGN §3.9).
-- The routing changes are in the library (a routed call locks its shards as Citus's writes do,
-- checks their placement under the lock, routes from Citus's metadata with its invalidation, runs
-- on the nodes as the extension's owner, and treats a short answer as an error). In SQL: the
-- grants of a capability in one call, whizbang.check(), and no application privilege on the
-- routing state.

\echo Use "ALTER EXTENSION whizbang UPDATE TO '0.11.0'" to load this file. \quit

-- What each capability needs: docs/security.md, docs/inbox.md and docs/scaleout.md name the same
-- grants. kind: routine (every overload of the name), table (also views), sequence.
CREATE FUNCTION whizbang._capability_grants()
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
        ('monitor', 'table', 'wh_partitions', 'SELECT')
    ) AS c(capability, kind, object_name, privileges)
$$;
REVOKE ALL ON FUNCTION whizbang._capability_grants() FROM PUBLIC;
COMMENT ON FUNCTION whizbang._capability_grants() IS
    'internal: the grants of each capability that whizbang.grant_worker and whizbang.grant_admin apply (docs/security.md).';

-- Applies the grants of `p_capabilities` to `p_role`. Runs as the caller, who must be able to
-- grant them (the extension's owner, a superuser). One statement: all of it or, on an error,
-- nothing. On a Citus coordinator, Citus propagates the table grants to the nodes; whizbang's
-- routed code runs there as the extension's owner and needs none of the role's.
CREATE FUNCTION whizbang._grant_capabilities(p_role regrole, p_capabilities text[], p_allowed text[])
RETURNS SETOF text
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_unknown text[];
    v_grant record;
    v_routine regprocedure;
    v_sql text;
BEGIN
    IF p_role IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'p_role must not be NULL';
    END IF;
    IF p_capabilities IS NULL OR pg_catalog.cardinality(p_capabilities) OPERATOR(pg_catalog.=) 0 THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'p_capabilities must name at least one capability',
            HINT = 'One or more of: ' OPERATOR(pg_catalog.||) pg_catalog.array_to_string(p_allowed, ', ');
    END IF;
    SELECT pg_catalog.array_agg(DISTINCT c) INTO v_unknown
      FROM pg_catalog.unnest(p_capabilities) AS u(c)
     WHERE c IS NULL OR NOT (c OPERATOR(pg_catalog.=) ANY (p_allowed));
    IF v_unknown IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = pg_catalog.format('unknown capability %s', pg_catalog.array_to_string(v_unknown, ', ', 'NULL')),
            HINT = 'One or more of: ' OPERATOR(pg_catalog.||) pg_catalog.array_to_string(p_allowed, ', ');
    END IF;
    v_sql := pg_catalog.format('GRANT USAGE ON SCHEMA whizbang TO %s', p_role);
    EXECUTE v_sql;
    RETURN NEXT v_sql;
    FOR v_grant IN
        SELECT g.kind, g.object_name, g.privileges
          FROM whizbang._capability_grants() g
         WHERE g.capability OPERATOR(pg_catalog.=) ANY (p_capabilities)
         GROUP BY g.kind, g.object_name, g.privileges
         ORDER BY g.kind, g.object_name, g.privileges
    LOOP
        IF v_grant.kind OPERATOR(pg_catalog.=) 'routine' THEN
            FOR v_routine IN
                SELECT p.oid::pg_catalog.regprocedure FROM pg_catalog.pg_proc p
                 WHERE p.pronamespace OPERATOR(pg_catalog.=) 'whizbang'::pg_catalog.regnamespace
                   AND p.proname OPERATOR(pg_catalog.=) v_grant.object_name
                 ORDER BY p.oid
            LOOP
                v_sql := pg_catalog.format('GRANT EXECUTE ON ROUTINE %s TO %s', v_routine, p_role);
                EXECUTE v_sql;
                RETURN NEXT v_sql;
            END LOOP;
        ELSE
            v_sql := pg_catalog.format('GRANT %s ON %s whizbang.%I TO %s', v_grant.privileges,
                                       CASE v_grant.kind WHEN 'sequence' THEN 'SEQUENCE' ELSE 'TABLE' END,
                                       v_grant.object_name, p_role);
            EXECUTE v_sql;
            RETURN NEXT v_sql;
        END IF;
    END LOOP;
END;
$$;
REVOKE ALL ON FUNCTION whizbang._grant_capabilities(regrole, text[], text[]) FROM PUBLIC;
COMMENT ON FUNCTION whizbang._grant_capabilities(regrole, text[], text[]) IS
    'internal: applies the grants of p_capabilities (each one of p_allowed) to p_role for grant_worker and grant_admin; returns the statements.';

CREATE FUNCTION whizbang.grant_worker(p_role regrole,
    p_capabilities text[] DEFAULT ARRAY['dedup', 'idempotency', 'inbox', 'outbox', 'relay'])
RETURNS SETOF text
LANGUAGE sql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$
    SELECT whizbang._grant_capabilities(p_role, p_capabilities,
                                        ARRAY['dedup', 'idempotency', 'inbox', 'outbox', 'relay'])
$$;
REVOKE ALL ON FUNCTION whizbang.grant_worker(regrole, text[]) FROM PUBLIC;
COMMENT ON FUNCTION whizbang.grant_worker(regrole, text[]) IS
    'Grants p_role what the application capabilities need (dedup, idempotency, inbox, outbox, relay; '
    'default: all) and returns the GRANT statements it ran. The caller must be able to grant them. '
    'Errors: 22004 null p_role or no capability, 22023 unknown capability, 42501 the caller may not grant.';

CREATE FUNCTION whizbang.grant_admin(p_role regrole,
    p_capabilities text[] DEFAULT ARRAY['dead_letters', 'settings', 'policies', 'maintenance', 'monitor'])
RETURNS SETOF text
LANGUAGE sql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$
    SELECT whizbang._grant_capabilities(p_role, p_capabilities,
                                        ARRAY['dead_letters', 'settings', 'policies', 'maintenance', 'monitor'])
$$;
REVOKE ALL ON FUNCTION whizbang.grant_admin(regrole, text[]) FROM PUBLIC;
COMMENT ON FUNCTION whizbang.grant_admin(regrole, text[]) IS
    'Grants p_role what the operator capabilities need (dead_letters, settings, policies, maintenance, '
    'monitor; default: all) and returns the GRANT statements it ran. The caller must be able to grant them. '
    'Errors: 22004 null p_role or no capability, 22023 unknown capability, 42501 the caller may not grant.';

-- The install's consistency as whizbang sees it: one row per item, ok or not, and why.
CREATE FUNCTION whizbang.check()
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
                '  WHERE p.logicalrelid OPERATOR(pg_catalog.=) ''whizbang.wh_inbox_work''::pg_catalog.regclass)'
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
REVOKE ALL ON FUNCTION whizbang.check() FROM PUBLIC;
COMMENT ON FUNCTION whizbang.check() IS
    'The install''s consistency, one row per item (distributed, routing privileges, and on a distributed '
    'install routing rows and colocation): ok, and what to do where it is not. '
    'Errors: 42501 a role that may not read wh_partitions (on a distributed install).';

-- Each C function's routing policy on a distributed install, as the library declares it.
CREATE FUNCTION whizbang._routing_policies()
RETURNS TABLE (symbol text, policy text)
    AS 'MODULE_PATHNAME', 'wb_routing_policies' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION whizbang._routing_policies() IS
    'internal: the routing policy the library declares for each SQL-callable C function (WB_ROUTED_FUNCTION: local, by_message, by_partition, by_claimed_id, by_lookup, every_node, citus_sql), for the test that every one has one.';
REVOKE ALL ON FUNCTION whizbang._routing_policies() FROM PUBLIC;
ALTER FUNCTION whizbang._routing_policies() SET search_path = pg_catalog, pg_temp;

-- _on_shard gains p_shard_anchors: a fan-out's node call names the shards the coordinator routed
-- to the node, which checks each under its lock (docs/scaleout.md "How a call reaches its node").
-- Dropping the old signature also takes back any EXECUTE grant on it: 0.8.0 to 0.10.0 told
-- application roles to hold one, which let them choose a node's lease token.
DROP FUNCTION whizbang._on_shard(integer, anyelement, bigint, boolean, integer[]);
CREATE FUNCTION whizbang._on_shard(p_partition integer, p_value anyelement, p_token bigint DEFAULT NULL,
                                   p_node boolean DEFAULT false, p_partitions integer[] DEFAULT NULL,
                                   p_shard_anchors integer[] DEFAULT NULL)
RETURNS anyelement
    AS 'MODULE_PATHNAME', 'wb_on_shard' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION whizbang._on_shard(integer, anyelement, bigint, boolean, integer[], integer[]) IS
    'internal: the first argument of a routed call on a distributed install (0.8.0): returns p_value; the whizbang function it is passed to runs next to the local shards of p_partition (with p_node: splits its work among the shards of this node, p_partitions: those of the rows it names, p_shard_anchors (0.11.0): the shards a fan-out visits here, one partition each) and hands out lease token p_token. Only the extension''s owner calls it: routed calls run on the nodes as the owner.';
REVOKE ALL ON FUNCTION whizbang._on_shard(integer, anyelement, bigint, boolean, integer[], integer[]) FROM PUBLIC;
ALTER FUNCTION whizbang._on_shard(integer, anyelement, bigint, boolean, integer[], integer[]) SET search_path = pg_catalog, pg_temp;

-- 0.8.0 to 0.10.0 told application roles to hold SELECT, DELETE on wh_partitions (the no-op
-- DELETE that buys two-phase commit). Routed code runs as the extension's owner since 0.11.0:
-- the grant only lets an application break routing. Taken back.
DO $$
DECLARE
    v_owner oid;
    v_grantee record;
BEGIN
    SELECT e.extowner INTO v_owner FROM pg_catalog.pg_extension e WHERE e.extname OPERATOR(pg_catalog.=) 'whizbang';
    FOR v_grantee IN
        SELECT DISTINCT a.grantee
          FROM pg_catalog.pg_class c, LATERAL pg_catalog.aclexplode(c.relacl) a
         WHERE c.oid OPERATOR(pg_catalog.=) 'whizbang.wh_partitions'::pg_catalog.regclass
           AND a.grantee OPERATOR(pg_catalog.<>) v_owner AND a.grantee OPERATOR(pg_catalog.<>) 0
    LOOP
        EXECUTE pg_catalog.format('REVOKE ALL ON whizbang.wh_partitions FROM %s', v_grantee.grantee::pg_catalog.regrole);
    END LOOP;
END;
$$;

-- run_maintenance on a distributed install commits after every batch on every node: the
-- coordinator calls this on one shard at a time, one batch of each unfinished task per call and
-- per transaction, handing back each task's position (p_state, 7 numbers per task in
-- perform_maintenance's task order; NULL: a fresh run).
CREATE FUNCTION whizbang._maintenance_batch(p_now timestamptz, p_batch_size integer, p_state bigint[])
RETURNS TABLE (task_name text, rows_affected bigint, duration_ms double precision, status text, state bigint[])
    AS 'MODULE_PATHNAME', 'wb_maintenance_batch' LANGUAGE C VOLATILE ROWS 4;
COMMENT ON FUNCTION whizbang._maintenance_batch(timestamptz, integer, bigint[]) IS
    'internal: (0.11.0) one batch of each unfinished maintenance task on one shard, the part run_maintenance sends to a node of a distributed install; state: the task''s position for the next call, status: ok, skipped or more. Only the extension''s owner calls it.';
REVOKE ALL ON FUNCTION whizbang._maintenance_batch(timestamptz, integer, bigint[]) FROM PUBLIC;
ALTER FUNCTION whizbang._maintenance_batch(timestamptz, integer, bigint[]) SET search_path = pg_catalog, pg_temp;

-- distribute() moves the nodes' dead-letter id sequences past the ids of dead letters restored from a
-- dump (docs/scaleout.md "Backup: pg_dump and restore"); otherwise the same as 0.8.0's.
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
                WHERE logicalrelid OPERATOR(pg_catalog.=) 'whizbang.wh_inbox_work'::pg_catalog.regclass) THEN
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
