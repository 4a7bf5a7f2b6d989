#!/usr/bin/env bash
# Leases across a crash (issue 11, DESIGN §3.4, §3.8). Two throw-away clusters with fsync = on,
# one per lease store: one with shared_preload_libraries = whizbang (leases in shared memory),
# one without (leases in the work rows). In each, producers store inbox and outbox messages,
# workers claim and complete them, a hoarder claims and keeps its leases; the client
# (test/scripts/lease_crash.py) notes every acknowledged store and completion and every token a
# claim handed out (committed or not). After 3 s, pg_ctlcluster stop -m immediate, start:
#   - no acknowledged store is lost: each is still work, or its completion was acknowledged or
#     in doubt; no acknowledged completion comes back (stored, or handed out by a claim);
#   - shared-memory store: no lease is left (whizbang.leases is empty) and every unfinished row
#     is claimable at once (one claim at now() gets all due rows);
#     table store: leases survive a restart, so the rows under a live lease are not claimable
#     before their expiry (a claim at now() gets none of them) and are an hour later;
#   - every token handed out after the restart is larger than every token handed out before;
#   - then everything left is claimed an hour later and completed (nothing acknowledged lost).
# The store-specific checks follow whizbang.lease_store(), not the cluster's settings.
# Ends with ok/FAIL lines and exits non-zero when a check failed. Takes about 30 s.
#   LEASE_CRASH_STORES="shared_memory"  (or "table") one cluster only
#   LEASE_CRASH_SABOTAGE=async   synchronous_commit = off (10 s WAL writer delay): acknowledged
#                                stores and completions are lost, and the checks must say so
#   LEASE_CRASH_SABOTAGE=tokens  the token sequence is set back after the restart (the table
#                                store's tokens; the token check must fail there)
set -euo pipefail

self=$(readlink -f "$0")
cd "$(dirname "$self")/../.."
source scripts/lib.sh       # wb_free_port
source test/lib/checks.sh   # check, check_eq, FAILED, wb_python

q() { psql -X -q -A -t -v ON_ERROR_STOP=1 -c "$1"; }

# Acknowledged stores whose completion was neither acknowledged nor in doubt.
OWED="SELECT s.source, s.id FROM crash_client.stored s WHERE s.acked
        AND NOT EXISTS (SELECT FROM crash_client.completed c WHERE c.id = s.id)"
# Unfinished, due work (inbox and outbox) and its message ids.
DUE="SELECT 'inbox' AS source, message_id FROM whizbang.wh_inbox WHERE processed_at IS NULL AND scheduled_for <= now()
     UNION ALL SELECT 'outbox', message_id FROM whizbang.wh_outbox WHERE processed_at IS NULL AND scheduled_for <= now()"
# Completes the claimed rows of table lease_client.$1 as of $2; prints outcome counts.
complete_claimed() {
  q "SELECT string_agg(outcome || ' ' || n, ', ') FROM (
       SELECT o.outcome, count(*) AS n FROM (
         SELECT * FROM whizbang.complete_work('inbox',
           ARRAY(SELECT message_id FROM lease_client.$1 WHERE source = 'inbox' ORDER BY message_id),
           ARRAY(SELECT lease_token FROM lease_client.$1 WHERE source = 'inbox' ORDER BY message_id), 'crash', $2)
         UNION ALL
         SELECT * FROM whizbang.complete_work('outbox',
           ARRAY(SELECT message_id FROM lease_client.$1 WHERE source = 'outbox' ORDER BY message_id),
           ARRAY(SELECT lease_token FROM lease_client.$1 WHERE source = 'outbox' ORDER BY message_id), '', $2)) o
       GROUP BY o.outcome) x"
}

