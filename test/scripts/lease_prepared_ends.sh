#!/usr/bin/env bash
# Prepared ends and the lease store's capacity (issue 30, items 1, 2, 4 and 5; DESIGN §3.8), in a
# cluster of each lease store (shared memory: whizbang.max_leases = 100, the smallest):
#   1. 300 rounds of BEGIN; claim_work(1); complete_work; PREPARE TRANSACTION; COMMIT PREPARED all
#      claim and complete: a slot owned by a prepared transaction is settled when that transaction
#      ends, not when somebody touches its key again (before 0.13.0 the 101st claim got nothing).
#      The same with ROLLBACK PREPARED followed by a plain completion, and with ROLLBACK PREPARED
#      of a claim. stats() counts the slots held by prepared transactions.
#   2. A prepared completion's slot never asks the commit log about an xid whose segment is
#      gone: after COMMIT PREPARED, 1,100,000 xids burnt and VACUUM FREEZE of every database
#      truncate pg_xact past it, whizbang.leases and claims still answer.
#   4. A full table refuses an unfenced end (complete_work / cancel_work without tokens) of a row
#      it cannot mark, with a clear error (53400), instead of letting it go unrecorded.
#   5. ROLLBACK PREPARED of a completion brings back an earlier-expiring lease: a claim waiting
#      for work wakes when that lease lapses, not at its fallback poll.
# The table store runs the rounds of item 1 (no capacity there, the same answers).
#   LEASE_PREPARED_STORES="shared_memory" (or "table"; else WB_LEASE_STORES) one cluster only
#   LEASE_PREPARED_ITEMS="4 5" those items only (the capacity checks of item 1 always run)
set -euo pipefail

self=$(readlink -f "$0")
cd "$(dirname "$self")/../.."
source scripts/lib.sh      # wb_free_port
source test/lib/checks.sh  # check, check_eq, FAILED

CAPACITY=100
ROUNDS=${LEASE_PREPARED_ROUNDS:-300}  # 0: the other items only

if [ "${1:-}" != --inside ]; then
  status=0
  for store in ${LEASE_PREPARED_STORES:-${WB_LEASE_STORES:-shared_memory table}}; do
    opts=(-o fsync=off -o max_prepared_transactions=10)
    [ "$store" = table ] || opts+=(-o shared_preload_libraries=whizbang -o "whizbang.max_leases=$CAPACITY")
    echo "=== cluster for the $store lease store (${opts[*]})"
    pg_virtualenv -t -c "-p $(wb_free_port)" "${opts[@]}" bash "$self" --inside "$store" || status=1
  done
  [ $status -eq 0 ] && echo "all checks passed"
  exit $status
fi

store=$2
# The items to run (LEASE_PREPARED_ITEMS="2 4": those only, to see one fail on its own).
want() { case " ${LEASE_PREPARED_ITEMS:-1 2 4 5} " in *" $1 "*) return 0 ;; esac; return 1; }
sql() { psql -qXAt -v ON_ERROR_STOP=1 "$@"; }
stat() { sql -c "SELECT value FROM whizbang.stats() WHERE metric = '$1'"; }
I1=00000001-0000-4000-8000-000000000000

sql <<SQL
CREATE EXTENSION whizbang;
SELECT count(*) FROM whizbang.store_inbox_messages(
    (SELECT jsonb_agg(jsonb_build_object('MessageId', whizbang.uuid_v7(), 'HandlerName', 'h',
                                         'MessageType', 't', 'Envelope', jsonb_build_object('n', i)))
       FROM generate_series(1, 610) i), p_consumer => 'p');
SQL

# round KIND N: one claim of 1 and its completion in a prepared transaction, ended by KIND
# (commit | rollback); prints "claimed outcome" (nothing claimed: "0 -").
round() {
  sql -v ON_ERROR_STOP=1 2>&1 <<SQL
BEGIN;
SELECT message_id AS mid, lease_token AS tok FROM whizbang.claim_work('$I1', 'inbox', 1, 300, p_consumer => 'p') \\gset
SELECT '1 ' || outcome FROM whizbang.complete_work('inbox', ARRAY[:'mid']::uuid[], ARRAY[:tok]::bigint[], 'p');
PREPARE TRANSACTION 'end_$1_$2';
$( [ "$1" = commit ] && echo "COMMIT PREPARED 'end_$1_$2';" || echo "ROLLBACK PREPARED 'end_$1_$2';" )
SQL
}

# prepare_completion GID CONSUMER LEASE_SECONDS [END]: claims one row of CONSUMER (a lease of
# LEASE_SECONDS) and completes it in a transaction prepared as GID; END ("COMMIT PREPARED ..."),
# when given, runs after it.
prepare_completion() {
  sql >/dev/null <<SQL
BEGIN;
SELECT message_id AS mid, lease_token AS tok FROM whizbang.claim_work('$I1', 'inbox', 1, $3, p_consumer => '$2') \\gset
SELECT count(*) FROM whizbang.complete_work('inbox', ARRAY[:'mid']::uuid[], ARRAY[:tok]::bigint[], '$2');
PREPARE TRANSACTION '$1';
${4:-}
SQL
}

