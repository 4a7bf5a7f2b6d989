-- whizbang 0.5.0 -> 0.6.0: leases in shared memory (issue 11, DESIGN §3.8). With
-- shared_preload_libraries = 'whizbang' a claim takes its leases in a shared hash table and
-- writes nothing; without the preload leases stay in the work rows, as in 0.5.0.

\echo Use "ALTER EXTENSION whizbang UPDATE TO '0.6.0'" to load this file. \quit

-- ---------------------------------------------------------------------------------------
-- Which lease store runs (DESIGN §3.8)
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION whizbang.lease_store() RETURNS text
    LANGUAGE c STABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'wb_lease_store';
COMMENT ON FUNCTION whizbang.lease_store() IS
    'The lease store this server runs: shared_memory (whizbang in shared_preload_libraries: a claim writes '
    'nothing) or table (leases in the work rows, as before 0.6.0). Chosen at server start.';
REVOKE ALL ON FUNCTION whizbang.lease_store() FROM PUBLIC;
