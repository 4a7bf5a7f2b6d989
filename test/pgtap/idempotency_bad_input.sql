-- Bad input to the handler idempotency keys (DESIGN §1.4, §3.5): NULL or empty scope and key,
-- scopes and keys over 255 bytes, non-positive or negative TTLs and waits, missing or
-- infinite times, tokens that were never issued, bad policy rows and settings. Every bad call
-- raises an ERROR with the documented SQLSTATE and a message naming the parameter, or answers
-- with a clear outcome - and writes nothing.
--
-- After every call, pg_temp.unchanged() checks that the whole wh_idempotency_keys table is
-- exactly as it was at the previous check, and that no whizbang table took any write since then,
-- rolled back or not (pg_temp.writes() in lib/writes.sql: an error rolls back what the call
-- wrote, so the table alone could not tell). Non-ASCII text is built from UTF-8 bytes with
-- convert_from(..., server_encoding), as in bad_input_identity.sql.
BEGIN;
SELECT plan(115);

CREATE FUNCTION pg_temp.keys_image() RETURNS text
LANGUAGE sql AS $$
    SELECT coalesce(md5(string_agg(to_jsonb(k)::text, E'\n' ORDER BY k.scope, k.idempotency_key)), 'empty')
      FROM whizbang.wh_idempotency_keys k
$$;
\ir lib/writes.sql

CREATE TEMP TABLE keys_snapshot AS
SELECT pg_temp.keys_image() AS image, (SELECT count(*) FROM whizbang.wh_idempotency_keys) AS rows_at,
       pg_temp.writes() AS writes;

-- Passes when the table is as at the previous check and nothing was written since, not even
-- by a call that then failed (or when it has exactly p_new_rows more rows), then takes a new
-- snapshot.
CREATE FUNCTION pg_temp.unchanged(p_description text, p_new_rows bigint DEFAULT 0) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    v_before text;
    v_rows_before bigint;
    v_writes_before text;
    v_rows bigint;
    v_result text;
BEGIN
    SELECT image, rows_at, writes INTO v_before, v_rows_before, v_writes_before FROM keys_snapshot;
    SELECT count(*) INTO v_rows FROM whizbang.wh_idempotency_keys;
    IF p_new_rows = 0 THEN
        v_result := is(pg_temp.keys_image() || ' / writes: ' || pg_temp.writes(),
                       v_before || ' / writes: ' || v_writes_before, p_description);
    ELSE
        v_result := is(v_rows - v_rows_before, p_new_rows, p_description);
    END IF;
    UPDATE keys_snapshot SET image = pg_temp.keys_image(), rows_at = v_rows, writes = pg_temp.writes();
    RETURN v_result;
END
$$;

CREATE FUNCTION pg_temp.utf8(p_hex text) RETURNS text
LANGUAGE sql AS $$ SELECT convert_from(decode(p_hex, 'hex'), current_setting('server_encoding')) $$;

-- The message of the error a statement raises (NULL when it succeeds).
CREATE FUNCTION pg_temp.error_of(p_sql text) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE p_sql;
    RETURN NULL;
EXCEPTION WHEN OTHERS THEN
    RETURN SQLERRM;
END
$$;

-- Two keys to aim at: one held (in progress), one completed.
CREATE TEMP TABLE held AS
SELECT token FROM whizbang.idempotency_begin('bad', 'held', '\x01', p_now => '2024-05-01 00:00:00+00');
CREATE TEMP TABLE done AS
SELECT token FROM whizbang.idempotency_begin('bad', 'done', '\x02', p_now => '2024-05-01 00:00:00+00');
SELECT is(whizbang.idempotency_complete('bad', 'done', (SELECT token FROM done), '{"ok": true}',
                                        p_now => '2024-05-01 00:00:01+00'),
          'completed', 'fixture: one held key and one completed key');
SELECT pg_temp.unchanged('fixture: two rows', 2);

-- ---------------------------------------------------------------------------------------
-- idempotency_begin: scope and key
-- ---------------------------------------------------------------------------------------

