-- whizbang 0.4.1 -> 0.5.0: fitting the ecosystem (issue 13): comments on every object, per-consumer
-- operations (queues, peek, cancel_work), and what poolers, pg_cron, PGXN and exporters need.

\echo Use "ALTER EXTENSION whizbang UPDATE TO '0.5.0'" to load this file. \quit

-- ---------------------------------------------------------------------------------------
-- The catalog describes itself (issue 13, item 1; DESIGN §3.7)
-- ---------------------------------------------------------------------------------------
-- Every function, procedure, table, view, sequence and column of whizbang carries a COMMENT,
-- so `\df+ whizbang.*` and `\d+ whizbang.<table>` are a usable reference: what it is, its
-- outcome words as DESIGN and docs/reference.md name them, its main errors (SQLSTATE).
-- Internal helpers have a `_` name and a comment that starts with "internal:".
-- test/pgtap/catalog_comments.sql fails for any object without a comment.

-- The settings trigger function is internal: out of the API's way with a `_` name. The
-- trigger (still called wh_settings_validate) refers to the function by oid, so it keeps
-- working; nothing else calls the function by name.
ALTER FUNCTION whizbang.wh_settings_validate() RENAME TO _settings_validate;

-- Functions ------------------------------------------------------------------------------

COMMENT ON FUNCTION whizbang.version() IS
    'Version of the loaded shared library (whizbang.control at build time). It differs from '
    'pg_extension.extversion (the SQL objects) until ALTER EXTENSION whizbang UPDATE runs. No errors.';

COMMENT ON FUNCTION whizbang.dedup_insert(uuid, text, bytea, timestamptz, timestamptz) IS
    'Records one delivery of p_message_id for consumer p_consumer in the caller''s transaction. '
    'Outcome: new | duplicate | conflict (same id, different non-null fingerprint) | expired '
    '(p_sent_at before the replay horizon, id not on record: nothing recorded). '
    'Errors: 22004 null argument, 22023 bad p_consumer or p_now, 25006 read-only, '
    '40001 above READ COMMITTED, 42501 missing grant.';

COMMENT ON FUNCTION whizbang.dedup_insert_many(uuid[], text, bytea[], timestamptz[], timestamptz) IS
    'Batch form of dedup_insert: one row per input element, in input order, ids locked in sorted '
    'order (no deadlocks). Outcome: new | duplicate (also a repeat inside the batch) | conflict | expired. '
    'Errors: 22004 null argument or element, 22023 arrays of different lengths, 2202E multi-dimensional, '
    '54000 over 1,000,000 elements, 25006, 40001, 42501; nothing written on error.';

COMMENT ON FUNCTION whizbang.fingerprint(jsonb, text[]) IS
    'SHA-256 (32 bytes) of the canonical text of p_payload (keys sorted, no whitespace, one number form; '
    'docs/fingerprint.md), the dotted p_ignore_paths removed first. NULL in, NULL out. '
    'Errors: 22004 null path, 22023 empty path or segment, 2202E, 54000 nested deeper than 10000 levels.';

COMMENT ON FUNCTION whizbang.event_uuid(text, text) IS
    'Stable uuid of a string identity (a CloudEvents source and id): UUIDv5 (RFC 9562) in the URL '
    'namespace of octet_length(p_source) || '':'' || p_source || p_id. STRICT: NULL in, NULL out. No errors.';

COMMENT ON FUNCTION whizbang.uuid_v7(timestamptz) IS
    'RFC 9562 UUIDv7 of p_at (Unix milliseconds, then random bits), strictly increasing within a backend. '
    'Errors: 22004 null p_at, 22023 infinite, 22008 before 1970, 22003 after the year 10889.';

COMMENT ON FUNCTION whizbang.partition_of(uuid, integer) IS
    'Partition number in [0, p_partition_count) of a stream id; stable across databases, machines and '
    'versions, never negative. STRICT: NULL in, NULL out. Errors: 22023 p_partition_count below 1.';

COMMENT ON FUNCTION whizbang.idempotency_begin(text, text, bytea, interval, text, interval, timestamptz, interval) IS
    'Claims the operation key (p_scope, p_key) before a handler runs, or reports what happened to it; '
    'one row. Outcome: claimed (token: your fencing token) | in_progress_duplicate | completed_duplicate '
    '(the stored result) | expired_duplicate (result purged, key remembered) | conflict (different fingerprint). '
    'Errors: 22004, 22023 (empty or over 255 bytes, TTL not positive or outside the scope''s policy), '
    '22015, 22008, 25006, 40001, 42501.';

COMMENT ON FUNCTION whizbang.idempotency_complete(text, text, bigint, jsonb, interval, timestamptz) IS
    'Completes the key with p_result if p_token still owns its in-progress claim. '
    'Outcome: completed | complete_conflict (the token no longer owns the key: nothing changed, roll back). '
    'Errors: 22004, 22023 (result TTL outside the policy), 22015, 22008, 25006, 42501.';

COMMENT ON FUNCTION whizbang.idempotency_release(text, text, bigint, timestamptz) IS
    'Gives up the in-progress claim that p_token owns (deletes it), so the key can be claimed again at once. '
    'Outcome: released | not_owner (nothing changed) | not_found. Errors: 22004, 22023, 25006, 42501.';

