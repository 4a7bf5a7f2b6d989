#!/usr/bin/env bash
# Multi-connection proof of sealed dedup generations (0.14.0, src/pg/store/dedup_filters.h):
# clients record overlapping batches of ids, each batch with a p_now of today, yesterday or the
# day before (backfills into yesterday's and the day before's generations, which unseal them),
# while another client seals the generations over and over (seal_dedup_generations). Asserts no
# client failed, every id was 'new' exactly once across all generations, and every delivery was
# counted exactly once. Retryable errors of the protocol (40001: a generation sealed between a
# store's unsealing and its insertion; 40P01, 55P03: an unsealing's ACCESS EXCLUSIVE meeting
# other stores) are retried inside the transaction and counted.
set -euo pipefail
cd "$(dirname "$0")/../.."
work=$(mktemp -d /tmp/whizbang-seal-concurrency.XXXXXX)
chmod 755 "$work"
cat >"$work/setup.sql" <<'SQL'
CREATE EXTENSION whizbang;
CREATE TABLE delivery_log (outcome text NOT NULL);
CREATE SEQUENCE retries;
CREATE SEQUENCE seals;
CREATE FUNCTION record_batch(p_seed bigint) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  v_ids uuid[];
  v_now timestamptz := pg_catalog.now() - (p_seed % 3) * interval '1 day';
  v_tries int := 0;
BEGIN
  SELECT array_agg(md5('id' || (abs(hashint8(p_seed * 100 + g)) % 20000))::uuid ORDER BY hashint8(p_seed * 1000 + g))
    INTO v_ids FROM generate_series(1, 50) g;
  LOOP
    BEGIN
      INSERT INTO delivery_log (outcome)
      SELECT outcome FROM whizbang.dedup_insert_many(v_ids, 'stress', p_now => v_now);
      RETURN;
    EXCEPTION WHEN serialization_failure OR deadlock_detected OR lock_not_available THEN
      PERFORM nextval('retries');
      v_tries := v_tries + 1;
      IF v_tries = 50 THEN RAISE EXCEPTION 'a batch kept failing: 50 retries'; END IF;
    END;
  END LOOP;
END $$;
CREATE FUNCTION seal() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  IF whizbang.seal_dedup_generations() > 0 THEN PERFORM nextval('seals'); END IF;
EXCEPTION WHEN deadlock_detected OR lock_not_available THEN
  PERFORM nextval('retries');
END $$;
-- today's and tomorrow's generations made ahead (stores making today's at once can collide on
-- its name: 42P07, seen once here, not this test's subject); yesterday's and the day before's, sealed
SELECT count(*) FROM whizbang.perform_maintenance();
-- the generations of yesterday and the day before, sealed
SELECT whizbang.dedup_insert(gen_random_uuid(), 'seed', p_now => pg_catalog.now() - d * interval '1 day') FROM generate_series(1, 2) d;
SELECT whizbang.seal_dedup_generations();
SQL
cat >"$work/batch.sql" <<'SQL'
\set seed random(1, 1000000000)
SELECT record_batch(:seed);
SQL
cat >"$work/seal.sql" <<'SQL'
SELECT seal();
SQL
cat >"$work/check.sh" <<'SH'
set -euo pipefail
psql -qX -v ON_ERROR_STOP=1 -f "$1/setup.sql" >/dev/null
pgbench -n -c 5 -j 2 -T "${STRESS_SECONDS:-10}" -f "$1/batch.sql@8" -f "$1/seal.sql@2" >"$1/pgbench.out" 2>&1 || true
cat "$1/pgbench.out"
grep -qE 'aborted|ERROR|deadlock' "$1/pgbench.out" && { echo "a client failed"; exit 1; }
psql -AtX -v ON_ERROR_STOP=1 <<'SQL' | tee "$1/result"
SELECT (SELECT count(*) FROM delivery_log) AS deliveries,
       (SELECT sum(observation_count) FROM whizbang.wh_message_deduplication WHERE consumer = 'stress') AS observed,
       (SELECT count(*) FROM delivery_log WHERE outcome = 'new') AS news,
       (SELECT count(*) FROM whizbang.wh_message_deduplication WHERE consumer = 'stress') AS ids,
       (SELECT count(DISTINCT message_id) FROM whizbang.wh_message_deduplication WHERE consumer = 'stress') AS distinct_ids,
       (SELECT last_value FROM seals) AS seals, (SELECT last_value FROM retries) AS retries;
SQL
IFS='|' read -r deliveries observed news ids distinct seals retries <"$1/result"
[ "$deliveries" -gt 1000 ] || { echo "too few deliveries ran: $deliveries"; exit 1; }
[ "$ids" = "$distinct" ] || { echo "an id is recorded in two generations: $ids records, $distinct ids"; exit 1; }
[ "$deliveries" = "$observed" ] || { echo "deliveries $deliveries != observations $observed"; exit 1; }
[ "$news" = "$ids" ] || { echo "'new' outcomes $news != recorded ids $ids"; exit 1; }
[ "$seals" -gt 1 ] || { echo "the generations were sealed only $seals times: nothing was tested"; exit 1; }
echo "ok: $deliveries deliveries, $ids ids each new exactly once, every delivery counted; $seals seals, $retries retries"
SH
source scripts/lib.sh  # wb_free_port
pg_virtualenv -t -c "-p $(wb_free_port)" -o fsync=off bash "$work/check.sh" "$work"
rm -rf "$work"