SELECT throws_ok($$SELECT * FROM whizbang.idempotency_begin(NULL, 'k')$$, '22004', NULL,
                 'begin: NULL p_scope raises 22004');
SELECT throws_like($$SELECT * FROM whizbang.idempotency_begin(NULL, 'k')$$, '%p_scope%',
                   'begin: the error names p_scope');
SELECT throws_ok($$SELECT * FROM whizbang.idempotency_begin('bad', NULL)$$, '22004', NULL,
                 'begin: NULL p_key raises 22004');
SELECT throws_like($$SELECT * FROM whizbang.idempotency_begin('bad', NULL)$$, '%p_key%',
                   'begin: the error names p_key');
SELECT throws_ok($$SELECT * FROM whizbang.idempotency_begin(p_scope => NULL, p_key => NULL)$$, '22004', NULL,
                 'begin: both NULL, named notation: 22004');
SELECT pg_temp.unchanged('begin: NULL scope or key wrote nothing');

SELECT throws_ok($$SELECT * FROM whizbang.idempotency_begin('', 'k')$$, '22023', NULL,
                 'begin: empty p_scope raises 22023');
SELECT throws_like($$SELECT * FROM whizbang.idempotency_begin('', 'k')$$, '%p_scope%empty%',
                   'begin: the error says p_scope must not be empty');
SELECT throws_ok($$SELECT * FROM whizbang.idempotency_begin('bad', '')$$, '22023', NULL,
                 'begin: empty p_key raises 22023');
SELECT throws_like($$SELECT * FROM whizbang.idempotency_begin('bad', '')$$, '%p_key%empty%',
                   'begin: the error says p_key must not be empty');
SELECT pg_temp.unchanged('begin: empty scope or key wrote nothing');

SELECT throws_ok($$SELECT * FROM whizbang.idempotency_begin(repeat('s', 256), 'k')$$, '22023', NULL,
                 'begin: a 256-byte p_scope raises 22023');
SELECT throws_like($$SELECT * FROM whizbang.idempotency_begin(repeat('s', 256), 'k')$$, '%p_scope%256 bytes%255%',
                   'begin: the error gives the size and the limit of 255 bytes');
SELECT throws_ok($$SELECT * FROM whizbang.idempotency_begin('bad', repeat('k', 256))$$, '22023', NULL,
                 'begin: a 256-byte p_key raises 22023');
SELECT throws_like($$SELECT * FROM whizbang.idempotency_begin('bad', repeat('k', 256))$$, '%p_key%256 bytes%255%',
                   'begin: the key error gives the size and the limit');
SELECT throws_ok($$SELECT * FROM whizbang.idempotency_begin('bad', repeat('k', 100000))$$, '22023', NULL,
                 'begin: a 100,000-byte p_key raises 22023');
SELECT throws_ok($$SELECT * FROM whizbang.idempotency_begin('bad', repeat(pg_temp.utf8('c3a9'), 128))$$, '22023', NULL,
                 'begin: 128 two-byte characters (256 bytes) is over the limit: bytes count, not characters');
SELECT pg_temp.unchanged('begin: oversized scope or key wrote nothing');

SELECT results_eq($$SELECT outcome FROM whizbang.idempotency_begin('bad', repeat('k', 255))$$, ARRAY['claimed'],
                  'begin: a 255-byte key is accepted');
SELECT results_eq($$SELECT outcome FROM whizbang.idempotency_begin(repeat('s', 255), 'k')$$, ARRAY['claimed'],
                  'begin: a 255-byte scope is accepted');
SELECT results_eq($$SELECT outcome FROM whizbang.idempotency_begin('bad', repeat(pg_temp.utf8('e282ac'), 85))$$,
                  ARRAY['claimed'], 'begin: 85 three-byte characters (255 bytes) are accepted');
SELECT pg_temp.unchanged('begin: the three accepted keys wrote three rows', 3);
SELECT results_eq($$SELECT outcome FROM whizbang.idempotency_begin('bad', repeat('k', 255))$$,
                  ARRAY['in_progress_duplicate'], 'begin: the 255-byte key is found again');
