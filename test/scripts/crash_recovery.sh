#!/usr/bin/env bash
# Crash recovery (DESIGN §1: what a COMMIT acknowledged survives a crash). One throw-away
# cluster with fsync = on (pg_virtualenv's default is off, which would make a crash lose
# acknowledged commits). Producers store inbox and outbox messages (half with a StreamId),
# workers claim, complete and dead-letter them; test/scripts/crash_recovery.py notes what the
# server acknowledged. Two crashes, each under that load:
#   kill       kill -9 of the backend running a 50,000-message store_inbox_messages (the
#              postmaster then ends every backend and recovers)
#   immediate  pg_ctlcluster stop -m immediate (pg_ctl stop -m immediate), then start
# After each (the notes are in crash_client.*, "acknowledged" = its COMMIT returned):
#   - every acknowledged inbox store has its dedup record (wh_message_deduplication);
#   - every acknowledged store not acknowledged as completed (nor in doubt) is still work
#     (wh_inbox + wh_inbox, wh_outbox + wh_outbox) or a dead letter;
#   - nothing acknowledged as completed is stored or handed out again;
#   - the killed 50,000-message store left nothing (it never committed: all or nothing);
#   - redelivering every acknowledged inbox id answers duplicate;
#   - messages and work rows still match one to one;
#   - claims and completions work after the restart, and every lease token acknowledged after
#     it is larger than every token acknowledged before.
# Finally everything left is claimed (leases treated as lapsed) and completed. Ends with ok/FAIL
# lines and exits non-zero when a check failed. Takes about a minute.
#   CRASH_SABOTAGE=async   synchronous_commit = off (and a 10 s WAL writer delay): acknowledged
#                          commits are lost, and the checks must say so (shows they can fail)
set -euo pipefail

self=$(readlink -f "$0")
cd "$(dirname "$self")/../.."
source scripts/lib.sh       # wb_free_port
source test/lib/checks.sh   # check, check_eq, FAILED, wb_python

q() { psql -X -q -A -t -v ON_ERROR_STOP=1 -c "$1"; }

# Checks after phase $1 (kill or immediate); $2 = 1 for the phase with the killed big store.
checks_after() {
  local p=$1
  check "$p: every acknowledged inbox store has its dedup record" \
    "SELECT count(*) = 0 FROM crash_client.stored s WHERE s.acked AND s.source = 'inbox'
       AND NOT EXISTS (SELECT FROM whizbang.wh_message_deduplication d
                        WHERE d.consumer = 'crash' AND d.message_id = s.id)"
  check "$p: every acknowledged store not completed is still work or a dead letter" \
    "SELECT count(*) = 0 FROM crash_client.stored s WHERE s.acked
       AND NOT EXISTS (SELECT FROM crash_client.completed c WHERE c.id = s.id)
       AND NOT (CASE s.source
                  WHEN 'inbox' THEN EXISTS (SELECT FROM whizbang.wh_inbox m JOIN whizbang.wh_inbox w
                                              USING (consumer, message_id)
                                             WHERE m.consumer = 'crash' AND m.message_id = s.id AND w.processed_at IS NULL)
                  ELSE EXISTS (SELECT FROM whizbang.wh_outbox m JOIN whizbang.wh_outbox w USING (message_id)
                                WHERE m.message_id = s.id AND w.processed_at IS NULL) END
                OR EXISTS (SELECT FROM whizbang.wh_dead_letters d WHERE d.source = s.source AND d.message_id = s.id))"
  check "$p: acknowledged dead letters are still dead letters" \
    "SELECT count(*) = 0 FROM crash_client.dead x WHERE x.acked
       AND NOT EXISTS (SELECT FROM whizbang.wh_dead_letters d WHERE d.source = x.source AND d.message_id = x.id)"
  check "$p: nothing acknowledged as completed is stored again" \
    "SELECT count(*) = 0 FROM crash_client.completed c WHERE c.acked
       AND (EXISTS (SELECT FROM whizbang.wh_inbox w WHERE w.message_id = c.id)
         OR EXISTS (SELECT FROM whizbang.wh_inbox m WHERE m.message_id = c.id)
         OR EXISTS (SELECT FROM whizbang.wh_outbox w WHERE w.message_id = c.id)
         OR EXISTS (SELECT FROM whizbang.wh_outbox m WHERE m.message_id = c.id))"
  check "$p: no completed message was handed out again, none completed twice" \
    "SELECT coalesce(sum(n), 0) = 0 FROM crash_client.events
      WHERE name IN ('completed message handed out again', 'completed twice')"
  check "$p: every fresh claim completed (or dead-lettered) with its token" \
    "SELECT coalesce(sum(n), 0) = 0 FROM crash_client.events WHERE name LIKE 'fresh claim not %'"
  check "$p: redelivering every acknowledged inbox id answers duplicate" \
    "SELECT count(*) = (SELECT count(*) FROM crash_client.stored WHERE acked AND source = 'inbox')
            AND bool_and(outcome = 'duplicate')
       FROM whizbang.inbox_receive((SELECT jsonb_agg(jsonb_build_object('MessageId', id, 'HandlerName', 'h',
                                              'MessageType', 't', 'Envelope', '{}'::jsonb))
                                      FROM crash_client.stored WHERE acked AND source = 'inbox'), 'crash')"
  check "$p: inbox messages and work rows match one to one" \
    "SELECT NOT EXISTS (SELECT FROM whizbang.wh_inbox m FULL JOIN whizbang.wh_inbox w USING (consumer, message_id)
                         WHERE m.message_id IS NULL OR w.message_id IS NULL)"
  check "$p: outbox messages and work rows match one to one" \
    "SELECT NOT EXISTS (SELECT FROM whizbang.wh_outbox m FULL JOIN whizbang.wh_outbox w USING (message_id)
                         WHERE m.message_id IS NULL OR w.message_id IS NULL)"
  check "$p: claims and completions worked after the restart" \
    "SELECT (SELECT count(*) FROM crash_client.tokens WHERE phase = '$p' AND after_crash) > 0
        AND (SELECT count(*) FROM crash_client.completed WHERE phase = '$p' AND acked) > 0"
  check "$p: lease tokens after the restart are larger than every token before it" \
    "SELECT (SELECT min(token) FROM crash_client.tokens WHERE phase = '$p' AND after_crash)
          > (SELECT max(token) FROM crash_client.tokens WHERE phase < '$p' OR (phase = '$p' AND NOT after_crash))"
  check "$p: stores and claims were acknowledged before the crash" \
    "SELECT (SELECT count(*) FROM crash_client.stored WHERE phase = '$p' AND acked) > 0
        AND (SELECT count(*) FROM crash_client.tokens WHERE phase = '$p' AND NOT after_crash) > 0"
  if [ "${2:-0}" = 1 ]; then
    check "$p: the 50,000-message store was running when its backend was killed, and failed" \
      "SELECT coalesce(sum(n) FILTER (WHERE name = 'big store running at the kill'), 0) = 1
          AND coalesce(sum(n) FILTER (WHERE name = 'big store raised an error'), 0) = 1
         FROM crash_client.events WHERE phase = '$p'"
    check "$p: the killed store left nothing (no dedup record, message or work row of its 50,000)" \
      "SELECT NOT EXISTS (SELECT FROM whizbang.wh_message_deduplication WHERE consumer = 'big')
          AND NOT EXISTS (SELECT FROM whizbang.wh_inbox WHERE consumer = 'big')
          AND NOT EXISTS (SELECT FROM whizbang.wh_inbox WHERE consumer = 'big')
          AND NOT EXISTS (SELECT FROM whizbang.wh_inbox_streams WHERE consumer = 'big')"
  fi
}

