-- whizbang 0.12.0 -> 0.13.0: the edges closed (issue 30): prepared leases settled when their
-- transaction ends, generations under REPEATABLE READ and lock timeouts, one table of required
-- privileges, errors that lead somewhere, docs that run as written.

\echo Use "ALTER EXTENSION whizbang UPDATE TO '0.13.0'" to load this file. \quit

-- ---------------------------------------------------------------------------------------
-- One table of required privileges (issue 30): what each function needs of the caller on
-- whizbang's tables, checked when a call starts, on one server and on a Citus coordinator.
-- ---------------------------------------------------------------------------------------
CREATE FUNCTION whizbang._required_privileges()
RETURNS TABLE (function_name text, needed_when text, object_name text, privileges text)
    AS 'MODULE_PATHNAME', 'wb_required_privileges' LANGUAGE C IMMUTABLE
    SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION whizbang._required_privileges() FROM PUBLIC;
COMMENT ON FUNCTION whizbang._required_privileges() IS
    'internal: the privileges each whizbang function needs of its caller on whizbang''s tables, views and '
    'sequences (needed_when: always, inbox, outbox, p_instance_id, p_sent_at), checked when a call starts, on '
    'one server and on a Citus coordinator alike; a missing one is 42501 before anything is written (docs/security.md).';

-- ---------------------------------------------------------------------------------------
-- Grants of a capability: every function documented for an admin capability (issue 30):
-- maintenance cancels pending work (cancel_work), monitor peeks and reads the lease store.
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
        ('maintenance', 'routine', 'cancel_work', 'EXECUTE'),
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
        ('monitor', 'table', 'dedup_generations', 'SELECT'),
        ('monitor', 'routine', 'peek', 'EXECUTE'),
        ('monitor', 'routine', 'lease_store', 'EXECUTE')
    ) AS c(capability, kind, object_name, privileges)
$$;

COMMENT ON FUNCTION whizbang.grant_admin(regrole, text[]) IS
    'Grants p_role what the operator capabilities need (dead_letters: retry_dead_letters; settings; policies; '
    'maintenance: perform_maintenance, run_maintenance, cancel_work; monitor: stats, queues, peek, leases, '
    'lease_store, dedup_generations, check; default: all) and returns the GRANT statements it ran. The caller '
    'must be able to grant them. Errors: 22004 null p_role or no capability, 22023 unknown capability, 42501 the '
    'caller may not grant.';