SELECT pg_temp.unchanged('begin: the duplicate wrote nothing');

-- ---------------------------------------------------------------------------------------
-- idempotency_begin: TTLs, wait and time
-- ---------------------------------------------------------------------------------------

SELECT throws_ok($$SELECT * FROM whizbang.idempotency_begin('bad', 'k', p_in_progress_ttl => '-1 s')$$, '22023', NULL,
                 'begin: a negative p_in_progress_ttl raises 22023');
SELECT throws_like($$SELECT * FROM whizbang.idempotency_begin('bad', 'k', p_in_progress_ttl => '-1 s')$$,
                   '%p_in_progress_ttl%positive%', 'begin: the error says p_in_progress_ttl must be positive');
SELECT throws_ok($$SELECT * FROM whizbang.idempotency_begin('bad', 'k', p_in_progress_ttl => '0')$$, '22023', NULL,
                 'begin: a zero p_in_progress_ttl raises 22023');
SELECT throws_ok($$SELECT * FROM whizbang.idempotency_begin('bad', 'k', p_in_progress_ttl => '1 mon -30 days')$$,
                 '22023', NULL, 'begin: p_in_progress_ttl ''1 mon -30 days'' (zero) raises 22023');
SELECT throws_ok($$SELECT * FROM whizbang.idempotency_begin('bad', 'k', p_in_progress_ttl => '1 day -25 hours')$$,
                 '22023', NULL, 'begin: p_in_progress_ttl ''1 day -25 hours'' (negative) raises 22023');
SELECT throws_ok($$SELECT * FROM whizbang.idempotency_begin('bad', 'k', p_in_progress_ttl => '1000000 years')$$,
                 '22015', NULL, 'begin: a p_in_progress_ttl beyond 64-bit microseconds raises 22015');
SELECT throws_ok($$SELECT * FROM whizbang.idempotency_begin('bad', 'k', p_result_ttl => '-1 hour')$$, '22023', NULL,
                 'begin: a negative p_result_ttl raises 22023');
SELECT throws_like($$SELECT * FROM whizbang.idempotency_begin('bad', 'k', p_result_ttl => '-1 hour')$$,
                   '%p_result_ttl%positive%', 'begin: the error says p_result_ttl must be positive');
SELECT throws_ok($$SELECT * FROM whizbang.idempotency_begin('bad', 'k', p_result_ttl => '0')$$, '22023', NULL,
                 'begin: a zero p_result_ttl raises 22023');
SELECT throws_ok($$SELECT * FROM whizbang.idempotency_begin('bad', 'k', p_result_ttl => '0.5 s')$$, '22023', NULL,
                 'begin: p_result_ttl 0.5 s, below the global minimum of 1 s, raises 22023');
SELECT throws_ok($$SELECT * FROM whizbang.idempotency_begin('bad', 'k', p_result_ttl => '31 days')$$, '22023', NULL,
                 'begin: p_result_ttl 31 days, above the global maximum of 30 days, raises 22023');
SELECT throws_like($$SELECT * FROM whizbang.idempotency_begin('bad', 'k', p_result_ttl => '31 days')$$,
                   '%outside the policy of scope "bad"%', 'begin: the error names the scope whose policy refused it');
-- The message must state the refused TTL correctly. (whizbang 0.2.0 prints the fraction of a
-- second without leading zeros: 0.05 s appears as "0.50000s", ten times too long.)
SELECT unalike(pg_temp.error_of($$SELECT * FROM whizbang.idempotency_begin('bad', 'k', p_result_ttl => '0.05 s')$$),
              '%0.5%', 'begin: the error for p_result_ttl 0.05 s does not misstate it as 0.5 s');
SELECT throws_ok($$SELECT * FROM whizbang.idempotency_begin('bad', 'k', p_wait => '-1 ms')$$, '22023', NULL,
                 'begin: a negative p_wait raises 22023');
SELECT throws_like($$SELECT * FROM whizbang.idempotency_begin('bad', 'k', p_wait => '-1 ms')$$,
                   '%p_wait%negative%', 'begin: the error says p_wait must not be negative');