COMMENT ON FUNCTION whizbang.idempotency_policy(text) IS
    'The TTLs in effect for p_scope, one row: its wh_idempotency_policies row, each NULL column (or a '
    'missing row) falling back to the global setting. STRICT. Errors: 42501 missing grant.';

COMMENT ON FUNCTION whizbang.store_inbox_messages(jsonb, uuid, timestamptz, timestamptz, integer, text) IS
    'Records each element of p_messages (JSON array; MessageId, HandlerName, MessageType, Envelope required) '
    'in the dedup table for p_consumer and stores the new ones as work; returns a row only per newly stored '
    'message (duplicates and expired ones return nothing). With p_instance_id they are stored pre-leased. '
    'Errors: 22004, 22023 (bad element, named p_messages[i].Field), 54000, 22008, 25006, 40001, 42501; '
    'nothing written on error.';

COMMENT ON FUNCTION whizbang.inbox_receive(jsonb, text, timestamptz, integer) IS
    'Stores p_messages as store_inbox_messages does, but returns one row per input element, in input order. '
    'Outcome: new (stored as work) | duplicate | conflict (same id, different Envelope fingerprint) | '
    'expired (before the replay horizon). Errors: 22004, 22023, 54000, 25006, 40001, 42501; '
    'nothing written on error.';

COMMENT ON FUNCTION whizbang.claim_work(uuid, text, integer, integer, integer[], integer, integer, timestamptz, text) IS
    'Leases up to p_max_rows due messages of p_source (inbox, outbox, or NULL for both) to p_instance_id '
    'until p_now + p_lease_seconds, oldest first per stream, with a fresh fencing token (lease_token); '
    'attempts + 1, and a message past max_attempts is dead-lettered instead. Never waits. '
    'Errors: 22004, 22023 (a count below 1, unknown source, p_consumer over 1024 bytes), 2202E, 54000, '
    '22008, 40001, 42501.';

COMMENT ON FUNCTION whizbang.complete_work(text, uuid[], bigint[], text, timestamptz) IS
    'Finishes leased messages: one row per id. Outcome: completed (work row and message deleted, or marked '
    'processed under debug_mode; the dedup record stays) | not_found | lease_lost (token no longer current: '
    'nothing changed). NULL p_lease_tokens skips the fencing check. '
    'Errors: 22004, 22023 (arrays of different lengths, unknown source), 2202E, 54000, 25006, 42501.';

COMMENT ON FUNCTION whizbang.fail_work(text, uuid[], text[], bigint[], boolean[], text, timestamptz) IS
    'Records failed deliveries, keeping p_errors as last_error: one row per id. Outcome: retry_scheduled '
    '(due again at scheduled_for, after backoff) | dead_lettered (not retryable, or attempts exhausted) | '
    'not_found | lease_lost (nothing changed). Errors: 22004, 22023, 2202E, 54000, 22008, 25006, 42501.';

COMMENT ON FUNCTION whizbang.renew_leases(text, uuid[], bigint[], integer, text, timestamptz) IS
    'Extends leases to p_now + p_lease_seconds: one row per id. Outcome: renewed | not_found | lease_lost '
    '(token not current, or NULL: nothing changed). Errors: 22004 (tokens required), 22023, 2202E, 54000, '
    '22008, 25006, 42501.';

COMMENT ON FUNCTION whizbang.release_work(text, uuid[], bigint[], text, timestamptz) IS
    'Hands leased, unstarted messages back: one row per id. Outcome: released (lease cleared, the attempt '
    'refunded, claimable at once) | not_found | lease_lost (nothing changed). '
    'Errors: 22004, 22023, 2202E, 54000, 25006, 42501.';

COMMENT ON FUNCTION whizbang.retry_dead_letters(bigint[]) IS
    'Puts the named dead letters back as fresh work (attempts 0, at the end of their stream) and returns '
    'how many; dedup records are kept, unknown ids skipped. Errors: 22004 null element, 2202E, 54000, '
    '25006, 42501.';

COMMENT ON FUNCTION whizbang.store_outbox_messages(jsonb, uuid, timestamptz, timestamptz, integer) IS
    'Stores each element of p_messages (MessageId, Destination, MessageType, Envelope required) as an '
    'outbox message with its work row, in the caller''s transaction; one row per input element, '
    'was_newly_created false for an id already in wh_outbox. Sends NOTIFY whizbang_outbox when outbox_notify '
    'is on. Errors: 22004, 22023 (bad element), 54000, 22008, 25006, 40001, 42501; nothing written on error.';

COMMENT ON FUNCTION whizbang.complete_outbox_published(uuid[], boolean) IS
    'Deletes the named published outbox messages (with p_debug_mode or debug_mode: marks them processed) '
    'and returns how many; unknown or finished ids are no-ops. Not fenced: a relay that can lose its lease '
    'uses complete_work(''outbox'', ids, tokens). Errors: 2202E, 54000, 25006, 42501.';

