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
    'nothing) or table (leases in the work rows, as before 0.6.0). Chosen at server start. No errors.';
REVOKE ALL ON FUNCTION whizbang.lease_store() FROM PUBLIC;

-- ---------------------------------------------------------------------------------------
-- whizbang.leases reads whichever store runs (DESIGN §3.8)
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION whizbang._leases()
    RETURNS TABLE(source text, consumer text, message_id uuid, stream_id uuid, instance_id uuid,
                  lease_token bigint, lease_expiry timestamptz, attempts integer)
    LANGUAGE c STABLE
    SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'wb_leases';
COMMENT ON FUNCTION whizbang._leases() IS
    'internal: the rows of whizbang.leases, from the shared-memory lease store or from the work rows. '
    'Errors: 42501 without SELECT on the work tables.';
REVOKE ALL ON FUNCTION whizbang._leases() FROM PUBLIC;

CREATE OR REPLACE VIEW whizbang.leases AS
SELECT l.source, l.consumer COLLATE pg_catalog."C" AS consumer, l.message_id, l.stream_id, l.instance_id, l.lease_token, l.lease_expiry, l.attempts
  FROM whizbang._leases() l;
COMMENT ON VIEW whizbang.leases IS
    'Every lease held on inbox and outbox work, in whichever lease store runs (whizbang.lease_store()): holder '
    'instance, fencing token, expiry, deliveries. A lease whose expiry has passed is listed until the message is '
    'handed out again or finished (its token still completes it); live ones are WHERE lease_expiry > now(). '
    'Reading it needs SELECT on the view and on the work tables, and EXECUTE on whizbang._leases().';

-- ---------------------------------------------------------------------------------------
-- A work row deleted by hand ends its shared lease (DESIGN §3.8)
-- ---------------------------------------------------------------------------------------
-- whizbang's own calls end a row's lease when they finish the row. These triggers cover every
-- other way a work row goes (a DELETE by hand, a TRUNCATE, a cascade), so a message stored
-- again under the same id is not held by the lease of a row that no longer exists. With the
-- table store they return at once.
CREATE FUNCTION whizbang._lease_row_deleted() RETURNS trigger
    LANGUAGE c
    SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', 'wb_lease_row_deleted';
COMMENT ON FUNCTION whizbang._lease_row_deleted() IS
    'internal: trigger of the work tables; a deleted or truncated work row''s shared-memory lease ends with the '
    'deleting transaction. Errors: 39P01 when called other than as a trigger.';
REVOKE ALL ON FUNCTION whizbang._lease_row_deleted() FROM PUBLIC;

CREATE TRIGGER wh_inbox_work_lease_end AFTER DELETE ON whizbang.wh_inbox_work
    FOR EACH ROW EXECUTE FUNCTION whizbang._lease_row_deleted('inbox');
CREATE TRIGGER wh_inbox_work_lease_truncate AFTER TRUNCATE ON whizbang.wh_inbox_work
    FOR EACH STATEMENT EXECUTE FUNCTION whizbang._lease_row_deleted('inbox');
CREATE TRIGGER wh_outbox_work_lease_end AFTER DELETE ON whizbang.wh_outbox_work
    FOR EACH ROW EXECUTE FUNCTION whizbang._lease_row_deleted('outbox');
CREATE TRIGGER wh_outbox_work_lease_truncate AFTER TRUNCATE ON whizbang.wh_outbox_work
    FOR EACH STATEMENT EXECUTE FUNCTION whizbang._lease_row_deleted('outbox');

-- ---------------------------------------------------------------------------------------
-- The work rows' lease columns hold the table store's leases only
-- ---------------------------------------------------------------------------------------
COMMENT ON COLUMN whizbang.wh_inbox_work.attempts IS
    'Deliveries so far. Table lease store: + 1 per claim, - 1 per release. Shared-memory store: the ended '
    'deliveries only (written by fail_work, a takeover of a lapsed lease, dead-lettering); the current one is in '
    'whizbang.leases.';
COMMENT ON COLUMN whizbang.wh_inbox_work.lease_instance IS
    'Table lease store: instance (p_instance_id) holding the current lease; NULL when unleased, and always with '
    'the shared-memory store (read whizbang.leases).';
COMMENT ON COLUMN whizbang.wh_inbox_work.lease_token IS
    'Table lease store: fencing token of the current lease (wh_lease_token_seq); NULL when unleased, and always '
    'with the shared-memory store (read whizbang.leases).';
COMMENT ON COLUMN whizbang.wh_inbox_work.lease_expiry IS
    'Table lease store: end of the current lease; NULL when unleased, and always with the shared-memory store '
    '(read whizbang.leases).';
COMMENT ON COLUMN whizbang.wh_outbox_work.attempts IS
    'Deliveries so far. Table lease store: + 1 per claim, - 1 per release. Shared-memory store: the ended '
    'deliveries only (written by fail_work, a takeover of a lapsed lease, dead-lettering); the current one is in '
    'whizbang.leases.';
COMMENT ON COLUMN whizbang.wh_outbox_work.lease_instance IS
    'Table lease store: instance (p_instance_id) holding the current lease; NULL when unleased, and always with '
    'the shared-memory store (read whizbang.leases).';
COMMENT ON COLUMN whizbang.wh_outbox_work.lease_token IS
    'Table lease store: fencing token of the current lease (wh_lease_token_seq); NULL when unleased, and always '
    'with the shared-memory store (read whizbang.leases).';
COMMENT ON COLUMN whizbang.wh_outbox_work.lease_expiry IS
    'Table lease store: end of the current lease; NULL when unleased, and always with the shared-memory store '
    '(read whizbang.leases).';
