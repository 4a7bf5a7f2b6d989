-- Included by the bad-input pgTAP files (\ir lib/writes.sql); not a test file itself.
--
-- pg_temp.writes(): the writes this transaction has made to whizbang's tables, per table: rows
-- inserted, updated and deleted, or 'none'. pg_stat_xact_all_tables counts every attempted
-- write, those of a rolled-back subtransaction included (PostgreSQL adds an aborted
-- subtransaction's counts to its parent's), so a call that writes and then fails moves it
-- although its error leaves no row behind: comparing the tables after the error could not tell.
-- It needs no trigger, which would send the dedup table's writes off their native path.
CREATE FUNCTION pg_temp.writes() RETURNS text
LANGUAGE sql AS $$
    SELECT coalesce(string_agg(format('%s +%s ~%s -%s', relname, n_tup_ins, n_tup_upd, n_tup_del), ', '
                               ORDER BY relname), 'none')
      FROM pg_catalog.pg_stat_xact_all_tables
     WHERE schemaname = 'whizbang' AND n_tup_ins + n_tup_upd + n_tup_del > 0
$$;

-- pg_temp.attempt(sql): runs it, catching its error: the SQLSTATE and message (NULL, NULL when
-- there was none: then whatever it did is undone too), and writes() before and after.
CREATE FUNCTION pg_temp.attempt(p_sql text, OUT state text, OUT message text, OUT writes_before text,
                                OUT writes_after text)
LANGUAGE plpgsql AS $$
BEGIN
    writes_before := pg_temp.writes();
    BEGIN
        EXECUTE p_sql;
        RAISE EXCEPTION USING ERRCODE = 'WB000', MESSAGE = '(no error)';
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, message = MESSAGE_TEXT;
    END;
    IF state = 'WB000' THEN
        state := NULL;
        message := NULL;
    END IF;
    writes_after := pg_temp.writes();
END
$$;

-- pg_temp.fails(sql, state, pattern, description): one test: sql raises `state` with a message
-- LIKE `pattern` (NULL: any), having written nothing.
CREATE FUNCTION pg_temp.fails(p_sql text, p_state text, p_pattern text, p_description text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    r record;
BEGIN
    SELECT * INTO r FROM pg_temp.attempt(p_sql);
    IF r.state IS NOT DISTINCT FROM p_state AND (p_pattern IS NULL OR r.message LIKE p_pattern)
       AND r.writes_before = r.writes_after THEN
        RETURN ok(true, p_description);
    END IF;
    RETURN ok(false, p_description) || E'\n' ||
           diag(format(E'    raised: %s %s\n    wanted: %s %s\n    writes before: %s\n    writes after:  %s',
                       r.state, r.message, p_state, p_pattern, r.writes_before, r.writes_after));
END
$$;
