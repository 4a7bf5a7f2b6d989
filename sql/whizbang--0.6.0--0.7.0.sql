-- whizbang 0.6.0 -> 0.7.0: waiting for work inside the server (issue 12, DESIGN §3.4). With
-- p_wait > 0, claim_work sleeps when nothing is claimable and returns as soon as a transaction
-- that stored matching work commits; with shared_preload_libraries = 'whizbang' the commit
-- wakes it, without the preload it polls inside the call.

\echo Use "ALTER EXTENSION whizbang UPDATE TO '0.7.0'" to load this file. \quit

-- ---------------------------------------------------------------------------------------
-- claim_work(..., p_wait interval DEFAULT '0') (issue 12, item 1; DESIGN §3.4)
-- ---------------------------------------------------------------------------------------
-- A new parameter makes a new function: the 10-argument claim_work is created next to the
-- 9-argument one, takes over every grant the old one carried (docs/security.md tells users to
-- grant EXECUTE on it), and the old one is dropped. Calls without p_wait are unchanged.
CREATE FUNCTION whizbang.claim_work(
    p_instance_id uuid,
    p_source text DEFAULT NULL,
    p_max_rows integer DEFAULT 100,
    p_lease_seconds integer DEFAULT 300,
    p_partitions integer[] DEFAULT NULL,
    p_partition_count integer DEFAULT 10000,
    p_max_per_stream integer DEFAULT 100,
    p_now timestamptz DEFAULT pg_catalog.now(),
    p_consumer text DEFAULT NULL,
    p_wait interval DEFAULT '0')
RETURNS TABLE (source text, message_id uuid, stream_id uuid, partition_number integer, handler_name text,
               destination text, message_type text, envelope jsonb, metadata jsonb, scope jsonb,
               attempts integer, lease_token bigint, lease_expiry timestamptz, consumer text)
    AS 'MODULE_PATHNAME', 'wb_claim_work' LANGUAGE C VOLATILE ROWS 100
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION whizbang.claim_work(uuid, text, integer, integer, integer[], integer, integer, timestamptz, text, interval)
    FROM PUBLIC;
COMMENT ON FUNCTION whizbang.claim_work(uuid, text, integer, integer, integer[], integer, integer, timestamptz, text, interval) IS
    'Leases up to p_max_rows due messages of p_source (inbox, outbox, or NULL for both) to p_instance_id '
    'until p_now + p_lease_seconds, oldest first per stream, with a fresh fencing token (lease_token); '
    'attempts + 1, and a message past max_attempts is dead-lettered instead. Never waits on locks. '
    'p_wait > 0: when nothing is claimable, sleeps up to p_wait (never beyond statement_timeout) until a '
    'transaction that stored matching work commits or work falls due, then claims; no rows when the time '
    'is up. Woken at commit with whizbang in shared_preload_libraries, else it polls. READ COMMITTED only. '
    'Errors: 22004 (incl. a NULL p_wait), 22023 (a count below 1, unknown source, p_consumer over 1024 '
    'bytes, a negative p_wait), 0A000 (p_wait > 0 above READ COMMITTED), 2202E, 54000, 22008, 25006, '
    '40001, 42501, 57014 (canceled while waiting).';

-- The grants of the old function, carried over. A grant given by a role other than the owner
-- (one holding the grant option) is given again by that role, so the grantor is kept; those
-- are given once their grantor holds the grant option on the new function. The new function
-- takes the old one's owner (a different superuser may run the update).
DO $carry_grants$
DECLARE
    v_old pg_catalog.oid := 'whizbang.claim_work(uuid, text, integer, integer, integer[], integer, integer, timestamptz, text)'
                            ::pg_catalog.regprocedure;
    v_new pg_catalog.regprocedure := 'whizbang.claim_work(uuid, text, integer, integer, integer[], integer, integer, timestamptz, text, interval)'
                            ::pg_catalog.regprocedure;
    v_owner pg_catalog.oid;
    v_old_acl pg_catalog.aclitem[];
    v_initial pg_catalog.aclitem[];
    v_updater pg_catalog.name := pg_catalog.current_user();
    v_granted integer;
    v_pass integer;
    g record;
BEGIN
    SELECT p.proowner, coalesce(p.proacl, pg_catalog.acldefault('f', p.proowner)) INTO v_owner, v_old_acl
      FROM pg_catalog.pg_proc p WHERE p.oid OPERATOR(pg_catalog.=) v_old;
    IF v_owner OPERATOR(pg_catalog.<>) (SELECT p.proowner FROM pg_catalog.pg_proc p WHERE p.oid OPERATOR(pg_catalog.=) v_new) THEN
        EXECUTE pg_catalog.format('ALTER FUNCTION %s OWNER TO %I', v_new, pg_catalog.pg_get_userbyid(v_owner));
    END IF;
    -- What a fresh install leaves: the owner's EXECUTE only. It is the function's initial
    -- privilege (pg_init_privs, below).
    SELECT p.proacl INTO v_initial FROM pg_catalog.pg_proc p WHERE p.oid OPERATOR(pg_catalog.=) v_new::pg_catalog.oid;

    -- A chain of grantors is at most as long as the list, so passes that many at most.
    FOR v_pass IN 1 .. pg_catalog.cardinality(v_old_acl) LOOP
        v_granted := 0;
        FOR g IN
            SELECT a.grantor, a.grantee, a.is_grantable
              FROM pg_catalog.aclexplode(v_old_acl) a
             WHERE a.privilege_type OPERATOR(pg_catalog.=) 'EXECUTE'
               -- not there yet (or there without the grant option the old one had)
               AND NOT EXISTS (SELECT FROM pg_catalog.pg_proc p, pg_catalog.aclexplode(p.proacl) b
                                WHERE p.oid OPERATOR(pg_catalog.=) v_new::pg_catalog.oid
                                  AND b.grantor OPERATOR(pg_catalog.=) a.grantor
                                  AND b.grantee OPERATOR(pg_catalog.=) a.grantee
                                  AND (b.is_grantable OR NOT a.is_grantable))
               -- its grantor may give it by now
               AND (a.grantor OPERATOR(pg_catalog.=) v_owner
                    OR EXISTS (SELECT FROM pg_catalog.pg_proc p, pg_catalog.aclexplode(p.proacl) b
                                WHERE p.oid OPERATOR(pg_catalog.=) v_new::pg_catalog.oid
                                  AND b.grantee OPERATOR(pg_catalog.=) a.grantor AND b.is_grantable))
        LOOP
            IF g.grantor OPERATOR(pg_catalog.<>) v_owner THEN
                EXECUTE pg_catalog.format('SET LOCAL ROLE %I', pg_catalog.pg_get_userbyid(g.grantor));
            END IF;
            EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %s%s', v_new,
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
        EXECUTE pg_catalog.format('REVOKE EXECUTE ON FUNCTION %s FROM %I', v_new, pg_catalog.pg_get_userbyid(v_owner));
    END IF;

    -- A GRANT run by an extension script is recorded as the extension's initial privilege
    -- (pg_init_privs), and pg_dump dumps only the grants that differ from those: left so, the
    -- users' grants would vanish from their dumps. The initial privileges are what a fresh
    -- install records, the users' grants stay theirs.
    UPDATE pg_catalog.pg_init_privs i SET initprivs = v_initial
     WHERE i.objoid OPERATOR(pg_catalog.=) v_new::pg_catalog.oid
       AND i.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
       AND i.objsubid OPERATOR(pg_catalog.=) 0;
END
$carry_grants$;

DROP FUNCTION whizbang.claim_work(uuid, text, integer, integer, integer[], integer, integer, timestamptz, text);
