-- whizbang 0.13.0 -> 0.14.0: lean writes (issue 31): one row per message and consumer carrying
-- its work state, dedup records without a speculative insertion, membership filters of sealed
-- dedup generations, streams served to every worker.

\echo Use "ALTER EXTENSION whizbang UPDATE TO '0.14.0'" to load this file. \quit