SELECT throws_ok($$SELECT * FROM whizbang.idempotency_begin('bad', 'k', p_now => NULL)$$, '22004', NULL,
                 'begin: NULL p_now raises 22004');
SELECT throws_like($$SELECT * FROM whizbang.idempotency_begin('bad', 'k', p_now => NULL)$$, '%p_now%',
                   'begin: the error names p_now');
SELECT throws_ok($$SELECT * FROM whizbang.idempotency_begin('bad', 'k', p_now => 'infinity')$$, '22023', NULL,
                 'begin: p_now infinity raises 22023');
SELECT throws_ok($$SELECT * FROM whizbang.idempotency_begin('bad', 'k', p_now => '-infinity')$$, '22023', NULL,
                 'begin: p_now -infinity raises 22023');
SELECT pg_temp.unchanged('begin: bad TTLs, waits and times wrote nothing');

-- The same bad arguments against existing keys: refused before the key is even looked at.
SELECT throws_ok($$SELECT * FROM whizbang.idempotency_begin('bad', 'held', '\x01', p_in_progress_ttl => '-1 s',
                                                             p_now => '2024-06-01 00:00:00+00')$$,
                 '22023', NULL, 'begin: a bad TTL on an abandoned key raises 22023 instead of re-claiming it');
SELECT throws_ok($$SELECT * FROM whizbang.idempotency_begin('bad', 'done', '\x02', p_result_ttl => '0')$$,
                 '22023', NULL, 'begin: a bad TTL on a completed key raises 22023 too');
SELECT pg_temp.unchanged('begin: the existing keys are untouched');

SELECT results_eq($$SELECT outcome FROM whizbang.idempotency_begin('bad', 'held', '\x01', p_wait => NULL,
                                                                   p_now => '2024-05-01 00:00:02+00')$$,
                  ARRAY['in_progress_duplicate'], 'begin: a NULL p_wait means no wait');
SELECT results_eq($$SELECT outcome FROM whizbang.idempotency_begin('bad', 'held', '', p_now => '2024-05-01 00:00:02+00')$$,
                  ARRAY['conflict'], 'begin: an empty fingerprint is a fingerprint (it differs from \x01): conflict');
SELECT pg_temp.unchanged('begin: these answers wrote nothing');

-- ---------------------------------------------------------------------------------------
-- idempotency_complete
-- ---------------------------------------------------------------------------------------

SELECT throws_ok($$SELECT whizbang.idempotency_complete(NULL, 'held', 1)$$, '22004', NULL,
                 'complete: NULL p_scope raises 22004');
SELECT throws_ok($$SELECT whizbang.idempotency_complete('bad', NULL, 1)$$, '22004', NULL,
                 'complete: NULL p_key raises 22004');
SELECT throws_ok($$SELECT whizbang.idempotency_complete('bad', 'held', NULL)$$, '22004', NULL,
                 'complete: NULL p_token raises 22004');
SELECT throws_like($$SELECT whizbang.idempotency_complete('bad', 'held', NULL)$$, '%p_token%',
                   'complete: the error names p_token');
SELECT throws_ok(format($$SELECT whizbang.idempotency_complete('bad', 'held', %s, '{}', NULL, NULL)$$, (SELECT token FROM held)),
                 '22004', NULL, 'complete: NULL p_now raises 22004 (even with the right token)');
SELECT throws_ok(format($$SELECT whizbang.idempotency_complete('bad', 'held', %s, '{}', p_now => 'infinity')$$, (SELECT token FROM held)),
                 '22023', NULL, 'complete: p_now infinity raises 22023');
SELECT throws_ok($$SELECT whizbang.idempotency_complete('', 'held', 1)$$, '22023', NULL,
                 'complete: empty p_scope raises 22023');
SELECT throws_ok($$SELECT whizbang.idempotency_complete('bad', '', 1)$$, '22023', NULL,
                 'complete: empty p_key raises 22023');