# --- 1. prepared ends free their slots ----------------------------------------------------------
want 1 || ROUNDS=0
bad=0
for ((n = 1; n <= ROUNDS; n++)); do
  got=$(round commit "$n" || true)
  if [ "$got" != "1 completed" ]; then bad=$((bad + 1)); [ $bad -le 3 ] && echo "     round $n answered: $got"; fi
done
check_eq "$ROUNDS rounds of claim + complete + PREPARE + COMMIT PREPARED: every one claimed and completed" 0 "$bad"
check_eq "the $ROUNDS completed messages are gone" $((610 - ROUNDS)) \
  "$(sql -c "SELECT count(*) FROM whizbang.wh_inbox WHERE consumer = 'p'")"
# ROLLBACK PREPARED of the completion, then a plain completion of the same lease.
bad=0
for ((n = 1; n <= ROUNDS / 3; n++)); do
  got=$(sql -v ON_ERROR_STOP=1 2>&1 <<SQL
SELECT message_id AS mid, lease_token AS tok FROM whizbang.claim_work('$I1', 'inbox', 1, 300, p_consumer => 'p') \\gset
BEGIN;
SELECT outcome FROM whizbang.complete_work('inbox', ARRAY[:'mid']::uuid[], ARRAY[:tok]::bigint[], 'p');
PREPARE TRANSACTION 'rb_$n';
ROLLBACK PREPARED 'rb_$n';
SELECT outcome FROM whizbang.complete_work('inbox', ARRAY[:'mid']::uuid[], ARRAY[:tok]::bigint[], 'p');
SQL
) || true
  if [ "$(echo $got)" != "completed completed" ]; then bad=$((bad + 1)); [ $bad -le 3 ] && echo "     round $n answered: $(echo $got)"; fi
done
check_eq "$((ROUNDS / 3)) rounds of claim, prepared completion, ROLLBACK PREPARED, plain completion: all completed" 0 "$bad"
# ROLLBACK PREPARED of the whole round (claim and completion): the row is claimable again.
bad=0
for ((n = 1; n <= ROUNDS / 3; n++)); do
  got=$(round rollback "$n" || true)
  if [ "$got" != "1 completed" ]; then bad=$((bad + 1)); [ $bad -le 3 ] && echo "     round $n answered: $got"; fi
done
check_eq "$((ROUNDS / 3)) rounds ended by ROLLBACK PREPARED: every one claimed (and claimable again)" 0 "$bad"
check_eq "no lease left, no entry left" "0 0" \
  "$(sql -c "SELECT (SELECT count(*) FROM whizbang.leases) || ' ' || coalesce((SELECT value FROM whizbang.stats()
                WHERE metric = 'lease_store_entries'), 0)")"
if [ "$store" = table ]; then exit "$FAILED"; fi
check_eq "stats() lease_store_full_claims = 0 (no claim found the table full)" 0 "$(stat lease_store_full_claims)"

# A slot held by a pending prepared transaction is counted, and kept from claims.
prepare_completion pending p 300
check_eq "stats() lease_store_prepared counts the slot of the pending prepared transaction" 1 "$(stat lease_store_prepared)"
sql -c "COMMIT PREPARED 'pending'"
check_eq "stats() lease_store_prepared is 0 once it is committed" "0 0" \
  "$(stat lease_store_prepared) $(stat lease_store_entries)"

# --- 2. no slot outlives its xid's commit-log segment ----------------------------------------------
if want 2; then
prepare_completion old p 300 "COMMIT PREPARED 'old';"
first_segment=$(sql -c "SELECT min(name) FROM pg_ls_dir('pg_xact') name")
# 1,100,000 xids, a transaction each (~10 s): a pg_xact segment holds 1,048,576.
sql <<'SQL'
CREATE PROCEDURE burn(n int) LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN 1 .. n LOOP
    PERFORM pg_catalog.txid_current();
    COMMIT;
  END LOOP;
END $$;
SQL
sql -c "CALL burn(${XID_BURN:-1100000})"
# Every database frozen (template0 too) lets VACUUM truncate pg_xact.
sql -c "ALTER DATABASE template0 ALLOW_CONNECTIONS true"
for db in $(sql -c "SELECT datname FROM pg_database WHERE datallowconn"); do sql -d "$db" -c "VACUUM FREEZE"; done
sql -c "ALTER DATABASE template0 ALLOW_CONNECTIONS false"
check "pg_xact was truncated past the prepared completion's xid (first segment was $first_segment)" \
  "SELECT min(name) > '$first_segment' FROM pg_ls_dir('pg_xact') name"
