-- whizbang 0.9.0 -> 0.10.0: PostgreSQL 16, 17 and 18 (issue 21). The changes are in the library,
-- built from one source tree for each supported major (src/pg/boundary/pg_compat.h), and in the
-- tests (a version matrix, pg_upgrade from 15). No SQL object changes: the objects of 0.9.0 are
-- those of 0.10.0, on every major.

\echo Use "ALTER EXTENSION whizbang UPDATE TO '0.10.0'" to load this file. \quit