SELECT throws_ok($$SELECT whizbang.idempotency_complete(repeat('s', 256), 'held', 1)$$, '22023', NULL,
                 'complete: a 256-byte p_scope raises 22023');
SELECT throws_ok($$SELECT whizbang.idempotency_complete('bad', repeat('k', 256), 1)$$, '22023', NULL,
                 'complete: a 256-byte p_key raises 22023');
SELECT throws_ok(format($$SELECT whizbang.idempotency_complete('bad', 'held', %s, '{}', '-1 s')$$, (SELECT token FROM held)),
                 '22023', NULL, 'complete: a negative p_result_ttl raises 22023');
SELECT throws_ok(format($$SELECT whizbang.idempotency_complete('bad', 'held', %s, '{}', '0')$$, (SELECT token FROM held)),
                 '22023', NULL, 'complete: a zero p_result_ttl raises 22023');
SELECT throws_ok(format($$SELECT whizbang.idempotency_complete('bad', 'held', %s, '{}', '31 days')$$, (SELECT token FROM held)),
                 '22023', NULL, 'complete: a p_result_ttl above the policy raises 22023');
SELECT throws_ok(format($$SELECT whizbang.idempotency_complete('bad', 'held', %s, '{}', '1000000 years')$$, (SELECT token FROM held)),
                 '22015', NULL, 'complete: a p_result_ttl beyond 64-bit microseconds raises 22015');
SELECT pg_temp.unchanged('complete: bad arguments wrote nothing, the held key is still in progress');

-- Tokens that were never issued: a clear outcome, nothing written.
SELECT is(whizbang.idempotency_complete('bad', 'held', -1, '{}'), 'complete_conflict',
          'complete: token -1 on a held key: complete_conflict');
SELECT is(whizbang.idempotency_complete('bad', 'held', 0, '{}'), 'complete_conflict',
          'complete: token 0: complete_conflict');
SELECT is(whizbang.idempotency_complete('bad', 'held', 9223372036854775807, '{}'), 'complete_conflict',
          'complete: the largest bigint: complete_conflict');
SELECT is(whizbang.idempotency_complete('bad', 'held', (SELECT token FROM done), '{}'), 'complete_conflict',
          'complete: another key''s token: complete_conflict');
SELECT is(whizbang.idempotency_complete('bad', 'done', 9223372036854775807, '{"overwrite": true}'), 'complete_conflict',
          'complete: an unknown token on a completed key: complete_conflict');
SELECT is(whizbang.idempotency_complete('bad', 'never-begun', 1, '{}'), 'complete_conflict',
          'complete: a key that was never begun: complete_conflict');
SELECT is(whizbang.idempotency_complete('other-scope', 'held', (SELECT token FROM held), '{}'), 'complete_conflict',
          'complete: the right token in the wrong scope: complete_conflict');
SELECT pg_temp.unchanged('complete: never-issued tokens and unknown keys wrote nothing');
SELECT is((SELECT count(*) FROM whizbang.wh_idempotency_keys WHERE idempotency_key = 'never-begun'), 0::bigint,
          'complete: no row was created for the unknown key');

-- ---------------------------------------------------------------------------------------
-- idempotency_release
-- ---------------------------------------------------------------------------------------

SELECT throws_ok($$SELECT whizbang.idempotency_release(NULL, 'held', 1)$$, '22004', NULL,
                 'release: NULL p_scope raises 22004');
SELECT throws_ok($$SELECT whizbang.idempotency_release('bad', NULL, 1)$$, '22004', NULL,
                 'release: NULL p_key raises 22004');
SELECT throws_ok($$SELECT whizbang.idempotency_release('bad', 'held', NULL)$$, '22004', NULL,
                 'release: NULL p_token raises 22004');
SELECT throws_like($$SELECT whizbang.idempotency_release('bad', 'held', NULL)$$, '%p_token%',
                   'release: the error names p_token');
SELECT throws_ok(format($$SELECT whizbang.idempotency_release('bad', 'held', %s, NULL)$$, (SELECT token FROM held)),
                 '22004', NULL, 'release: NULL p_now raises 22004 (even with the right token)');
