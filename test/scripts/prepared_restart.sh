#!/usr/bin/env bash
# Outcomes held in PREPARE TRANSACTION across a server restart (issue 20, DESIGN §3.8), in a
# throw-away cluster of each lease store (max_prepared_transactions = 5). A worker claims four
# rows, then in one transaction completes inbox row r1, fails r2 (a retry) and completes outbox
# row o1, and prepares it; r3 stays leased. Then stop -m immediate, start: the shared-memory
# store has lost every lease, the prepared transaction has not. Checked:
#   - before COMMIT / ROLLBACK PREPARED no claim (now, and an hour later when every lease has
#     lapsed) is handed r1, r2 or o1, while r3 is claimable an hour later (the table store keeps
#     its lease until then; the shared-memory store voids it at the restart);
#   - ROLLBACK PREPARED of a second round (the same outcomes prepared again by the new holder)
#     gives the rows back: they are claimable once that lease lapses;
#   - COMMIT PREPARED from a session that is not the preparing one removes r1 and o1, and puts
#     r2 back as scheduled work with its error kept.
# Each store runs twice: as installed, and with row security on the work and message tables
# (claims then read them with SQL: the same rows must be passed over). Takes about 20 s. Ends
# with ok/FAIL lines; exits non-zero when a check failed.
#   PREPARED_RESTART_STORES="shared_memory"  (or "table") one cluster only
set -euo pipefail

self=$(readlink -f "$0")
cd "$(dirname "$self")/../.."
source scripts/lib.sh
source test/lib/checks.sh

q() { psql -X -q -A -t -v ON_ERROR_STOP=1 -c "$1"; }

R1=34000000-0000-4000-8000-000000000001
R2=34000000-0000-4000-8000-000000000002
R3=34000000-0000-4000-8000-000000000003
O1=34000000-0000-4000-8000-0000000000f1
WORKER=c1000000-0000-4000-8000-000000000001

# Claims every due row at $1 as a fresh instance; prints the claimed ids, sorted, one line.
claimed_at() {
  q "SELECT coalesce(string_agg(right(message_id::text, 2), ' ' ORDER BY message_id), '')
       FROM whizbang.claim_work(gen_random_uuid(), NULL, 100, 60, NULL, 10000, 100, $1, NULL)"
}

# Prepares, as $WORKER's holder of the tokens in prepared_restart.tokens, the outcomes of the
# description above under the name $1.
prepare_outcomes() {
  q "BEGIN;
     SELECT count(*) FROM whizbang.complete_work('inbox', ARRAY['$R1'::uuid],
       ARRAY[(SELECT token FROM prepared_restart.tokens WHERE id = '$R1')], 'pr', now());
     SELECT count(*) FROM whizbang.fail_work('inbox', ARRAY['$R2'::uuid], ARRAY['boom'],
       ARRAY[(SELECT token FROM prepared_restart.tokens WHERE id = '$R2')], ARRAY[true], 'pr', now());
     SELECT count(*) FROM whizbang.complete_work('outbox', ARRAY['$O1'::uuid],
       ARRAY[(SELECT token FROM prepared_restart.tokens WHERE id = '$O1')], '', now());
     PREPARE TRANSACTION '$1';" >/dev/null
}

