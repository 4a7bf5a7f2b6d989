#!/usr/bin/env bash
# Multi-connection proof of the dedup write path: 4 clients record overlapping batches of
# ids, each batch in a random order, for a few seconds. Asserts no client failed (no
# deadlock, no unique violation), every id was 'new' exactly once, and every delivery was
# counted exactly once in observation_count.
set -euo pipefail
cd "$(dirname "$0")/../.."
work=$(mktemp -d /tmp/whizbang-concurrency.XXXXXX)
chmod 755 "$work"
cat >"$work/batch.sql" <<'SQL'
\set seed random(1, 1000000000)
BEGIN;
INSERT INTO delivery_log (outcome)
SELECT outcome FROM whizbang.dedup_insert_many(
  (SELECT array_agg(md5('id' || (abs(hashint8(:seed::bigint * 100 + g)) % 100000))::uuid
                    ORDER BY hashint8(:seed::bigint * 1000 + g))
     FROM generate_series(1, 50) g), 'stress');
COMMIT;
SQL
cat >"$work/check.sh" <<'SH'
set -euo pipefail
psql -qX -v ON_ERROR_STOP=1 -c "CREATE EXTENSION whizbang; CREATE TABLE delivery_log (outcome text NOT NULL);"
pgbench -n -c 4 -j 2 -T "${STRESS_SECONDS:-8}" -f "$1/batch.sql" >"$1/pgbench.out" 2>&1 || true
cat "$1/pgbench.out"
grep -qE 'aborted|ERROR|deadlock' "$1/pgbench.out" && { echo "a client failed"; exit 1; }
psql -AtX -v ON_ERROR_STOP=1 <<'SQL' | tee "$1/result"
SELECT (SELECT count(*) FROM delivery_log) AS deliveries,
       (SELECT sum(observation_count) FROM whizbang.wh_message_deduplication WHERE consumer = 'stress') AS observed,
       (SELECT count(*) FROM delivery_log WHERE outcome = 'new') AS news,
       (SELECT count(*) FROM whizbang.wh_message_deduplication WHERE consumer = 'stress') AS ids;
SQL
IFS='|' read -r deliveries observed news ids <"$1/result"
[ "$deliveries" -gt 1000 ] || { echo "too few deliveries ran: $deliveries"; exit 1; }
[ "$deliveries" = "$observed" ] || { echo "deliveries $deliveries != observations $observed"; exit 1; }
[ "$news" = "$ids" ] || { echo "'new' outcomes $news != recorded ids $ids"; exit 1; }
echo "ok: $deliveries deliveries, $ids ids each new exactly once, every delivery counted"
SH
source scripts/lib.sh  # wb_free_port
pg_virtualenv -t -c "-p $(wb_free_port)" -o fsync=off bash "$work/check.sh" "$work"
rm -rf "$work"