COMMENT ON FUNCTION whizbang.perform_maintenance(timestamptz, integer) IS
    'Runs the retention tasks purge_old_deduplication, purge_expired_idempotency, purge_dead_letters and '
    'purge_processed in batches, all in the caller''s transaction; one row per task, status ok | skipped '
    '(another transaction runs it). Never deletes pending work. Errors: 22004, 22023, 25006, 42501.';

COMMENT ON PROCEDURE whizbang.run_maintenance(timestamptz, integer) IS
    'perform_maintenance''s four tasks, committing after every batch; CALL it outside a transaction block. '
    'Reports one NOTICE per task: ok or skipped, rows affected, batches, milliseconds. '
    'Errors: 25001 inside a transaction block, and those of perform_maintenance (22004, 22023, 25006, 42501).';

COMMENT ON FUNCTION whizbang.stats() IS
    'Sixteen counters from one snapshot: inbox_ and outbox_ pending, leased, scheduled, dead_lettered, '
    'oldest_pending_seconds; dedup_rows, dedup_duplicates_observed, dedup_conflicts_observed; '
    'idempotency_in_progress, idempotency_completed, idempotency_tombstones. Read-only. '
    'Errors: 42501 without SELECT on a counted table.';

COMMENT ON FUNCTION whizbang._bridge_selftest(text) IS
    'internal: exercises the C++/PostgreSQL error boundary for the test suite (docs/internals.md). '
    'Not part of the API.';

COMMENT ON FUNCTION whizbang._table_changed() IS
    'internal: statement trigger function of wh_settings and wh_idempotency_policies; drops the backends'' '
    'settings and policy caches when a change commits. Not part of the API.';

COMMENT ON FUNCTION whizbang._settings_validate() IS
    'internal: row trigger function of wh_settings (trigger wh_settings_validate; the function had that '
    'name before 0.5.0). Validates and normalises a value; an INSERT of an existing key updates it. '
    'Errors: 42704 unknown key, 23502 null value, 42804 wrong value_type, 22023 bad value.';

-- Settings -------------------------------------------------------------------------------

COMMENT ON TABLE whizbang.wh_setting_defaults IS
    'What whizbang ships: one row per setting key it reads, with its default, type and bounds. Belongs to '
    'the extension and is rebuilt by CREATE EXTENSION: do not edit. Effective values: view whizbang.settings.';
COMMENT ON COLUMN whizbang.wh_setting_defaults.setting_key IS 'Setting key, e.g. dedup_retention_days.';
COMMENT ON COLUMN whizbang.wh_setting_defaults.default_value IS 'The shipped default, as text.';
COMMENT ON COLUMN whizbang.wh_setting_defaults.value_type IS 'integer, boolean or text.';
COMMENT ON COLUMN whizbang.wh_setting_defaults.min_value IS
    'Smallest value of an integer setting, in its unit (the key''s suffix: _days, _seconds); NULL otherwise.';
COMMENT ON COLUMN whizbang.wh_setting_defaults.max_value IS
    'Largest value of an integer setting, in its unit; NULL otherwise.';
COMMENT ON COLUMN whizbang.wh_setting_defaults.allowed_values IS
    'The values a text setting may take; NULL otherwise.';
COMMENT ON COLUMN whizbang.wh_setting_defaults.description IS 'What the setting does.';

COMMENT ON TABLE whizbang.wh_settings IS
    'What users set (the seed''s table): one row per setting key, validated by trigger wh_settings_validate '
    '(an INSERT of an existing key updates it). Seeded with the defaults; pg_dump keeps the values that '
    'differ. Effective values: view whizbang.settings; docs/settings.md.';
COMMENT ON COLUMN whizbang.wh_settings.setting_key IS 'A key of wh_setting_defaults; another is error 42704.';
COMMENT ON COLUMN whizbang.wh_settings.setting_value IS
    'The value set, checked against the key''s type and bounds (22023) and stored in normal form '
    '('' +007 '' becomes 7, YES becomes true); never NULL (23502: delete the row for the default).';
COMMENT ON COLUMN whizbang.wh_settings.value_type IS
    'integer, boolean or text, filled in from wh_setting_defaults; another type is error 42804.';
COMMENT ON COLUMN whizbang.wh_settings.description IS 'Filled in from wh_setting_defaults when NULL.';

COMMENT ON VIEW whizbang.settings IS
    'Each setting key''s effective value: its wh_settings row, else the shipped default. whizbang''s '
    'functions read settings through this view and cache them per backend.';
COMMENT ON COLUMN whizbang.settings.setting_key IS 'Setting key.';
COMMENT ON COLUMN whizbang.settings.value IS 'Effective value: the wh_settings row''s, else the default.';
COMMENT ON COLUMN whizbang.settings.default_value IS 'The shipped default.';
COMMENT ON COLUMN whizbang.settings.value_type IS 'integer, boolean or text.';
COMMENT ON COLUMN whizbang.settings.is_default IS 'True when no row is set or the row holds the default value.';
COMMENT ON COLUMN whizbang.settings.description IS 'What the setting does (from wh_setting_defaults).';

-- Deduplication --------------------------------------------------------------------------

COMMENT ON TABLE whizbang.wh_message_deduplication IS
    'One row per (consumer, message_id) received: the dedup decision of dedup_insert, dedup_insert_many, '
    'store_inbox_messages and inbox_receive. Kept after completion; perform_maintenance purges it after '
    'dedup_retention_days, never while its message waits. Do not alter the table: whizbang writes it natively.';
