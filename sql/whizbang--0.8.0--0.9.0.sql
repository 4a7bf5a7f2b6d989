-- whizbang 0.8.0 -> 0.9.0: the lease engine, proven (issue 20, DESIGN §3.4, §3.8). The changes
-- are in the library: a lease's changes belong to the transaction that makes them, so any
-- rollback (top level, savepoint, ROLLBACK PREPARED) restores exactly the leases before it, and a
-- completion held in PREPARE TRANSACTION keeps its row from every claim until COMMIT PREPARED or
-- ROLLBACK PREPARED, from any session, across a server restart too; one claim engine for both
-- lease stores; stream heads and followers read through the stream index. No table changes:
-- the catalog says what the library now promises.

\echo Use "ALTER EXTENSION whizbang UPDATE TO '0.9.0'" to load this file. \quit

COMMENT ON FUNCTION whizbang.lease_store() IS
    'The lease store this server runs: shared_memory (whizbang in shared_preload_libraries: a claim writes '
    'nothing) or table (leases in the work rows, as before 0.6.0). Chosen at server start. In both a lease '
    'changes with its transaction: a rollback (also to a savepoint, also ROLLBACK PREPARED) restores the '
    'leases before it, and a prepared completion keeps its row from every claim until it is settled. No errors.';

COMMENT ON VIEW whizbang.leases IS
    'Every lease held on inbox and outbox work, in whichever lease store runs (whizbang.lease_store()): holder '
    'instance, fencing token, expiry, deliveries. A lease whose expiry has passed is listed until the message is '
    'handed out again or finished (its token still completes it); live ones are WHERE lease_expiry > now(). '
    'A lease another transaction is changing is listed as it was until that transaction ends (a prepared one '
    'included). Reading it needs SELECT on the view and on the work tables, and EXECUTE on whizbang._leases().';