if [ "${1:-}" = "--in-cluster" ]; then
  wb_python
  check_eq "the cluster runs with fsync = on" "on" "$(q 'SHOW fsync')"
  q "CREATE EXTENSION whizbang" >/dev/null
  "$PY" test/scripts/crash_recovery.py setup
  # Phases sort by name ('immediate' < 'kill' would not): the token check compares with
  # earlier ones, so they are numbered.
  for phase in 1-kill 2-immediate; do
    start=$(date +%s%3N)
    echo "== phase $phase"
    "$PY" test/scripts/crash_recovery.py "${phase#*-}" "$phase"
    checks_after "$phase" "$([ "$phase" = 1-kill ] && echo 1 || echo 0)"
    echo "   phase $phase took $(($(date +%s%3N) - start)) ms"
  done
  echo "== drain"
  "$PY" test/scripts/crash_recovery.py drain 3-drain
  check "drain: every acknowledged store was completed or dead-lettered (or its completion is in doubt)" \
    "SELECT count(*) = 0 FROM crash_client.stored s WHERE s.acked
       AND NOT EXISTS (SELECT FROM crash_client.completed c WHERE c.id = s.id)
       AND NOT EXISTS (SELECT FROM whizbang.wh_dead_letters d WHERE d.message_id = s.id)"
  check "drain: no work is left" \
    "SELECT NOT EXISTS (SELECT FROM whizbang.wh_inbox) AND NOT EXISTS (SELECT FROM whizbang.wh_outbox)"
  check "drain: no completed message was handed out again, none completed twice, every claim completed" \
    "SELECT coalesce(sum(n), 0) = 0 FROM crash_client.events
      WHERE phase = '3-drain' AND (name IN ('completed message handed out again', 'completed twice')
                                   OR name LIKE 'fresh claim not %')"
  exit "$FAILED"
fi

start=$(date +%s)
status=0
durability=(-o fsync=on -o synchronous_commit=on -o full_page_writes=on)
[ "${CRASH_SABOTAGE:-}" = async ] && durability+=(-o synchronous_commit=off -o wal_writer_delay=10000)
pg_virtualenv -t -c "-p $(wb_free_port)" "${durability[@]}" timeout -k 5 150 bash "$self" --in-cluster || status=$?
echo "crash_recovery took $(($(date +%s) - start)) s"
[ "$status" -eq 0 ] && echo "all checks passed" || echo "crash_recovery: FAIL ($status failed checks or an error)"
exit "$status"