COMMENT ON COLUMN whizbang.wh_message_deduplication.consumer IS
    'The dedup scope (receiving service or subscription), compared byte for byte; '''' is the default scope.';
COMMENT ON COLUMN whizbang.wh_message_deduplication.message_id IS 'The message id.';
COMMENT ON COLUMN whizbang.wh_message_deduplication.first_seen_at IS
    'p_now of the call that recorded it (outcome new); retention counts from here.';
COMMENT ON COLUMN whizbang.wh_message_deduplication.observation_count IS
    'Deliveries seen: 1 at the first, + 1 per duplicate or conflict.';
COMMENT ON COLUMN whizbang.wh_message_deduplication.conflict_count IS
    'Deliveries whose fingerprint differed from the stored one (outcome conflict).';
COMMENT ON COLUMN whizbang.wh_message_deduplication.fingerprint IS
    'Payload fingerprint of the delivery that recorded the id (normally whizbang.fingerprint, 32 bytes), '
    'or NULL; never changed afterwards.';

-- Handler idempotency keys ---------------------------------------------------------------

COMMENT ON TABLE whizbang.wh_idempotency_keys IS
    'One row per (scope, idempotency_key) begun: in_progress or completed, with its fencing token and '
    'stored result. Past result_expires_at a completed key is a tombstone (result purged); past '
    'tombstone_expires_at it is forgotten and deleted. Written by the idempotency_* functions.';
COMMENT ON COLUMN whizbang.wh_idempotency_keys.scope IS 'p_scope: the namespace of keys, compared byte for byte.';
COMMENT ON COLUMN whizbang.wh_idempotency_keys.idempotency_key IS 'p_key: the operation key, compared byte for byte.';
COMMENT ON COLUMN whizbang.wh_idempotency_keys.state IS 'in_progress or completed.';
COMMENT ON COLUMN whizbang.wh_idempotency_keys.token IS
    'Fencing token of the current claim (from wh_idempotency_token_seq); kept when the key completes.';
COMMENT ON COLUMN whizbang.wh_idempotency_keys.owner IS
    'p_owner of the current claim, for troubleshooting only: ownership is the token.';
COMMENT ON COLUMN whizbang.wh_idempotency_keys.fingerprint IS
    'p_fingerprint of the claim, or NULL; a different one at begin answers conflict.';
COMMENT ON COLUMN whizbang.wh_idempotency_keys.result IS
    'p_result of idempotency_complete, returned with completed_duplicate; NULL once purged (tombstone).';
COMMENT ON COLUMN whizbang.wh_idempotency_keys.result_ttl IS
    'Result TTL chosen at begin (an interval); idempotency_complete may use another.';
COMMENT ON COLUMN whizbang.wh_idempotency_keys.first_claimed_at IS
    'p_now of the first claim; kept when an abandoned claim is taken over, reset when a forgotten key is claimed again.';
COMMENT ON COLUMN whizbang.wh_idempotency_keys.claimed_at IS 'p_now of the current claim.';
COMMENT ON COLUMN whizbang.wh_idempotency_keys.lease_expires_at IS
    'claimed_at + the in-progress TTL; from then on the claim can be taken over.';
COMMENT ON COLUMN whizbang.wh_idempotency_keys.completed_at IS 'p_now of idempotency_complete; NULL while in progress.';
COMMENT ON COLUMN whizbang.wh_idempotency_keys.result_expires_at IS
    'From this time on begin answers expired_duplicate instead of completed_duplicate.';
COMMENT ON COLUMN whizbang.wh_idempotency_keys.tombstone_expires_at IS
    'From this time on the key is forgotten (claimable again) and maintenance deletes the row.';

COMMENT ON SEQUENCE whizbang.wh_idempotency_token_seq IS
    'Fencing tokens of idempotency_begin: strictly increasing across all scopes, with gaps.';

COMMENT ON TABLE whizbang.wh_idempotency_policies IS
    'Optional TTL policy per idempotency scope; a NULL column falls back to the global setting. Written by '
    'an operator role; idempotency_policy(scope) shows the values in effect.';
COMMENT ON COLUMN whizbang.wh_idempotency_policies.scope IS 'The exact scope the row applies to (no patterns).';
COMMENT ON COLUMN whizbang.wh_idempotency_policies.in_progress_ttl IS
    'Lease of a claim (interval > 0); NULL: setting idempotency_in_progress_ttl_seconds.';
COMMENT ON COLUMN whizbang.wh_idempotency_policies.default_result_ttl IS
    'Result TTL when begin passes none (interval > 0); NULL: setting idempotency_result_ttl_seconds.';
COMMENT ON COLUMN whizbang.wh_idempotency_policies.min_result_ttl IS
    'Smallest result TTL allowed (interval > 0); NULL: setting idempotency_result_ttl_min_seconds.';
COMMENT ON COLUMN whizbang.wh_idempotency_policies.max_result_ttl IS
    'Largest result TTL allowed (interval > 0); NULL: setting idempotency_result_ttl_max_seconds.';
COMMENT ON COLUMN whizbang.wh_idempotency_policies.tombstone_ttl IS
    'How long a key is remembered after its result expired (interval >= 0); NULL: setting idempotency_tombstone_days.';
COMMENT ON COLUMN whizbang.wh_idempotency_policies.description IS 'Free text.';

-- Inbox and work -------------------------------------------------------------------------

COMMENT ON TABLE whizbang.wh_inbox IS
    'The immutable inbox message as received, one row per (consumer, message_id) stored as work. Written '
    'once by the stores; deleted when its work completes, moved to wh_dead_letters by dead-lettering.';
COMMENT ON COLUMN whizbang.wh_inbox.consumer IS 'The consumer (dedup scope) the message was stored for.';
COMMENT ON COLUMN whizbang.wh_inbox.message_id IS 'MessageId.';
COMMENT ON COLUMN whizbang.wh_inbox.handler_name IS 'HandlerName: the handler that processes it.';
COMMENT ON COLUMN whizbang.wh_inbox.message_type IS 'MessageType.';
COMMENT ON COLUMN whizbang.wh_inbox.envelope IS 'Envelope: the message body.';
COMMENT ON COLUMN whizbang.wh_inbox.metadata IS 'Metadata, or NULL.';
COMMENT ON COLUMN whizbang.wh_inbox.scope IS 'Scope, or NULL.';
COMMENT ON COLUMN whizbang.wh_inbox.stream_id IS 'StreamId: a stream''s messages are handed out in arrival order; NULL for none.';
COMMENT ON COLUMN whizbang.wh_inbox.is_event IS 'IsEvent (false when not given).';
COMMENT ON COLUMN whizbang.wh_inbox.sent_at IS 'SentAt: when the sender sent it, checked against the replay horizon; NULL when not given.';
COMMENT ON COLUMN whizbang.wh_inbox.received_at IS 'p_now of the store (of retry_dead_letters: its transaction''s start).';

COMMENT ON TABLE whizbang.wh_inbox_work IS
    'The mutable work state of each wh_inbox message (schedule, attempts, lease), kept narrow so that '
    'claims, renewals and releases are HOT updates.';
COMMENT ON COLUMN whizbang.wh_inbox_work.consumer IS 'The message''s consumer.';
COMMENT ON COLUMN whizbang.wh_inbox_work.message_id IS 'The message (wh_inbox.message_id).';
COMMENT ON COLUMN whizbang.wh_inbox_work.stream_id IS 'The message''s StreamId; NULL for none.';
COMMENT ON COLUMN whizbang.wh_inbox_work.stream_seq IS 'Arrival number within (consumer, stream_id); NULL without a stream.';
COMMENT ON COLUMN whizbang.wh_inbox_work.partition_number IS
    'partition_of(coalesce(stream_id, message_id), p_partition_count) with the count given at store.';
COMMENT ON COLUMN whizbang.wh_inbox_work.scheduled_for IS
    'Not handed out before this time: ScheduledFor, the store''s p_now, or the retry time of fail_work.';
COMMENT ON COLUMN whizbang.wh_inbox_work.attempts IS 'Deliveries so far: + 1 per claim, - 1 per release.';
COMMENT ON COLUMN whizbang.wh_inbox_work.lease_instance IS 'Instance (p_instance_id) holding the current lease; NULL when unleased.';
COMMENT ON COLUMN whizbang.wh_inbox_work.lease_token IS 'Fencing token of the current lease (wh_lease_token_seq); NULL when unleased.';
COMMENT ON COLUMN whizbang.wh_inbox_work.lease_expiry IS 'End of the current lease; NULL when unleased.';
COMMENT ON COLUMN whizbang.wh_inbox_work.last_error IS 'Error text of the last fail_work.';
COMMENT ON COLUMN whizbang.wh_inbox_work.processed_at IS 'With debug_mode: when it was completed (kept, not deleted); NULL otherwise.';

COMMENT ON TABLE whizbang.wh_inbox_preleased IS
    'Inbox messages stored pre-leased to an instance (store_inbox_messages with p_instance_id) that its '
    'next claim_work has not handed back yet.';
COMMENT ON COLUMN whizbang.wh_inbox_preleased.instance_id IS 'The instance whose next claim_work hands the message back.';
COMMENT ON COLUMN whizbang.wh_inbox_preleased.consumer IS 'The message''s consumer.';
COMMENT ON COLUMN whizbang.wh_inbox_preleased.message_id IS 'The message.';
COMMENT ON COLUMN whizbang.wh_inbox_preleased.lease_token IS 'The token it was stored leased with; that claim returns it.';

COMMENT ON TABLE whizbang.wh_inbox_streams IS
    'One row per (consumer, stream_id) that has had messages: its arrival counter. A store locks it, '
    'which orders concurrent stores; maintenance deletes it once the stream has no work left.';
COMMENT ON COLUMN whizbang.wh_inbox_streams.consumer IS 'The consumer.';
COMMENT ON COLUMN whizbang.wh_inbox_streams.stream_id IS 'The stream.';
COMMENT ON COLUMN whizbang.wh_inbox_streams.last_seq IS 'stream_seq of the stream''s latest stored message.';

COMMENT ON TABLE whizbang.wh_dead_letters IS
    'Messages of both sources that failed for good (not retryable, or attempts past max_attempts), with '
    'their last error. retry_dead_letters puts them back; maintenance purges them after dead_letter_retention_days.';
COMMENT ON COLUMN whizbang.wh_dead_letters.dead_letter_id IS 'Identity: pass it to retry_dead_letters.';
COMMENT ON COLUMN whizbang.wh_dead_letters.source IS 'inbox or outbox.';
COMMENT ON COLUMN whizbang.wh_dead_letters.consumer IS 'The inbox message''s consumer; NULL for the outbox.';
COMMENT ON COLUMN whizbang.wh_dead_letters.message_id IS 'The message id.';
COMMENT ON COLUMN whizbang.wh_dead_letters.handler_name IS 'HandlerName (inbox); NULL for the outbox.';
COMMENT ON COLUMN whizbang.wh_dead_letters.destination IS 'Destination (outbox); NULL for the inbox.';
COMMENT ON COLUMN whizbang.wh_dead_letters.message_type IS 'MessageType.';
COMMENT ON COLUMN whizbang.wh_dead_letters.envelope IS 'Envelope (wh_inbox.envelope or wh_outbox.event_data).';
COMMENT ON COLUMN whizbang.wh_dead_letters.metadata IS 'Metadata, or NULL.';
COMMENT ON COLUMN whizbang.wh_dead_letters.scope IS 'Scope, or NULL.';
COMMENT ON COLUMN whizbang.wh_dead_letters.stream_id IS 'StreamId, or NULL.';
COMMENT ON COLUMN whizbang.wh_dead_letters.is_event IS 'IsEvent.';
COMMENT ON COLUMN whizbang.wh_dead_letters.sent_at IS 'SentAt (inbox); NULL for the outbox or when not given.';
COMMENT ON COLUMN whizbang.wh_dead_letters.received_at IS 'received_at of the inbox message, created_at of the outbox message.';
COMMENT ON COLUMN whizbang.wh_dead_letters.attempts IS 'Deliveries made before it was dead-lettered.';
COMMENT ON COLUMN whizbang.wh_dead_letters.last_error IS 'Error text of the last fail_work.';
COMMENT ON COLUMN whizbang.wh_dead_letters.dead_lettered_at IS 'p_now of the call that dead-lettered it; retention counts from here.';

COMMENT ON SEQUENCE whizbang.wh_dead_letters_dead_letter_id_seq IS 'Identity sequence of wh_dead_letters.dead_letter_id.';
COMMENT ON SEQUENCE whizbang.wh_lease_token_seq IS
    'Fencing tokens of claims and pre-leased stores of both sources: strictly increasing.';

-- Outbox ---------------------------------------------------------------------------------

COMMENT ON TABLE whizbang.wh_outbox IS
    'The immutable message an application sends, stored by store_outbox_messages in its own transaction. '
    'No consumer: the key is message_id. Deleted when published (completed), moved to wh_dead_letters by dead-lettering.';
COMMENT ON COLUMN whizbang.wh_outbox.message_id IS 'MessageId, the primary key.';
COMMENT ON COLUMN whizbang.wh_outbox.destination IS 'Destination: where the relay publishes it.';
COMMENT ON COLUMN whizbang.wh_outbox.message_type IS 'MessageType.';
COMMENT ON COLUMN whizbang.wh_outbox.event_data IS 'Envelope: the message body, under the seed''s column name.';
COMMENT ON COLUMN whizbang.wh_outbox.metadata IS 'Metadata, or NULL.';
COMMENT ON COLUMN whizbang.wh_outbox.scope IS 'Scope, or NULL.';
COMMENT ON COLUMN whizbang.wh_outbox.stream_id IS 'StreamId: a stream''s messages are handed out in arrival order; NULL for none.';
COMMENT ON COLUMN whizbang.wh_outbox.is_event IS 'IsEvent (false when not given).';
COMMENT ON COLUMN whizbang.wh_outbox.created_at IS 'p_now of the store (of retry_dead_letters: its transaction''s start).';

COMMENT ON TABLE whizbang.wh_outbox_work IS
    'The mutable work state of each wh_outbox message, the same shape as wh_inbox_work so that one claim '
    'engine serves both; narrow, so that leases are HOT updates.';
COMMENT ON COLUMN whizbang.wh_outbox_work.consumer IS 'Always '''' (CHECK): the outbox has no consumer.';
COMMENT ON COLUMN whizbang.wh_outbox_work.message_id IS 'The message (wh_outbox.message_id).';
COMMENT ON COLUMN whizbang.wh_outbox_work.stream_id IS 'The message''s StreamId; NULL for none.';
COMMENT ON COLUMN whizbang.wh_outbox_work.stream_seq IS 'Arrival number within stream_id; NULL without a stream.';
COMMENT ON COLUMN whizbang.wh_outbox_work.partition_number IS
    'partition_of(coalesce(stream_id, message_id), p_partition_count) with the count given at store.';