SELECT throws_ok($$SELECT whizbang.idempotency_release('', 'held', 1)$$, '22023', NULL,
                 'release: empty p_scope raises 22023');
SELECT throws_ok($$SELECT whizbang.idempotency_release('bad', '', 1)$$, '22023', NULL,
                 'release: empty p_key raises 22023');
SELECT throws_ok($$SELECT whizbang.idempotency_release(repeat('s', 256), 'held', 1)$$, '22023', NULL,
                 'release: a 256-byte p_scope raises 22023');
SELECT throws_ok($$SELECT whizbang.idempotency_release('bad', repeat('k', 256), 1)$$, '22023', NULL,
                 'release: a 256-byte p_key raises 22023');
SELECT pg_temp.unchanged('release: bad arguments wrote nothing, the held key is still there');

SELECT is(whizbang.idempotency_release('bad', 'held', -1), 'not_owner', 'release: token -1 on a held key: not_owner');
SELECT is(whizbang.idempotency_release('bad', 'held', 9223372036854775807), 'not_owner',
          'release: the largest bigint: not_owner');
SELECT is(whizbang.idempotency_release('bad', 'done', (SELECT token FROM done)), 'not_owner',
          'release: a completed key, even with its own token: not_owner');
SELECT is(whizbang.idempotency_release('bad', 'never-begun', 1), 'not_found', 'release: an unknown key: not_found');
SELECT is(whizbang.idempotency_release('other-scope', 'held', (SELECT token FROM held)), 'not_found',
          'release: the right token in the wrong scope: not_found');
SELECT pg_temp.unchanged('release: never-issued tokens and unknown keys wrote nothing');

-- The real owner still can: none of the above damaged the key.
SELECT is(whizbang.idempotency_complete('bad', 'held', (SELECT token FROM held), '{"after": "bad input"}',
                                        p_now => '2024-05-01 00:01:00+00'),
          'completed', 'after all that bad input, the owner completes its key normally');
SELECT results_eq($$SELECT outcome, result FROM whizbang.idempotency_begin('bad', 'held', '\x01', p_now => '2024-05-01 00:02:00+00')$$,
                  $$VALUES ('completed_duplicate', '{"after": "bad input"}'::jsonb)$$,
                  'and its result is replayed');
SELECT results_eq($$SELECT outcome, result FROM whizbang.idempotency_begin('bad', 'done', '\x02', p_now => '2024-05-01 00:02:00+00')$$,
                  $$VALUES ('completed_duplicate', '{"ok": true}'::jsonb)$$,
                  'the completed key still has its original result');

-- ---------------------------------------------------------------------------------------
-- Policy rows and settings: refused when written
-- ---------------------------------------------------------------------------------------

CREATE TEMP TABLE policies_before AS SELECT count(*) AS n FROM whizbang.wh_idempotency_policies;

SELECT throws_ok($$INSERT INTO whizbang.wh_idempotency_policies (scope, in_progress_ttl) VALUES ('p', '-1 s')$$,
                 '23514', NULL, 'policy: a negative in_progress_ttl is refused (23514)');
SELECT throws_ok($$INSERT INTO whizbang.wh_idempotency_policies (scope, in_progress_ttl) VALUES ('p', '0')$$,
                 '23514', NULL, 'policy: a zero in_progress_ttl is refused');
SELECT throws_ok($$INSERT INTO whizbang.wh_idempotency_policies (scope, default_result_ttl) VALUES ('p', '0')$$,
                 '23514', NULL, 'policy: a zero default_result_ttl is refused');
SELECT throws_ok($$INSERT INTO whizbang.wh_idempotency_policies (scope, min_result_ttl) VALUES ('p', '-1 day')$$,
                 '23514', NULL, 'policy: a negative min_result_ttl is refused');
SELECT throws_ok($$INSERT INTO whizbang.wh_idempotency_policies (scope, max_result_ttl) VALUES ('p', '0')$$,
                 '23514', NULL, 'policy: a zero max_result_ttl is refused');
