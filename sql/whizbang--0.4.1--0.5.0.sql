-- whizbang 0.4.1 -> 0.5.0: fitting the ecosystem (issue 13): comments on every object, per-consumer
-- operations (queues, peek, cancel_work), and what poolers, pg_cron, PGXN and exporters need.

\echo Use "ALTER EXTENSION whizbang UPDATE TO '0.5.0'" to load this file. \quit