COMMENT ON COLUMN whizbang.wh_outbox_work.scheduled_for IS
    'Not handed out before this time: ScheduledFor, the store''s p_now, or the retry time of fail_work.';
COMMENT ON COLUMN whizbang.wh_outbox_work.attempts IS 'Deliveries so far: + 1 per claim, - 1 per release.';
COMMENT ON COLUMN whizbang.wh_outbox_work.lease_instance IS 'Instance (p_instance_id) holding the current lease; NULL when unleased.';
COMMENT ON COLUMN whizbang.wh_outbox_work.lease_token IS 'Fencing token of the current lease (wh_lease_token_seq); NULL when unleased.';
COMMENT ON COLUMN whizbang.wh_outbox_work.lease_expiry IS 'End of the current lease; NULL when unleased.';
COMMENT ON COLUMN whizbang.wh_outbox_work.last_error IS 'Error text of the last fail_work.';
COMMENT ON COLUMN whizbang.wh_outbox_work.processed_at IS 'With debug_mode: when it was published (kept, not deleted); NULL otherwise.';

COMMENT ON TABLE whizbang.wh_outbox_preleased IS
    'Outbox messages stored pre-leased to an instance (store_outbox_messages with p_instance_id) that its '
    'next claim_work has not handed back yet.';
COMMENT ON COLUMN whizbang.wh_outbox_preleased.instance_id IS 'The instance whose next claim_work hands the message back.';
COMMENT ON COLUMN whizbang.wh_outbox_preleased.consumer IS 'Always '''' (CHECK): the outbox has no consumer.';
COMMENT ON COLUMN whizbang.wh_outbox_preleased.message_id IS 'The message.';
COMMENT ON COLUMN whizbang.wh_outbox_preleased.lease_token IS 'The token it was stored leased with; that claim returns it.';

COMMENT ON TABLE whizbang.wh_outbox_streams IS
    'One row per outbox stream that has had messages: its arrival counter. A store locks it, which orders '
    'concurrent stores; maintenance deletes it once the stream has no work left.';
COMMENT ON COLUMN whizbang.wh_outbox_streams.consumer IS 'Always '''' (CHECK): the outbox has no consumer.';
COMMENT ON COLUMN whizbang.wh_outbox_streams.stream_id IS 'The stream.';
COMMENT ON COLUMN whizbang.wh_outbox_streams.last_seq IS 'stream_seq of the stream''s latest stored message.';