SELECT throws_ok($$INSERT INTO whizbang.wh_idempotency_policies (scope, tombstone_ttl) VALUES ('p', '-1 s')$$,
                 '23514', NULL, 'policy: a negative tombstone_ttl is refused');
SELECT throws_ok($$INSERT INTO whizbang.wh_idempotency_policies (scope, min_result_ttl, max_result_ttl) VALUES ('p', '2 hours', '1 hour')$$,
                 '23514', NULL, 'policy: min_result_ttl above max_result_ttl is refused');
SELECT throws_ok($$INSERT INTO whizbang.wh_idempotency_policies (scope, default_result_ttl, min_result_ttl) VALUES ('p', '1 min', '1 hour')$$,
                 '23514', NULL, 'policy: default_result_ttl below min_result_ttl is refused');
SELECT throws_ok($$INSERT INTO whizbang.wh_idempotency_policies (scope, default_result_ttl, max_result_ttl) VALUES ('p', '2 days', '1 day')$$,
                 '23514', NULL, 'policy: default_result_ttl above max_result_ttl is refused');
SELECT throws_ok($$INSERT INTO whizbang.wh_idempotency_policies (scope) VALUES (NULL)$$,
                 '23502', NULL, 'policy: a NULL scope is refused (23502)');
SELECT is((SELECT count(*) FROM whizbang.wh_idempotency_policies), (SELECT n FROM policies_before),
          'policy: no bad row was written');

-- A row the table accepts but whose default lies outside the global bounds: every begin that
-- relies on the default is refused at begin, before anything is written.
INSERT INTO whizbang.wh_idempotency_policies (scope, default_result_ttl) VALUES ('p-wide', '60 days');
SELECT throws_ok($$SELECT * FROM whizbang.idempotency_begin('p-wide', 'k')$$, '22023', NULL,
                 'policy: a default_result_ttl beyond the global max_result_ttl refuses begin (22023)');
SELECT results_eq($$SELECT outcome FROM whizbang.idempotency_begin('p-wide', 'k', p_result_ttl => '1 day')$$,
                  ARRAY['claimed'], 'policy: ... unless the caller passes a p_result_ttl inside the bounds');
SELECT pg_temp.unchanged('policy: only the accepted begin wrote a row', 1);

CREATE TEMP TABLE settings_before AS
SELECT string_agg(setting_key || '=' || setting_value, ',' ORDER BY setting_key) AS image FROM whizbang.wh_settings;
SELECT throws_ok($$UPDATE whizbang.wh_settings SET setting_value = '-5' WHERE setting_key = 'idempotency_result_ttl_seconds'$$,
                 '22023', NULL, 'settings: a negative idempotency_result_ttl_seconds is refused');
SELECT throws_ok($$UPDATE whizbang.wh_settings SET setting_value = '0' WHERE setting_key = 'idempotency_in_progress_ttl_seconds'$$,
                 '22023', NULL, 'settings: a zero idempotency_in_progress_ttl_seconds is refused');
SELECT throws_ok($$UPDATE whizbang.wh_settings SET setting_value = '0' WHERE setting_key = 'idempotency_result_ttl_min_seconds'$$,
                 '22023', NULL, 'settings: a zero idempotency_result_ttl_min_seconds is refused');
SELECT throws_ok($$UPDATE whizbang.wh_settings SET setting_value = '-1' WHERE setting_key = 'idempotency_tombstone_days'$$,
                 '22023', NULL, 'settings: a negative idempotency_tombstone_days is refused');
SELECT throws_ok($$UPDATE whizbang.wh_settings SET setting_value = 'a day' WHERE setting_key = 'idempotency_tombstone_days'$$,
                 '22023', NULL, 'settings: a non-integer idempotency_tombstone_days is refused');
SELECT is((SELECT string_agg(setting_key || '=' || setting_value, ',' ORDER BY setting_key) FROM whizbang.wh_settings),
          (SELECT image FROM settings_before), 'settings: nothing was written');

SELECT * FROM finish();
ROLLBACK;