if [ "${1:-}" = "--in-cluster" ]; then
  q "CREATE EXTENSION whizbang" >/dev/null
  if [ "${WB_ROW_SECURITY:-}" = 1 ]; then
    # Row security on the work and message tables: claims read them with SQL, not through the
    # index AM (issue 30 item 3: that re-read lacked the check for a row being deleted elsewhere).
    for t in wh_inbox wh_outbox; do
      q "ALTER TABLE whizbang.$t ENABLE ROW LEVEL SECURITY; CREATE POLICY everything ON whizbang.$t USING (true)"
    done
    echo "(row security on the work and message tables)"
  fi
  check_lease_store
  check_eq "max_prepared_transactions is set" 5 "$(q 'SHOW max_prepared_transactions')"
  q "CREATE SCHEMA prepared_restart; CREATE TABLE prepared_restart.tokens (id uuid PRIMARY KEY, token bigint)"
  q "SELECT count(*) FROM whizbang.store_inbox_messages(jsonb_build_array(
       jsonb_build_object('MessageId', '$R1', 'HandlerName', 'h', 'MessageType', 't', 'Envelope', '{}'::jsonb),
       jsonb_build_object('MessageId', '$R2', 'HandlerName', 'h', 'MessageType', 't', 'Envelope', '{}'::jsonb),
       jsonb_build_object('MessageId', '$R3', 'HandlerName', 'h', 'MessageType', 't', 'Envelope', '{}'::jsonb)),
       NULL, NULL, now() - interval '1 minute', 10000, 'pr');
     SELECT count(*) FROM whizbang.store_outbox_messages(jsonb_build_array(
       jsonb_build_object('MessageId', '$O1', 'Destination', 'd', 'MessageType', 't', 'Envelope', '{}'::jsonb)),
       NULL, NULL, now() - interval '1 minute')" >/dev/null
  q "INSERT INTO prepared_restart.tokens SELECT message_id, lease_token
       FROM whizbang.claim_work('$WORKER', NULL, 100, 60, NULL, 10000, 100, now(), NULL)"
  check_eq "the worker claimed the four rows" 4 "$(q "SELECT count(*) FROM prepared_restart.tokens")"
  prepare_outcomes wb_prepared_restart
  # Claims later than every lease so far: r3's lease has lapsed, the prepared rows' must not count.
  check_eq "before the restart, a claim an hour later gets r3 and no row of the prepared outcomes" "03" \
    "$(claimed_at "now() + interval '1 hour'")"

  echo "== stop -m immediate, start"
  pg_ctlcluster "${PGVERSION:-15}" regress stop -m immediate
  pg_ctlcluster "${PGVERSION:-15}" regress start
  check_eq "the prepared transaction survived the restart" 1 \
    "$(q "SELECT count(*) FROM pg_prepared_xacts WHERE gid = 'wb_prepared_restart'")"
  if [ "$WB_LEASE_STORE" = shared_memory ]; then
    check_eq "shared memory: after the restart r3 is claimable at once (its lease is void), nothing else" "03" \
      "$(claimed_at "now()")"
  else
    check_eq "table store: after the restart nothing is claimable at once (r3's lease runs)" "" "$(claimed_at "now()")"
  fi
  check_eq "two days later, with every lease lapsed, a claim still gets no row of the prepared outcomes" "03" \
    "$(claimed_at "now() + interval '2 days'")"

  q "COMMIT PREPARED 'wb_prepared_restart'"
  check "COMMIT PREPARED (another session) removed r1 and o1" \
    "SELECT NOT EXISTS (SELECT FROM whizbang.wh_inbox WHERE message_id = '$R1')
        AND NOT EXISTS (SELECT FROM whizbang.wh_outbox WHERE message_id = '$O1')"
  check "COMMIT PREPARED put r2 back as scheduled work with its error" \
    "SELECT scheduled_for > now() AND last_error = 'boom' FROM whizbang.wh_inbox WHERE message_id = '$R2'"

  # A second round, rolled back after a restart: r2 is claimed again once due, its completion
  # is prepared, the server restarts, ROLLBACK PREPARED gives the row back.
  q "TRUNCATE prepared_restart.tokens;
     INSERT INTO prepared_restart.tokens SELECT message_id, lease_token
       FROM whizbang.claim_work('$WORKER', 'inbox', 100, 60, NULL, 10000, 100, now() + interval '1 day', 'pr')
      WHERE message_id = '$R2'"
  check_eq "r2 was claimed again once due" 1 "$(q "SELECT count(*) FROM prepared_restart.tokens")"
  q "BEGIN;
     SELECT count(*) FROM whizbang.complete_work('inbox', ARRAY['$R2'::uuid],
       ARRAY[(SELECT token FROM prepared_restart.tokens WHERE id = '$R2')], 'pr', now() + interval '1 day');
     PREPARE TRANSACTION 'wb_prepared_restart_2';" >/dev/null
  echo "== stop -m immediate, start"
  pg_ctlcluster "${PGVERSION:-15}" regress stop -m immediate
  pg_ctlcluster "${PGVERSION:-15}" regress start
  check_eq "after the second restart, r2 (its completion prepared) goes to no one, r3 (lapsed) does" "03" \
    "$(claimed_at "now() + interval '3 days'")"
  q "ROLLBACK PREPARED 'wb_prepared_restart_2'"
  check_eq "after ROLLBACK PREPARED, r2 is claimable again once its lease has lapsed" "02 03" \
    "$(claimed_at "now() + interval '4 days'")"
  check "no prepared transaction is left" "SELECT count(*) = 0 FROM pg_prepared_xacts"
  exit "$FAILED"
fi

start=$(date +%s)
status=0
for store in ${PREPARED_RESTART_STORES:-${WB_LEASE_STORES:-table shared_memory}}; do
  for rls in 0 1; do
    echo "=== cluster for the $store lease store$([ $rls = 1 ] && echo ", row security on the work tables")"
    options=(-o fsync=off -o max_prepared_transactions=5)
    [ "$store" = table ] || options+=(-o shared_preload_libraries=whizbang)
    WB_ROW_SECURITY=$rls WB_LEASE_STORE=$store pg_virtualenv -t -c "-p $(wb_free_port)" "${options[@]}" \
      timeout -k 5 120 bash "$self" --in-cluster || status=$((status + 1))
  done
done
echo "prepared_restart took $(($(date +%s) - start)) s"
[ "$status" -eq 0 ] && echo "all checks passed" || echo "prepared_restart: FAIL"
exit "$status"
