-- whizbang 0.4.0 -> 0.4.1: hardening (issue 10). SQL run by whizbang no longer depends on the
-- caller's search_path, per-stream order holds after a lease lapses, maintenance can commit
-- between batches (run_maintenance).

\echo Use "ALTER EXTENSION whizbang UPDATE TO '0.4.1'" to load this file. \quit
