-- The catalog describes itself (DESIGN §3.7, issue 13 item 1): every function, procedure, table,
-- view and sequence of schema whizbang, and every column of its tables and views, carries a
-- non-empty COMMENT, so \df+ and \d+ are a usable reference; internal helpers are out of the
-- API's way (a `_` name and an "internal:" comment). Each failure lists the offenders.
--
-- It reads the whole schema, not a list: an object added without a comment fails here.
BEGIN;
SELECT plan(12);

-- Every object of schema whizbang that psql's \d and \df list, with its kind.
CREATE TEMP VIEW wb_objects AS
SELECT CASE p.prokind WHEN 'p' THEN 'procedure' ELSE 'function' END AS kind,
       p.oid::regprocedure::text AS name, p.proname::text AS short_name,
       obj_description(p.oid, 'pg_proc') AS comment,
       p.prorettype IN ('trigger'::regtype, 'event_trigger'::regtype) AS is_trigger
  FROM pg_catalog.pg_proc p
 WHERE p.pronamespace = 'whizbang'::regnamespace
UNION ALL
SELECT CASE c.relkind WHEN 'r' THEN 'table' WHEN 'p' THEN 'table' WHEN 'v' THEN 'view'
                      WHEN 'm' THEN 'materialized view' WHEN 'f' THEN 'foreign table' ELSE 'sequence' END,
       c.oid::regclass::text, c.relname::text, obj_description(c.oid, 'pg_class'), false
  FROM pg_catalog.pg_class c
 WHERE c.relnamespace = 'whizbang'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S');

-- Every column of those tables and views.
CREATE TEMP VIEW wb_columns AS
SELECT format('%s.%I', c.oid::regclass, a.attname) AS name, col_description(c.oid, a.attnum) AS comment
  FROM pg_catalog.pg_class c
  JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
 WHERE c.relnamespace = 'whizbang'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm', 'f');

-- ---------------------------------------------------------------------------------------
-- Everything is commented
-- ---------------------------------------------------------------------------------------

SELECT cmp_ok((SELECT count(*) FROM wb_objects WHERE kind IN ('function', 'procedure')), '>=', 27::bigint,
              'the catalog query finds the functions and procedures of whizbang');
SELECT cmp_ok((SELECT count(*) FROM wb_columns), '>=', 121::bigint,
              'the catalog query finds the columns of whizbang''s tables and views');

SELECT is_empty($$SELECT kind, name FROM wb_objects
                   WHERE kind IN ('function', 'procedure') AND coalesce(btrim(comment), '') = '' ORDER BY name$$,
                'every function and procedure of whizbang has a comment (the offenders are listed)');
SELECT is_empty($$SELECT kind, name FROM wb_objects
                   WHERE kind NOT IN ('function', 'procedure') AND coalesce(btrim(comment), '') = '' ORDER BY name$$,
                'every table, view and sequence of whizbang has a comment (the offenders are listed)');
SELECT is_empty($$SELECT name FROM wb_columns WHERE coalesce(btrim(comment), '') = '' ORDER BY name$$,
                'every column of every table and view of whizbang has a comment (the offenders are listed)');

-- ---------------------------------------------------------------------------------------
-- Internal helpers are out of the API's way
-- ---------------------------------------------------------------------------------------

SELECT is_empty($$SELECT name FROM wb_objects WHERE is_trigger AND short_name NOT LIKE '\_%' ORDER BY name$$,
                'every trigger function has a _ name: it is internal, not part of the API');
SELECT is_empty($$SELECT name, comment FROM wb_objects
                   WHERE kind IN ('function', 'procedure') AND short_name LIKE '\_%'
                     AND coalesce(comment, '') NOT LIKE 'internal: %' ORDER BY name$$,
                'every _ function''s comment starts with "internal: "');
SELECT is_empty($$SELECT name, comment FROM wb_objects
                   WHERE short_name NOT LIKE '\_%' AND comment ILIKE 'internal%' ORDER BY name$$,
                'no object without a _ name is described as internal');
SELECT trigger_is('whizbang', 'wh_settings', 'wh_settings_validate', 'whizbang', '_settings_validate',
                  'the settings trigger runs the renamed function whizbang._settings_validate()');

-- ---------------------------------------------------------------------------------------
-- What a function's comment says: its outcome words and its errors
-- ---------------------------------------------------------------------------------------

-- The outcome words of DESIGN §3 (and the metrics of §3.7), whole words, each in the comment
-- of every function of that name.
CREATE TEMP TABLE wb_outcomes (function_name text, words text[]);
INSERT INTO wb_outcomes VALUES
    ('dedup_insert', '{new,duplicate,conflict,expired}'),
    ('dedup_insert_many', '{new,duplicate,conflict,expired}'),
    ('inbox_receive', '{new,duplicate,conflict,expired}'),
    ('idempotency_begin', '{claimed,completed_duplicate,in_progress_duplicate,conflict,expired_duplicate}'),
    ('idempotency_complete', '{completed,complete_conflict}'),
    ('idempotency_release', '{released,not_owner,not_found}'),
    ('complete_work', '{completed,not_found,lease_lost}'),
    ('fail_work', '{retry_scheduled,dead_lettered,not_found,lease_lost}'),
    ('renew_leases', '{renewed,not_found,lease_lost}'),
    ('release_work', '{released,not_found,lease_lost}'),
    ('cancel_work', '{cancelled,leased,not_found}'),
    ('perform_maintenance', '{ok,skipped,purge_old_deduplication,purge_expired_idempotency,purge_dead_letters,purge_processed}'),
    ('run_maintenance', '{ok,skipped}'),
    ('stats', '{pending,leased,scheduled,dead_lettered,oldest_pending_seconds,dedup_rows,dedup_duplicates_observed,'
              'dedup_conflicts_observed,idempotency_in_progress,idempotency_completed,idempotency_tombstones}');

SELECT is((SELECT count(DISTINCT o.function_name) FROM wb_outcomes o JOIN wb_objects f
             ON f.short_name = o.function_name AND f.kind IN ('function', 'procedure')),
          (SELECT count(*) FROM wb_outcomes),
          'every function with outcome words exists');
SELECT is_empty($$SELECT f.name, w AS missing_word FROM wb_outcomes o
                    JOIN wb_objects f ON f.short_name = o.function_name AND f.kind IN ('function', 'procedure')
                    CROSS JOIN LATERAL unnest(o.words) w
                   WHERE coalesce(f.comment, '') !~ ('\m' || w || '\M') ORDER BY 1, 2$$,
                'every function''s comment names its outcome words exactly as DESIGN does');

-- "Errors: <SQLSTATE> ..." or "No errors.": \df+ tells what can go wrong.
SELECT is_empty($$SELECT name, comment FROM wb_objects
                   WHERE kind IN ('function', 'procedure') AND short_name NOT LIKE '\_%'
                     AND coalesce(comment, '') !~ '(Errors: .*\m[0-9A-Z]{5}\M|No errors\.)' ORDER BY name$$,
                'every API function''s comment lists its errors (Errors: SQLSTATE ...) or says No errors.');

SELECT * FROM finish();
ROLLBACK;
