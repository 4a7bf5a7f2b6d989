-- whizbang 0.4.0 -> 0.4.1: hardening (issue 10). SQL run by whizbang no longer depends on the
-- caller's search_path, per-stream order holds after a lease lapses, maintenance can commit
-- between batches (run_maintenance).

\echo Use "ALTER EXTENSION whizbang UPDATE TO '0.4.1'" to load this file. \quit

-- ---------------------------------------------------------------------------------------
-- search_path immunity (issue 10, item 1; DESIGN §4, docs/security.md "search_path")
-- ---------------------------------------------------------------------------------------
-- Every function runs with search_path = pg_catalog, pg_temp in force, whatever the caller's
-- or the database's: a name that whizbang's SQL leaves unqualified by mistake (its SQL is
-- qualified throughout) still cannot reach an object planted in public by a role that may
-- create there, which would run with the caller's rights (a superuser's, the worker's).
-- The pure functions (fingerprint, event_uuid, uuid_v7, partition_of, version) look up no
-- names today; they get the clause too, so the rule has no exception to remember.
ALTER FUNCTION whizbang.version() SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION whizbang._bridge_selftest(text) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION whizbang._table_changed() SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION whizbang.dedup_insert(uuid, text, bytea, timestamptz, timestamptz)
    SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION whizbang.dedup_insert_many(uuid[], text, bytea[], timestamptz[], timestamptz)
    SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION whizbang.fingerprint(jsonb, text[]) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION whizbang.event_uuid(text, text) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION whizbang.uuid_v7(timestamptz) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION whizbang.partition_of(uuid, integer) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION whizbang.idempotency_policy(text) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION whizbang.idempotency_begin(text, text, bytea, interval, text, interval, timestamptz, interval)
    SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION whizbang.idempotency_complete(text, text, bigint, jsonb, interval, timestamptz)
    SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION whizbang.idempotency_release(text, text, bigint, timestamptz) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION whizbang.store_inbox_messages(jsonb, uuid, timestamptz, timestamptz, integer, text)
    SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION whizbang.inbox_receive(jsonb, text, timestamptz, integer) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION whizbang.claim_work(uuid, text, integer, integer, integer[], integer, integer, timestamptz, text)
    SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION whizbang.complete_work(text, uuid[], bigint[], text, timestamptz) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION whizbang.fail_work(text, uuid[], text[], bigint[], boolean[], text, timestamptz)
    SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION whizbang.renew_leases(text, uuid[], bigint[], integer, text, timestamptz)
    SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION whizbang.release_work(text, uuid[], bigint[], text, timestamptz) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION whizbang.retry_dead_letters(bigint[]) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION whizbang.store_outbox_messages(jsonb, uuid, timestamptz, timestamptz, integer)
    SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION whizbang.complete_outbox_published(uuid[], boolean) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION whizbang.perform_maintenance(timestamptz, integer) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION whizbang.stats() SET search_path = pg_catalog, pg_temp;

-- ---------------------------------------------------------------------------------------
-- run_maintenance: perform_maintenance's tasks, committing after every batch (issue 10, item 7)
-- ---------------------------------------------------------------------------------------
-- perform_maintenance runs every batch in the caller's transaction, which holds its row locks
-- and the xmin horizon to the end. CALLed outside a transaction block (pg_cron does), this
-- procedure commits after every batch, like the background worker. It has no SET search_path
-- clause on purpose: PostgreSQL forbids COMMIT in a procedure that has one; it sets
-- search_path = pg_catalog, pg_temp itself in each of its transactions
-- (src/pg/maintenance_procedure.cpp).
CREATE PROCEDURE whizbang.run_maintenance(
    p_now timestamptz DEFAULT pg_catalog.now(),
    p_batch_size integer DEFAULT 10000)
    AS 'MODULE_PATHNAME', 'wb_run_maintenance' LANGUAGE C;

COMMENT ON PROCEDURE whizbang.run_maintenance(timestamptz, integer) IS
    'perform_maintenance''s four tasks, committing after every batch; CALL it outside a transaction block. '
    'Reports one NOTICE per task: ok or skipped, rows affected, batches, milliseconds.';

REVOKE ALL ON PROCEDURE whizbang.run_maintenance(timestamptz, integer) FROM PUBLIC;
