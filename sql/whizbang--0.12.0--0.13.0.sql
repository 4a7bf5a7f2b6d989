-- whizbang 0.12.0 -> 0.13.0: the edges closed (issue 30): prepared leases settled when their
-- transaction ends, generations under REPEATABLE READ and lock timeouts, one table of required
-- privileges, errors that lead somewhere, docs that run as written.

\echo Use "ALTER EXTENSION whizbang UPDATE TO '0.13.0'" to load this file. \quit
