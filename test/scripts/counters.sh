#!/usr/bin/env bash
# Throughput counters (0.16.0, issue 33 item 6; src/pg/ops/counters.h): in a cluster with
# shared_preload_libraries = whizbang and whizbang.max_counted_consumers = 10 (the smallest),
#   - stores, claims, completions, failures and dead letters are counted per source and consumer
#     when their transaction commits — never when it rolls back, nor for a rolled-back savepoint;
#     a prepared transaction's when it is prepared;
#   - the counts only grow, are the same in every session, and stats() has their totals per
#     source (counters_inbox_stored, ...) and counters_active 1;
#   - a consumer beyond the table's room is counted in the database's "other consumers" row
#     (consumer NULL); a restart starts every count at 0 again.
# Without the preload nothing is counted: counters() has no rows, counters_active is 0 and the
# totals are 0. Exits non-zero on failure.
set -euo pipefail

self=$(readlink -f "$0")
cd "$(dirname "$self")/../.."
source scripts/lib.sh      # wb_free_port
source test/lib/checks.sh  # check, check_eq, FAILED

if [ "${1:-}" != --inside ]; then
  status=0
  echo "=== preloaded cluster"
  pg_virtualenv -t -c "-p $(wb_free_port)" -o fsync=off -o shared_preload_libraries=whizbang \
    -o whizbang.max_counted_consumers=10 -o max_prepared_transactions=5 bash "$self" --inside preloaded || status=1
  echo "=== plain cluster"
  pg_virtualenv -t -c "-p $(wb_free_port)" -o fsync=off bash "$self" --inside plain || status=1
  [ $status -eq 0 ] && echo "all checks passed"
  exit $status
fi

sql() { psql -qXAt -v ON_ERROR_STOP=1 "$@"; }
# counts CONSUMER: "stored claimed completed failed dead_lettered" of the inbox consumer
counts() {
  sql -c "SELECT concat_ws(' ', stored, claimed, completed, failed, dead_lettered) FROM whizbang.counters
           WHERE source = '${2:-inbox}' AND consumer IS NOT DISTINCT FROM ${1}"
}
batch() {  # tag n: n inbox messages with ids derived from tag
  echo "(SELECT jsonb_agg(jsonb_build_object('MessageId', md5('$1' || g)::uuid, 'HandlerName', 'h', 'MessageType', 't',
           'Envelope', '{}'::jsonb)) FROM generate_series(1, $2) g)"
}
sql -c "CREATE EXTENSION whizbang"

if [ "$2" = plain ]; then
  sql -c "SELECT count(*) FROM whizbang.store_inbox_messages($(batch p 3), p_consumer => 'c1')" >/dev/null
  check "without the preload: counters() has no rows" "SELECT count(*) = 0 FROM whizbang.counters()"
  check "without the preload: counters_active 0, totals 0" \
    "SELECT bool_and(value = 0) AND count(*) = 11 FROM whizbang.stats()
      WHERE metric LIKE 'counters\_%'"
  [ "$FAILED" -eq 0 ]
  exit
fi

check "with the preload: counters_active 1" "SELECT value = 1 FROM whizbang.stats() WHERE metric = 'counters_active'"

# Stores: committed, rolled back, a rolled-back savepoint, a duplicate (not stored again).
sql -c "SELECT count(*) FROM whizbang.store_inbox_messages($(batch a 5), p_consumer => 'c1')" >/dev/null
sql -c "BEGIN" -c "SELECT count(*) FROM whizbang.store_inbox_messages($(batch b 7), p_consumer => 'c1')" -c "ROLLBACK" >/dev/null
sql -c "BEGIN" -c "SELECT count(*) FROM whizbang.store_inbox_messages($(batch c 2), p_consumer => 'c1')" \
    -c "SAVEPOINT s" -c "SELECT count(*) FROM whizbang.store_inbox_messages($(batch d 4), p_consumer => 'c1')" \
    -c "ROLLBACK TO SAVEPOINT s" -c "SAVEPOINT t" \
    -c "SELECT count(*) FROM whizbang.store_inbox_messages($(batch e 1), p_consumer => 'c1')" -c "RELEASE t" -c "COMMIT" >/dev/null
sql -c "SELECT count(*) FROM whizbang.store_inbox_messages($(batch a 5), p_consumer => 'c1')" >/dev/null
check_eq "stored: 5 committed + 2 + 1 (savepoint released); the rollbacks and the duplicates count nothing" \
  "8 0 0 0 0" "$(counts "'c1'")"

# Claims, completions, failures, dead letters (the default max_attempts, 10, is set to 1 for c2).
sql -c "SELECT count(*) FROM whizbang.store_inbox_messages($(batch f 4), p_consumer => 'c2')" >/dev/null
sql -c "INSERT INTO whizbang.wh_retry_policies (source, consumer, max_attempts) VALUES ('inbox', 'c2', 2)"
sql -c "CREATE TABLE held AS SELECT message_id, lease_token FROM whizbang.claim_work(
          '00000000-0000-4000-8000-0000000000c2', 'inbox', 10, 300, p_consumer => 'c2')"