if [ "${1:-}" = "--in-cluster" ]; then
  wb_python
  check_eq "the cluster runs with fsync = on" "on" "$(q 'SHOW fsync')"
  q "CREATE EXTENSION whizbang" >/dev/null
  store=$(q "SELECT whizbang.lease_store()")
  echo "lease store: $store (shared_preload_libraries = '$(q 'SHOW shared_preload_libraries')')"
  [ "$2" = table ] && check_eq "a cluster without the preload runs the table store" table "$store"
  "$PY" test/scripts/lease_crash.py setup
  echo "== load, stop -m immediate, start"
  "$PY" test/scripts/lease_crash.py load

  check "stores, claims and completions were acknowledged before the crash" \
    "SELECT (SELECT count(*) FROM crash_client.stored WHERE acked) > 0
        AND (SELECT count(*) FROM crash_client.tokens) > 0
        AND (SELECT count(*) FROM crash_client.completed WHERE acked) > 0"
  check "every live lease was completed when its completion was acknowledged" \
    "SELECT coalesce(sum(n), 0) = 0 FROM crash_client.events WHERE name LIKE 'completion of a live lease%'"
  check "no acknowledged store is lost: each is still unfinished work or its completion was sent" \
    "SELECT count(*) = 0 FROM ($OWED) s
      WHERE NOT (CASE s.source
                   WHEN 'inbox' THEN EXISTS (SELECT FROM whizbang.wh_inbox m JOIN whizbang.wh_inbox w
                                               USING (consumer, message_id)
                                              WHERE m.consumer = 'crash' AND m.message_id = s.id AND w.processed_at IS NULL)
                   ELSE EXISTS (SELECT FROM whizbang.wh_outbox m JOIN whizbang.wh_outbox w USING (message_id)
                                 WHERE m.message_id = s.id AND w.processed_at IS NULL) END)"
  check "no acknowledged completion came back (message or work row)" \
    "SELECT count(*) = 0 FROM crash_client.completed c WHERE c.acked
       AND (EXISTS (SELECT FROM whizbang.wh_inbox w WHERE w.message_id = c.id)
         OR EXISTS (SELECT FROM whizbang.wh_inbox m WHERE m.message_id = c.id)
         OR EXISTS (SELECT FROM whizbang.wh_outbox w WHERE w.message_id = c.id)
         OR EXISTS (SELECT FROM whizbang.wh_outbox m WHERE m.message_id = c.id))"

  [ "${LEASE_CRASH_SABOTAGE:-}" = tokens ] && q "SELECT setval('whizbang.wh_lease_token_seq', 1)" >/dev/null
  # One claim at now(), in the same transaction (same now()) as the notes of what it could get.
  q "CREATE TABLE lease_client.live AS SELECT source, message_id, lease_expiry FROM whizbang.leases WHERE lease_expiry > now();
     CREATE TABLE lease_client.due AS $DUE;
     CREATE TABLE lease_client.claimed_now AS
       SELECT source, message_id, lease_token FROM whizbang.claim_work(gen_random_uuid(), NULL, 1000000, 60,
                                                                       NULL, 10000, 1000000, now());"
  echo "   after the restart: $(q "SELECT count(*) FROM lease_client.due") due rows, $(q "SELECT count(*) FROM lease_client.live") live leases, one claim at now() got $(q "SELECT count(*) FROM lease_client.claimed_now")"
  if [ "$store" = shared_memory ]; then
    check "shared memory: no lease outlived the restart" "SELECT count(*) = 0 FROM lease_client.live"
    check "shared memory: every unfinished row was claimable at once (one claim at now() got all due rows)" \
      "SELECT count(*) > 0 AND count(*) = (SELECT count(*) FROM lease_client.claimed_now)
              AND NOT EXISTS (SELECT source, message_id FROM lease_client.due
                              EXCEPT SELECT source, message_id FROM lease_client.claimed_now)
         FROM lease_client.due"
  else
    echo "   (lease store '$store': leases survive a restart, so not every row is claimable at once;"
    echo "    checked instead: no row under a live lease is handed out before its expiry)"
    check "$store: the hoarder's leases outlived the restart" "SELECT count(*) > 0 FROM lease_client.live"
    check "$store: a claim at now() got no row under a live lease" \
      "SELECT NOT EXISTS (SELECT FROM lease_client.live l JOIN lease_client.claimed_now c USING (source, message_id))"
  fi
  echo "   completing the claim at now(): $(complete_claimed claimed_now "now()")"

  # Everything left, an hour later (leases lapsed), claimed and completed.
  q "CREATE TABLE lease_client.drained AS
       SELECT source, message_id, lease_token FROM whizbang.claim_work(gen_random_uuid(), NULL, 1000000, 60,
                                                                       NULL, 10000, 1000000, now() + interval '1 hour')"
  echo "   an hour later: a claim got $(q "SELECT count(*) FROM lease_client.drained"); completing: $(complete_claimed drained "now() + interval '1 hour'")"
  check "every token handed out after the restart is larger than every token handed out before it" \
    "SELECT (SELECT min(lease_token) FROM (SELECT lease_token FROM lease_client.claimed_now
                                           UNION ALL SELECT lease_token FROM lease_client.drained) a)
          > (SELECT max(token) FROM lease_client.seen)"
  check "no acknowledged completion was handed out again after the restart" \
    "SELECT NOT EXISTS (SELECT FROM crash_client.completed c WHERE c.acked AND c.id IN
                          (SELECT message_id FROM lease_client.claimed_now UNION ALL SELECT message_id FROM lease_client.drained))"
  check "every acknowledged store not completed before the crash was handed out after it" \
    "SELECT NOT EXISTS (SELECT source, id FROM ($OWED) s
                        EXCEPT SELECT source, message_id FROM lease_client.claimed_now
                        EXCEPT SELECT source, message_id FROM lease_client.drained)"
  check "no work is left" \
    "SELECT NOT EXISTS (SELECT FROM whizbang.wh_inbox) AND NOT EXISTS (SELECT FROM whizbang.wh_outbox)"
  exit "$FAILED"
fi

start=$(date +%s)
status=0
for cluster in ${LEASE_CRASH_STORES:-table shared_memory}; do
  echo "=== cluster for the $cluster lease store"
  options=(-o fsync=on -o synchronous_commit=on -o full_page_writes=on)
  [ "$cluster" = table ] || options+=(-o shared_preload_libraries=whizbang)
  [ "${LEASE_CRASH_SABOTAGE:-}" = async ] && options+=(-o synchronous_commit=off -o wal_writer_delay=10000)
  pg_virtualenv -t -c "-p $(wb_free_port)" "${options[@]}" timeout -k 5 120 bash "$self" --in-cluster "$cluster" ||
    status=$((status + $?))
done
echo "lease_crash took $(($(date +%s) - start)) s"
[ "$status" -eq 0 ] && echo "all checks passed" || echo "lease_crash: FAIL ($status failed checks or an error)"
exit "$status"
