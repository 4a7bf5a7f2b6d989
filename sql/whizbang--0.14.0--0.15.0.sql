-- whizbang 0.14.0 -> 0.15.0: the outbox through the WAL (issue 32): emit_outbox_messages writes
-- transactional logical decoding messages that whizbang-relay publishes in commit order;
-- create_outbox_relay / drop_outbox_relay set up and remove its slot and publication; stats()
-- reports the logical slots' lag.

\echo Use "ALTER EXTENSION whizbang UPDATE TO '0.15.0'" to load this file. \quit

CREATE FUNCTION whizbang.emit_outbox_messages(
    p_messages jsonb,
    p_now timestamptz DEFAULT pg_catalog.now())
RETURNS TABLE (message_id uuid, stream_id uuid, emitted boolean)
    AS 'MODULE_PATHNAME', 'wb_emit_outbox_messages' LANGUAGE C VOLATILE ROWS 100;
REVOKE ALL ON FUNCTION whizbang.emit_outbox_messages(jsonb, timestamptz) FROM PUBLIC;
ALTER FUNCTION whizbang.emit_outbox_messages(jsonb, timestamptz) SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION whizbang.emit_outbox_messages(jsonb, timestamptz) IS
    'Emits each element of p_messages (the store_outbox_messages envelope; no ScheduledFor) as a transactional '
    'logical decoding message with the prefix whizbang.outbox, in the caller''s transaction: decoded only if it '
    'commits, relayed by whizbang-relay in commit order; no row is written. One row per input element, emitted '
    'false for an id repeated in the call. Errors: 22004, 22023, 54000, 0A000 (ScheduledFor), 25006, 55000 '
    '(wal_level below logical, or no logical slot in this database); nothing emitted on error.';

-- The relay's slot and publication in one call. pgoutput sends logical decoding messages only
-- to a subscriber that names a publication, so the relay names an empty one; the slot is made
-- first because a transaction that has written (CREATE PUBLICATION writes the catalog) may not
-- create a logical slot.
CREATE FUNCTION whizbang.create_outbox_relay(
    p_slot name DEFAULT 'whizbang_outbox',
    p_publication name DEFAULT 'whizbang_outbox',
    p_failover boolean DEFAULT false)
RETURNS TABLE (slot_name name, publication_name name, lsn pg_lsn)
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_lsn pg_lsn;
BEGIN
    IF p_slot IS NULL OR p_publication IS NULL OR p_failover IS NULL THEN
        RAISE EXCEPTION 'whizbang.create_outbox_relay: p_slot, p_publication and p_failover must not be null'
            USING ERRCODE = '22004';
    END IF;
    IF pg_catalog.current_setting('wal_level') OPERATOR(pg_catalog.<>) 'logical' THEN
        RAISE EXCEPTION 'whizbang.create_outbox_relay needs wal_level = logical (it is %)',
                        pg_catalog.current_setting('wal_level')
            USING ERRCODE = '55000', HINT = 'Set wal_level = logical and restart the server.';
    END IF;
    IF p_failover THEN
        IF pg_catalog.current_setting('server_version_num')::integer OPERATOR(pg_catalog.<) 170000 THEN
            RAISE EXCEPTION 'whizbang.create_outbox_relay: failover slots need PostgreSQL 17 or later'
                USING ERRCODE = '0A000';
        END IF;
        -- 17's five-argument form, called by name so that the script also loads on 15 and 16
        EXECUTE 'SELECT s.lsn FROM pg_catalog.pg_create_logical_replication_slot($1, ''pgoutput'','
                ' false, false, true) s'
           INTO v_lsn USING p_slot;
    ELSE
        SELECT s.lsn INTO v_lsn
          FROM pg_catalog.pg_create_logical_replication_slot(p_slot, 'pgoutput', false, false) s;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_publication p WHERE p.pubname OPERATOR(pg_catalog.=) p_publication) THEN
        EXECUTE pg_catalog.format('CREATE PUBLICATION %I', p_publication);
    END IF;
    RETURN QUERY SELECT p_slot, p_publication, v_lsn;
END
$$;
REVOKE ALL ON FUNCTION whizbang.create_outbox_relay(name, name, boolean) FROM PUBLIC;
COMMENT ON FUNCTION whizbang.create_outbox_relay(name, name, boolean) IS
    'Creates the logical replication slot (pgoutput, not two_phase; failover on 17+ when p_failover) and the '
    'empty publication that whizbang-relay reads; the slot receives what commits after it was created. Needs '
    'wal_level = logical and a role with REPLICATION (or superuser) and CREATE on the database; must be the '
    'first write of its transaction (docs/outbox.md#the-wal-outbox-0150). Errors: 22004, 55000 (wal_level not '
    'logical), 0A000 (p_failover before PostgreSQL 17), 42710 (the slot exists), 42501.';

CREATE FUNCTION whizbang.drop_outbox_relay(
    p_slot name DEFAULT 'whizbang_outbox',
    p_publication name DEFAULT 'whizbang_outbox')
RETURNS void
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_slot IS NULL OR p_publication IS NULL THEN
        RAISE EXCEPTION 'whizbang.drop_outbox_relay: p_slot and p_publication must not be null'
            USING ERRCODE = '22004';
    END IF;
    IF EXISTS (SELECT FROM pg_catalog.pg_replication_slots s WHERE s.slot_name OPERATOR(pg_catalog.=) p_slot) THEN
        PERFORM pg_catalog.pg_drop_replication_slot(p_slot);
    END IF;
    EXECUTE pg_catalog.format('DROP PUBLICATION IF EXISTS %I', p_publication);
END
$$;
REVOKE ALL ON FUNCTION whizbang.drop_outbox_relay(name, name) FROM PUBLIC;
COMMENT ON FUNCTION whizbang.drop_outbox_relay(name, name) IS
    'Drops the relay''s slot and publication (each if it exists). What the slot had not yet confirmed is not '
    'relayed: stop emitting first (docs/outbox.md#the-wal-outbox-0150). Errors: 22004, 55006 (a relay is using '
    'the slot), 42501.';

-- grant_worker's 'outbox' capability covers the WAL path too: emitting is storing by other means.
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