check "whizbang.leases still answers" "SELECT count(*) >= 0 FROM whizbang.leases"
check_eq "a claim still answers (and gets a row)" 1 \
  "$(sql -c "SELECT count(*) FROM whizbang.claim_work('$I1', 'inbox', 1, 300, p_consumer => 'p')")"
sql -c "SELECT count(*) FROM whizbang.complete_work('inbox', ARRAY(SELECT message_id FROM whizbang.leases), NULL, 'p')" >/dev/null

fi

# --- 4. a full table refuses an unfenced end it cannot record ---------------------------------------
if want 4; then
sql -c "SELECT count(*) FROM whizbang.claim_work('$I1', 'inbox', $CAPACITY, 300, p_consumer => 'p')" >/dev/null
check_eq "the table is full" "$CAPACITY" "$(stat lease_store_entries)"
free_id=$(sql -c "SELECT w.message_id FROM whizbang.wh_inbox w WHERE w.consumer = 'p'
                    AND NOT EXISTS (SELECT FROM whizbang.leases l WHERE l.message_id = w.message_id) LIMIT 1")
for call in "complete_work('inbox', ARRAY['$free_id']::uuid[], NULL, 'p')" \
            "cancel_work('inbox', ARRAY['$free_id']::uuid[], 'p')"; do
  got=$(sql -v VERBOSITY=verbose -c "SELECT * FROM whizbang.$call" 2>&1 | head -1 || true)
  case $got in
    *53400*"lease store is full"*) echo "ok   a full table refuses ${call%%(*} of a row without a lease: $got" ;;
    *) echo "FAIL a full table refuses ${call%%(*} of a row without a lease (got: $got)"; FAILED=$((FAILED + 1)) ;;
  esac
  check_eq "  and the row is still there" 1 "$(sql -c "SELECT count(*) FROM whizbang.wh_inbox WHERE message_id = '$free_id'")"
done
# Ends after the row is written need no mark (its in-progress xmax keeps claims off it): they work.
sql -c "SELECT count(*) FROM whizbang.store_outbox_messages(
          (SELECT jsonb_agg(jsonb_build_object('MessageId', whizbang.uuid_v7(), 'Destination', 'd',
                                               'MessageType', 't', 'Envelope', '{}'::jsonb)) FROM generate_series(1, 5)))" >/dev/null
check_eq "complete_outbox_published of 5 rows nobody holds (and an unknown id) works on a full table" 5 \
  "$(sql -c "SELECT whizbang.complete_outbox_published(ARRAY(SELECT message_id FROM whizbang.wh_outbox)
                                                       || '0190a1b2-c3d4-7e5f-8a9b-0000000000ff'::uuid)")"
check_eq "a plain DELETE of a work row nobody holds works on a full table" 1 \
  "$(sql -c "WITH d AS (DELETE FROM whizbang.wh_inbox WHERE message_id = '$free_id' RETURNING 1) SELECT count(*) FROM d")"
got=$(sql -c "SELECT outcome FROM whizbang.complete_work('inbox', ARRAY(SELECT message_id FROM whizbang.leases LIMIT 1), NULL, 'p')")
check_eq "an unfenced completion of a leased row still works on a full table" completed "$got"
sql -c "SELECT count(*) FROM whizbang.complete_work('inbox', ARRAY(SELECT message_id FROM whizbang.leases), NULL, 'p')" >/dev/null

fi

# --- 5. ROLLBACK PREPARED of a completion: waiters see the lease that came back ---------------------
if want 5; then
# A lease of 2 s is completed in a prepared transaction; a claim waits 20 s for work and finds
# nothing (the only row is that one, busy); ROLLBACK PREPARED brings the lease back: the waiter
# must take the row when it lapses (~2 s), not at the fallback poll.
sql -c "SELECT count(*) FROM whizbang.store_inbox_messages('[{\"MessageId\":\"0190a1b2-c3d4-7e5f-8a9b-000000000005\",\"HandlerName\":\"h\",\"MessageType\":\"t\",\"Envelope\":{}}]', p_consumer => 'w')" >/dev/null
prepare_completion wake w 2
start=$(date +%s%N)
sql -c "SELECT count(*) FROM whizbang.claim_work('00000002-0000-4000-8000-000000000000', 'inbox', 1, 300,
          p_consumer => 'w', p_wait => '20 s')" >/tmp/wb-wake.$$ 2>&1 & waiter=$!
sleep 0.5
sql -c "ROLLBACK PREPARED 'wake'"
wait "$waiter" || true
elapsed=$(( ($(date +%s%N) - start) / 1000000 ))
check_eq "the waiting claim took the row whose lease came back" 1 "$(cat /tmp/wb-wake.$$)"
check "  when its lease lapsed (after ${elapsed} ms), not at the fallback poll (20 s)" "SELECT $elapsed < 6000"
rm -f /tmp/wb-wake.$$
fi
exit "$FAILED"
