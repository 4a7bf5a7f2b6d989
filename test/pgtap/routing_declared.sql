-- Declared routing (issue 22, docs/internals.md "Declared routing"): every SQL-callable C
-- function of whizbang states its routing policy once (WB_ROUTED_FUNCTION); the library lists
-- them in whizbang._routing_policies(). No C function without one, no declaration without its
-- function, one policy each, from the known words.
BEGIN;
SELECT plan(4);

CREATE TEMP VIEW wb_c_functions AS
SELECT p.oid::regprocedure::text AS name, p.prosrc AS symbol
  FROM pg_catalog.pg_proc p
 WHERE p.pronamespace = 'whizbang'::regnamespace
   AND p.prolang = (SELECT l.oid FROM pg_catalog.pg_language l WHERE l.lanname = 'c');

SELECT is_empty($$SELECT name FROM wb_c_functions
                   WHERE symbol NOT IN (SELECT symbol FROM whizbang._routing_policies()) ORDER BY 1$$,
                'every C function of whizbang declares its routing policy (the offenders are listed)');
SELECT is_empty($$SELECT symbol FROM whizbang._routing_policies()
                   WHERE symbol NOT IN (SELECT symbol FROM wb_c_functions) ORDER BY 1$$,
                'every declared routing belongs to a function of the extension');
SELECT is_empty($$SELECT symbol FROM whizbang._routing_policies() GROUP BY symbol HAVING count(*) > 1$$,
                'each function declares one policy');
SELECT is_empty($$SELECT symbol, policy FROM whizbang._routing_policies()
                   WHERE policy NOT IN ('local', 'by_message', 'by_partition', 'by_claimed_id', 'by_lookup',
                                        'every_node', 'citus_sql')$$,
                'every policy is one of the known words');

SELECT * FROM finish();
ROLLBACK;
