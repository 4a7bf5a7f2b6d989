-- The C++/PostgreSQL boundary: errors from either side arrive as clean SQL errors with
-- their SQLSTATE, C++ destructors run, and the backend survives.
\set VERBOSITY sqlstate
SELECT whizbang._bridge_selftest('cpp_error');
SELECT whizbang._bridge_selftest('pg_error');
SELECT whizbang._bridge_selftest('bad_alloc');
SELECT whizbang._bridge_selftest('cpp_unknown');
\set VERBOSITY default
SELECT whizbang._bridge_selftest('cpp_error');
SELECT whizbang._bridge_selftest('pg_error');
-- No tracked C++ object outlived its scope.
SELECT whizbang._bridge_selftest('ok') AS leaked_objects;
-- A thousand errors in a row, each caught by PL/pgSQL, leak nothing either.
DO $$
BEGIN
  FOR i IN 1..1000 LOOP
    BEGIN
      PERFORM whizbang._bridge_selftest(CASE WHEN i % 2 = 0 THEN 'pg_error' ELSE 'cpp_error' END);
    EXCEPTION WHEN division_by_zero OR invalid_parameter_value THEN NULL;
    END;
  END LOOP;
END $$;
SELECT whizbang._bridge_selftest('ok') AS leaked_objects;
-- A C++ exception thrown inside a pg_call callback is rethrown after PG_END_TRY: it arrives
-- whole, and PostgreSQL's error stack is sound for the errors that follow.
SELECT whizbang._bridge_selftest('cpp_in_pg_call');
SELECT whizbang._bridge_selftest('cpp_in_pg_call_caught');
SELECT whizbang._bridge_selftest('nested_pg_error');
SELECT 1 / 0;
DO $$
BEGIN
  FOR i IN 1..1000 LOOP
    BEGIN
      PERFORM whizbang._bridge_selftest((ARRAY['cpp_in_pg_call', 'cpp_in_pg_call_caught', 'nested_pg_error'])[1 + i % 3]);
    EXCEPTION WHEN division_by_zero OR invalid_parameter_value THEN NULL;
    END;
  END LOOP;
END $$;
SELECT whizbang._bridge_selftest('ok') AS leaked_objects;