sql -c "SELECT count(*) FROM whizbang.complete_work('inbox', ARRAY(SELECT message_id FROM held ORDER BY 1 LIMIT 1),
          ARRAY(SELECT lease_token FROM held ORDER BY message_id LIMIT 1), 'c2')" >/dev/null
sql -c "SELECT count(*) FROM whizbang.fail_work('inbox', ARRAY(SELECT message_id FROM held ORDER BY 1 OFFSET 1 LIMIT 2),
          ARRAY['e', 'e'], ARRAY(SELECT lease_token FROM held ORDER BY message_id OFFSET 1 LIMIT 2), ARRAY[true, false], 'c2')" >/dev/null
sql -c "BEGIN" -c "SELECT count(*) FROM whizbang.complete_work('inbox', ARRAY(SELECT message_id FROM held ORDER BY 1 OFFSET 3),
          ARRAY(SELECT lease_token FROM held ORDER BY message_id OFFSET 3), 'c2')" -c "ROLLBACK" >/dev/null
check_eq "c2: 4 stored, 4 claimed, 1 completed (the rolled-back one not), 2 failed, 1 dead-lettered" \
  "4 4 1 2 1" "$(counts "'c2'")"
check_eq "c1 unchanged by c2's work" "8 0 0 0 0" "$(counts "'c1'")"

# A prepared transaction is counted when it is prepared.
sql -c "BEGIN" -c "SELECT count(*) FROM whizbang.store_inbox_messages($(batch g 3), p_consumer => 'c3')" \
    -c "PREPARE TRANSACTION 'wb_counters'" >/dev/null
check_eq "a prepared store is counted" "3 0 0 0 0" "$(counts "'c3'")"
sql -c "ROLLBACK PREPARED 'wb_counters'"
check_eq "and stays counted whichever way it ends" "3 0 0 0 0" "$(counts "'c3'")"

# The outbox: stored, claimed, published.
sql -c "SELECT count(*) FROM whizbang.store_outbox_messages((SELECT jsonb_agg(jsonb_build_object('MessageId', md5('o' || g)::uuid,
          'MessageType', 't', 'Destination', 'd', 'Envelope', '{}'::jsonb)) FROM generate_series(1, 3) g))" >/dev/null
sql -c "SELECT whizbang.complete_outbox_published(ARRAY(SELECT message_id FROM whizbang.claim_work(
          '00000000-0000-4000-8000-0000000000d1', 'outbox', 2)))" >/dev/null
check_eq "outbox: 3 stored, 2 claimed, 2 completed" "3 2 2 0 0" "$(counts "''" outbox)"

check "stats(): the inbox totals are the sums over the consumers" \
  "SELECT (SELECT value FROM whizbang.stats() WHERE metric = 'counters_inbox_stored') = (SELECT sum(stored) FROM whizbang.counters WHERE source = 'inbox')
      AND (SELECT value FROM whizbang.stats() WHERE metric = 'counters_inbox_dead_lettered') = 1
      AND (SELECT value FROM whizbang.stats() WHERE metric = 'counters_outbox_completed') = 2"

# Another database counts apart.
sql -c "CREATE DATABASE other" && sql -d other -c "CREATE EXTENSION whizbang" \
  && sql -d other -c "SELECT count(*) FROM whizbang.store_inbox_messages($(batch z 2), p_consumer => 'c1')" >/dev/null
check_eq "another database's counts are its own" "2" \
  "$(sql -d other -c "SELECT stored FROM whizbang.counters WHERE consumer = 'c1'")"
check_eq "and not this one's" "8 0 0 0 0" "$(counts "'c1'")"

# Room for 10 named consumers per server (c1, c2, c3, the outbox's '', the other database's c1
# and five more): the later ones are counted together, per database and source.
for n in $(seq 4 14); do
  sql -c "SELECT count(*) FROM whizbang.store_inbox_messages($(batch "x$n" 1), p_consumer => 'c$n')" >/dev/null
done
check "the consumers beyond the room are counted together (consumer NULL), none is lost" \
  "SELECT count(*) FILTER (WHERE consumer IS NOT NULL) = 8 AND sum(stored) FILTER (WHERE consumer IS NULL) = 6
          AND sum(stored) = 8 + 4 + 3 + 11 FROM whizbang.counters WHERE source = 'inbox'"

# A restart starts at 0.
pg_ctlcluster "${PGVERSION:-15}" regress restart
check "after a restart: no counts" "SELECT count(*) = 0 FROM whizbang.counters()"

[ "$FAILED" -eq 0 ]
