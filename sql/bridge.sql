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
