# shellcheck shell=bash
# Rows for the maintenance tests (test/scripts/maintenance_worker.sh, run_maintenance.sh): source
# it; do not run it. Needs q (psql -X -q -A -t -v ON_ERROR_STOP=1).
#   seed_rows DB   500 dedup records first seen in 2000 (consumer 'old'), a recent one, a message
#                  stored in 2000 and still waiting, one dead-lettered in 2000, an idempotency key
#                  completed in 2000 (creates the extension if needed)
#   left DB        what is left: old dedup records, recent ones, waiting ones, dead letters,
#                  idempotency keys, waiting work ("501 1 1 1 1 1" as seeded; "0 1 1 0 0 1" once
#                  maintenance ran)
seed_rows() {  # database
  q -d "$1" <<'SQL'
CREATE EXTENSION IF NOT EXISTS whizbang;
-- The generations of 2000 are made by maintenance run then (0.13.0: a store makes none that has
-- left the window); in one transaction with the stores, so that no maintenance run in between
-- drops them empty.
BEGIN;
SELECT count(*) FROM whizbang.perform_maintenance('2000-01-01 00:00:00+00');
SELECT count(*) FROM whizbang.dedup_insert_many(
    ARRAY(SELECT ('80000000-0000-4000-8000-' || lpad(to_hex(i), 12, '0'))::uuid FROM generate_series(1, 500) i),
    'old', NULL, NULL, '2000-01-01 00:00:00+00');
SELECT whizbang.dedup_insert('81000000-0000-4000-8000-000000000001', 'recent');
SELECT count(*) FROM whizbang.store_inbox_messages('[{"MessageId": "82000000-0000-4000-8000-000000000001",
    "HandlerName": "h", "MessageType": "t", "Envelope": {}}]', p_now => '2000-01-01 00:00:00+00', p_consumer => 'waiting');
SELECT count(*) FROM whizbang.store_inbox_messages('[{"MessageId": "83000000-0000-4000-8000-000000000001",
    "HandlerName": "h", "MessageType": "t", "Envelope": {}}]', p_now => '2000-01-01 00:00:00+00', p_consumer => 'dead');
SELECT outcome FROM whizbang.fail_work('inbox', ARRAY['83000000-0000-4000-8000-000000000001'::uuid], ARRAY['x'], NULL,
    ARRAY[false], 'dead', '2000-01-01 00:00:00+00');
SELECT outcome FROM whizbang.idempotency_begin('s', 'k', p_now => '2000-01-01 00:00:00+00');
SELECT whizbang.idempotency_complete('s', 'k', (SELECT token FROM whizbang.wh_idempotency_keys), '{}', p_now => '2000-01-01 00:00:00+00');
COMMIT;
SQL
}
left() {  # database
  # Old records: first seen in 2000 (a record that moved forward, its message still waiting
  # when its generation was dropped, holds a later first_seen_at: no old record any more).
  q -d "$1" -c "SELECT (SELECT count(*) FROM whizbang.wh_message_deduplication WHERE consumer IN ('old', 'dead')
                          AND first_seen_at < '2001-01-01')
                  || ' ' || (SELECT count(*) FROM whizbang.wh_message_deduplication WHERE consumer = 'recent')
                  || ' ' || (SELECT count(*) FROM whizbang.wh_message_deduplication WHERE consumer = 'waiting')
                  || ' ' || (SELECT count(*) FROM whizbang.wh_dead_letters)
                  || ' ' || (SELECT count(*) FROM whizbang.wh_idempotency_keys)
                  || ' ' || (SELECT count(*) FROM whizbang.wh_inbox)"
}