-- Observability --------------------------------------------------------------------------

COMMENT ON VIEW whizbang.stats IS
    'whizbang.stats() as a view: one row per metric, counted when read (docs/reference.md#stats).';
COMMENT ON COLUMN whizbang.stats.metric IS 'Metric name, e.g. inbox_pending.';
COMMENT ON COLUMN whizbang.stats.value IS 'A count, or seconds for the *_oldest_pending_seconds metrics.';

-- ---------------------------------------------------------------------------------------
-- Per-consumer operations: queues, peek, cancel_work (issue 13, item 7)
-- ---------------------------------------------------------------------------------------
-- stats()' work metrics per source and consumer, reading pending messages without leasing
-- them, and cancelling pending messages (docs/reference.md, docs/inbox.md "Operating the
-- queues"). All three are C functions (src/pg/queues.cpp, peek.cpp, work_outcomes.cpp).

CREATE FUNCTION whizbang.queues(p_now timestamptz DEFAULT pg_catalog.now())
RETURNS TABLE (source text, consumer text, pending bigint, leased bigint, scheduled bigint, dead_lettered bigint,
               oldest_pending_seconds bigint)
    AS 'MODULE_PATHNAME', 'wb_queues' LANGUAGE C STABLE ROWS 10
    SET search_path = pg_catalog, pg_temp;

CREATE VIEW whizbang.queues AS
SELECT q.source, q.consumer, q.pending, q.leased, q.scheduled, q.dead_lettered, q.oldest_pending_seconds
  FROM whizbang.queues() q;

CREATE FUNCTION whizbang.peek(
    p_source text DEFAULT NULL,
    p_consumer text DEFAULT NULL,
    p_limit integer DEFAULT 100,
    p_now timestamptz DEFAULT pg_catalog.now())
RETURNS TABLE (source text, message_id uuid, stream_id uuid, partition_number integer, handler_name text,
               destination text, message_type text, envelope jsonb, metadata jsonb, scope jsonb, attempts integer,
               consumer text, scheduled_for timestamptz, lease_expiry timestamptz, last_error text)
    AS 'MODULE_PATHNAME', 'wb_peek' LANGUAGE C STABLE ROWS 100
    SET search_path = pg_catalog, pg_temp;

CREATE FUNCTION whizbang.cancel_work(
    p_source text,
    p_message_ids uuid[],
    p_consumer text DEFAULT '',
    p_now timestamptz DEFAULT pg_catalog.now())
RETURNS TABLE (message_id uuid, outcome text)
    AS 'MODULE_PATHNAME', 'wb_cancel_work' LANGUAGE C VOLATILE ROWS 100
    SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION whizbang.queues(timestamptz) IS
    'Work per source and consumer at p_now: one row per (source, consumer) with unprocessed work or dead letters; '
    'the outbox''s consumer is NULL. Counted as stats() counts (its per-source metrics are these rows'' sums). '
    'Errors: 22004 NULL p_now, 22023 p_now not finite.';
COMMENT ON VIEW whizbang.queues IS
    'whizbang.queues() at now(): pending, leased, scheduled and dead-lettered messages per source and consumer. '
    'SELECT DISTINCT consumer FROM whizbang.queues lists the consumers.';
COMMENT ON COLUMN whizbang.queues.source IS 'inbox or outbox';
COMMENT ON COLUMN whizbang.queues.consumer IS 'The inbox consumer (p_consumer of the inbox functions, '''' by default); NULL for the outbox, which has none';
COMMENT ON COLUMN whizbang.queues.pending IS
    'Messages due (scheduled_for <= now) and not under a live lease, rows waiting behind their stream''s head included';
COMMENT ON COLUMN whizbang.queues.leased IS 'Messages under a live lease (lease_expiry > now): being handled';
COMMENT ON COLUMN whizbang.queues.scheduled IS 'Messages not due yet and not leased: retries and future ScheduledFor';
COMMENT ON COLUMN whizbang.queues.dead_lettered IS 'Rows of wh_dead_letters of this source and consumer';
COMMENT ON COLUMN whizbang.queues.oldest_pending_seconds IS
    'Seconds since the oldest pending message was stored (received_at, created_at), floored; 0 when none is pending';
COMMENT ON FUNCTION whizbang.peek(text, text, integer, timestamptz) IS
    'The pending messages (as queues() counts them) in the order claims take them, earliest due first and a stream''s '
    'rows in arrival order, without leasing or locking them and without counting an attempt. p_source NULL: both; '
    'p_consumer NULL: every consumer (it selects inbox rows only, as in claim_work); at most p_limit rows. '
    'Errors: 22004 NULL p_limit or p_now, 22023 unknown p_source, p_limit < 1, p_consumer over 1024 bytes.';
COMMENT ON FUNCTION whizbang.cancel_work(text, uuid[], text, timestamptz) IS
    'Removes messages that are not being handled (pending, scheduled, or with a lapsed lease), work row and message; '
    'the inbox''s dedup record stays, so a redelivery is a duplicate. One row per element, in input order: '
    'cancelled; leased (under a live lease: unchanged, its holder completes or fails it); not_found (unknown, '
    'completed, dead-lettered, another consumer''s, or cancelled earlier in the call). p_consumer is ignored for the '
    'outbox. Errors: 22004 NULL p_source, p_consumer, p_now or element; 22023 unknown p_source; 2202E; 54000 over '
    '1,000,000 ids.';

REVOKE ALL ON FUNCTION whizbang.queues(timestamptz) FROM PUBLIC;
REVOKE ALL ON whizbang.queues FROM PUBLIC;
REVOKE ALL ON FUNCTION whizbang.peek(text, text, integer, timestamptz) FROM PUBLIC;
REVOKE ALL ON FUNCTION whizbang.cancel_work(text, uuid[], text, timestamptz) FROM PUBLIC;

-- ---------------------------------------------------------------------------------------
-- Live leases (DESIGN §3.8 whizbang.leases), for operators: who holds what, until when
-- ---------------------------------------------------------------------------------------

-- Leases live in the work rows (the row lease store); a lapsed lease is listed until the row is
-- handed out again, completed, failed or released, since its token still completes the row
-- (DESIGN §3.4). Rows stored pre-leased and not handed back yet are listed too.
CREATE VIEW whizbang.leases AS
SELECT 'inbox'::text AS source, w.consumer::text AS consumer, w.message_id, w.stream_id,
       w.lease_instance AS instance_id, w.lease_token, w.lease_expiry, w.attempts
  FROM whizbang.wh_inbox_work w
 WHERE w.lease_token IS NOT NULL AND w.processed_at IS NULL
UNION ALL
SELECT 'outbox'::text, NULL::text, o.message_id, o.stream_id, o.lease_instance, o.lease_token, o.lease_expiry,
       o.attempts
  FROM whizbang.wh_outbox_work o
 WHERE o.lease_token IS NOT NULL AND o.processed_at IS NULL;

COMMENT ON VIEW whizbang.leases IS
    'Every lease held on inbox and outbox work: holder instance, fencing token, expiry. A lease whose expiry has '
    'passed is listed until the message is handed out again or finished (its token still completes it); live ones '
    'are WHERE lease_expiry > now().';
COMMENT ON COLUMN whizbang.leases.source IS 'inbox or outbox';
COMMENT ON COLUMN whizbang.leases.consumer IS 'The inbox consumer; NULL for the outbox, which has none';
COMMENT ON COLUMN whizbang.leases.message_id IS 'The leased message';
COMMENT ON COLUMN whizbang.leases.stream_id IS 'Its stream, NULL when it has none';
COMMENT ON COLUMN whizbang.leases.instance_id IS 'The holder: p_instance_id of the claim (or of the pre-leasing store)';
COMMENT ON COLUMN whizbang.leases.lease_token IS 'The fencing token the holder must pass to complete, fail, renew or release it';
COMMENT ON COLUMN whizbang.leases.lease_expiry IS 'When the lease lapses; after it another claim may take the message';
COMMENT ON COLUMN whizbang.leases.attempts IS 'Deliveries so far, this one included';

REVOKE ALL ON whizbang.leases FROM PUBLIC;
