#!/usr/bin/env bash
# whizbang-relay with the NDJSON sink (issue 32, DESIGN §3.10, docs/relay.md), in a throw-away
# cluster with wal_level = logical and an empty publication whizbang_outbox. The relay of this
# tree (build/relay/whizbang-relay; built when missing) reads a pgoutput slot; messages are
# emitted with pg_logical_emit_message(true, 'whizbang.outbox', …), as
# whizbang.emit_outbox_messages emits them (the extension is not needed here). Checked:
#   a. only committed whizbang.outbox messages arrive, in commit order across two interleaved
#      transactions; rolled-back, non-transactional and other-prefix messages never do; the
#      slot is confirmed up to the end of the WAL once the relay caught up;
#   b. the slot's confirmed_flush_lsn does not pass a transaction whose messages are not in the
#      output yet: ndjson:- into a pipe nobody reads, so the relay hangs in write() with a large
#      transaction; it keeps reporting its (unchanged) position meanwhile, so the server does
#      not cut it off (wal_sender_timeout 3 s); once the pipe is read the transaction is there,
#      once, and confirmed;
#   c. kill -9 of the relay in the middle of a stream of transactions, then a new relay: every
#      committed message is in the file, each line whole JSON, the messages of each run in
#      commit order, and the only repeats are the first run's tail, sent again from the start of
#      the second run (at-least-once; receivers deduplicate by MessageId); a torn last line (as
#      a kill in the middle of a write leaves it) is removed by the next relay;
#   d. the server restarted (stop -m immediate) while the relay runs and messages are emitted:
#      the relay connects again and nothing committed is lost;
#   e. refusals with a message and an exit status: a two_phase slot (4), a missing slot (4), a
#      missing publication (4), a slot of another plugin (4), an unknown sink (6), a message
#      under whizbang.outbox that is no outbox message (7, after the one before it was
#      delivered and confirmed);
#   f. a sink failing with ENOSPC (/dev/full): the relay keeps running, starts over after a
#      pause, and the slot is not confirmed past the transaction it could not write;
#   g. a slot invalidated by max_slot_wal_keep_size: a relay started on it exits 5 saying that
#      messages are LOST, and so does a relay that was streaming from it when it was lost.
# Exits non-zero when a check failed.
set -euo pipefail

self=$(readlink -f "$0")
cd "$(dirname "$self")/../.."
source scripts/lib.sh  # wb_free_port, wb_pg_config

RELAY=${WB_RELAY:-$PWD/build/relay/whizbang-relay}

if [ "${1:-}" != "--in-cluster" ]; then
  if [ ! -x "$RELAY" ]; then
    make -s build/relay/whizbang-relay PG_CONFIG="$(wb_pg_config)" >/dev/null
  fi
  exec pg_virtualenv -t -c "-p $(wb_free_port)" -o wal_level=logical -o max_replication_slots=10 \
    -o max_wal_senders=10 bash "$self" --in-cluster
fi

# ----------------------------------------------------------------------------------------
# Inside the cluster (PG* variables point at it)
# ----------------------------------------------------------------------------------------
source test/lib/checks.sh  # check, check_eq, FAILED, stop_pids_and_remove

work=$(mktemp -d /tmp/whizbang-relay-ndjson.XXXXXX)
chmod 777 "$work"  # the server (user postgres) writes its log here in d.
pids=()
trap 'stop_pids_and_remove "$work"' EXIT

q() { psql -qXtA -v ON_ERROR_STOP=1 -c "$1"; }
# wait_for SECONDS "SQL returning true": polls every 0.1 s; returns 1 on timeout (a deadline
# for a hang, not a measured time: every check after it asserts what happened, not when).
wait_for() {
  local deadline=$((SECONDS + $1))
  while [ "$(q "$2" 2>/dev/null || true)" != "t" ]; do
    [ $SECONDS -ge $deadline ] && return 1
    sleep 0.1
  done
}
# The relay of slot $1 caught up: the slot is confirmed up to the WAL flushed now.
caught_up() {
  local lsn
  lsn=$(q "SELECT pg_current_wal_flush_lsn()")
  wait_for 60 "SELECT confirmed_flush_lsn >= '$lsn' FROM pg_replication_slots WHERE slot_name = '$1'"
}
# The tags of an output file, in order, one line (the Envelope's "tag").
tags() { sed -E 's/.*"tag": "([^"]*)".*/\1/' "$1" | tr '\n' ' ' | sed 's/ $//'; }
# Starts the relay on slot $1 writing to file $2 (log in $2.log); its pid in RELAY_PID.
start_relay() {
  "$RELAY" --slot "$1" --sink "ndjson:$2" --status-interval 1 2>>"$2.log" &
  RELAY_PID=$!
  pids+=("$RELAY_PID")
}

q "CREATE PUBLICATION whizbang_outbox" >/dev/null
# emit(tag[, transactional[, prefix]]): one message as whizbang.emit_outbox_messages emits it,
# MessageId derived from the tag.
q "CREATE FUNCTION emit(tag text, transactional boolean DEFAULT true, prefix text DEFAULT 'whizbang.outbox')
   RETURNS pg_lsn LANGUAGE sql AS \$\$
     SELECT pg_logical_emit_message(transactional, prefix, jsonb_build_object(
       'MessageId', md5(tag)::uuid, 'Destination', 'orders', 'MessageType', 'OrderPlaced',
       'StreamId', NULL, 'IsEvent', false, 'Scope', NULL, 'Metadata', NULL,
       'Envelope', jsonb_build_object('tag', tag), 'CreatedAt', '2026-12-07T10:00:00.123456+00:00')::text)
   \$\$" >/dev/null

echo "--- a. committed messages only, in commit order"
q "SELECT 1 FROM pg_create_logical_replication_slot('sa', 'pgoutput')" >/dev/null
start_relay sa "$work/a.ndjson"
# Two sessions interleaved through a coprocess psql: s1 emits a1, s2 emits and commits b1 b2,
# s1 emits a2 and commits; then a rollback, non-transactional and other-prefix messages.
coproc S1 { psql -qXtA -v ON_ERROR_STOP=1; }
s1() { echo "$1" >&"${S1[1]}"; echo "SELECT 'done';" >&"${S1[1]}"; local line; read -r line <&"${S1[0]}"; [ "$line" = done ] || echo "s1: $line"; }
s1 "BEGIN; SELECT emit('a1') \\g /dev/null"
q "BEGIN; SELECT emit('b1'); SELECT emit('b2'); COMMIT" >/dev/null
s1 "SELECT emit('a2') \\g /dev/null"
q "BEGIN; SELECT emit('r1'); SELECT emit('nt1', false); ROLLBACK" >/dev/null
s1 "COMMIT;"
q "SELECT emit('nt2', false)" >/dev/null
q "BEGIN; SELECT emit('other1', true, 'other.prefix'); SELECT emit('other2', true, 'whizbang.outbox.other'); COMMIT" >/dev/null
q "BEGIN; SELECT emit('c1'); SELECT emit('other3', true, 'other'); SELECT emit('c2'); COMMIT" >/dev/null
echo "SELECT 'done';" >&"${S1[1]}"; exec {S1[1]}>&-
if caught_up sa; then echo "ok   the relay confirmed slot sa up to the end of the WAL"; else echo "FAIL slot sa was not confirmed up to the end of the WAL"; FAILED=$((FAILED + 1)); fi
check_eq "only committed whizbang.outbox messages, in commit order" "b1 b2 a1 a2 c1 c2" "$(tags "$work/a.ndjson")"
check_eq "each line is the emitted object (MessageId of b1)" \
  "$(q "SELECT md5('b1')::uuid")" "$(head -n 1 "$work/a.ndjson" | sed -E 's/.*"MessageId": "([^"]*)".*/\1/')"
kill -TERM "$RELAY_PID"; rc=0; wait "$RELAY_PID" || rc=$?
check_eq "SIGTERM stops the relay with exit status 0" 0 "$rc"
q "SELECT pg_drop_replication_slot('sa')" >/dev/null

echo "--- b. the slot is not confirmed past a transaction that is not in the output"
q "SELECT 1 FROM pg_create_logical_replication_slot('sb', 'pgoutput')" >/dev/null
# A short wal_sender_timeout: the relay must keep reporting while its sink hangs, or the server
# cuts it off and it gets the transaction again.
q "ALTER SYSTEM SET wal_sender_timeout = '3s'" >/dev/null
q "SELECT pg_reload_conf()" >/dev/null
mkfifo "$work/pipe"
exec 4<>"$work/pipe"  # a reader that reads nothing yet: writes block once the pipe is full
"$RELAY" --slot sb --sink ndjson:- --status-interval 1 >"$work/pipe" 2>"$work/b.log" &
RELAY_PID=$!
pids+=("$RELAY_PID")
q "SELECT emit('small')" >/dev/null
caught_up sb || { echo "FAIL slot sb did not catch up with one small transaction"; FAILED=$((FAILED + 1)); }
before=$(q "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = 'sb'")
# 2000 messages of about 300 bytes: far more than a pipe holds (64 kB).
q "BEGIN; SELECT count(emit('big' || i)) FROM generate_series(1, 2000) i; COMMIT" >/dev/null
big_end=$(q "SELECT pg_current_wal_flush_lsn()")
q "SELECT emit('after')" >/dev/null
# Until the relay hangs in write(): it has the whole transaction and cannot hand it over.
deadline=$((SECONDS + 60))
# (A thread of it waits in the kernel's pipe_write, or anon_pipe_write in newer kernels.)
blocked() { grep -qs 'pipe_write$' "/proc/$RELAY_PID"/task/*/wchan; }
until blocked || [ $SECONDS -ge $deadline ]; do sleep 0.1; done
check_eq "the relay hangs writing the large transaction into the full pipe" yes "$(blocked && echo yes || echo no)"
# Longer than wal_sender_timeout and four status intervals: a relay that confirmed too early
# would have reported it by now, and one that stops reporting while its sink hangs would have
# been cut off (a correct relay passes whatever the wait; it only gives a wrong one the time
# to show itself).
sleep 4
check "while its messages are not out, the slot stays before the large transaction's end" \
  "SELECT confirmed_flush_lsn < '$big_end' AND confirmed_flush_lsn >= '$before' FROM pg_replication_slots WHERE slot_name = 'sb'"
cat <&4 >"$work/b.ndjson" &
reader=$!
pids+=("$reader")
caught_up sb || { echo "FAIL slot sb did not catch up after the pipe was read"; FAILED=$((FAILED + 1)); }
got=$(tags "$work/b.ndjson" | tr ' ' '\n')
check_eq "once read: small, the 2000 messages of the large transaction in emission order, after, each once" \
  "2002 lines, 2002 distinct, in order" \
  "$(wc -l <<<"$got") lines, $(sort -u <<<"$got" | wc -l) distinct, $(
    [ "$got" = "$(printf 'small\n%s\nafter' "$(seq -f 'big%g' 1 2000)")" ] && echo in order || echo out of order)"
check_eq "the relay kept its connection while the sink hung (status updates went on)" no \
  "$(grep -q 'connecting again' "$work/b.log" && echo yes || echo no)"
kill -TERM "$RELAY_PID"; wait "$RELAY_PID" || true
kill "$reader" 2>/dev/null || true; wait "$reader" 2>/dev/null || true
q "ALTER SYSTEM RESET wal_sender_timeout" >/dev/null
q "SELECT pg_reload_conf()" >/dev/null
exec 4<&-
q "SELECT pg_drop_replication_slot('sb')" >/dev/null

echo "--- c. kill -9 in the middle of a stream, then a new relay"
q "SELECT 1 FROM pg_create_logical_replication_slot('sc', 'pgoutput')" >/dev/null
start_relay sc "$work/c.ndjson"
# 300 transactions of 3 messages, one after the other, with a pause between them.
psql -qXtA -v ON_ERROR_STOP=1 >/dev/null <<'SQL' &
SELECT format('BEGIN; SELECT emit(%L); SELECT emit(%L); SELECT emit(%L); COMMIT; SELECT pg_sleep(0.01);',
              'c' || i || '.1', 'c' || i || '.2', 'c' || i || '.3') FROM generate_series(1, 300) i
\gexec
SQL
load=$!
pids+=("$load")
deadline=$((SECONDS + 60))
until [ "$(wc -l 2>/dev/null <"$work/c.ndjson" || echo 0)" -ge 300 ] || [ $SECONDS -ge $deadline ]; do sleep 0.05; done
kill -KILL "$RELAY_PID"; wait "$RELAY_PID" 2>/dev/null || true
first_run=$(wc -l <"$work/c.ndjson")
load_running=no; kill -0 "$load" 2>/dev/null && load_running=yes
echo "   killed the relay after $first_run lines (load still running: $load_running)"
# What a write cut short by the kill would leave (whether this kill left one is chance): the
# next relay removes the piece before it appends.
printf '{"MessageId": "0190a1b2-c3d4-7e5f-8a9b-0000000000' >>"$work/c.ndjson"
start_relay sc "$work/c.ndjson"
wait "$load"
caught_up sc || { echo "FAIL slot sc did not catch up after the restart"; FAILED=$((FAILED + 1)); }
kill -TERM "$RELAY_PID"; wait "$RELAY_PID" || true
python3 - "$work/c.ndjson" "$first_run" <<'PY' || FAILED=$((FAILED + 1))
import json, sys
lines = open(sys.argv[1], encoding="utf-8").read().split("\n")
ok = lines[-1] == ""  # the file ends with a newline: no torn line
lines = lines[:-1]
try:
    tags = [json.loads(l)["Envelope"]["tag"] for l in lines]
except Exception as e:
    print("FAIL every line of the file is one JSON object (%s)" % e); sys.exit(1)
print("ok   every line of the file is one JSON object" if ok else "FAIL the file ends in a torn line")
k = int(sys.argv[2])
key = lambda t: tuple(int(x) for x in t[1:].split("."))
run1, run2 = tags[:k], tags[k:]
expected = ["c%d.%d" % (i, j) for i in range(1, 301) for j in range(1, 4)]
bad = 0 if ok else 1
def check(what, cond, detail=""):
    global bad
    print(("ok   " if cond else "FAIL ") + what + ("" if cond else " " + detail))
    bad += 0 if cond else 1
check("every committed message is in the file", set(tags) == set(expected), str(sorted(set(expected) - set(tags), key=key)[:5]))
check("each run in commit order", run1 == sorted(run1, key=key) and run2 == sorted(run2, key=key))
dups = [t for t in run2 if t in set(run1)]
check("repeats are only the first run's tail, sent again first by the second run",
      dups == run1[len(run1) - len(dups):] and run2[:len(dups)] == dups, "%d repeats" % len(dups))
check("no message more than twice", max(tags.count(t) for t in set(tags)) <= 2)
print("   %d lines: %d in the first run, %d in the second, %d repeated" % (len(tags), len(run1), len(run2), len(dups)))
sys.exit(1 if bad else 0)
PY
check_eq "the new relay removed the torn last line and said so" yes \
  "$(grep -q 'removed a torn last line' "$work/c.ndjson.log" && echo yes || echo no)"
q "SELECT pg_drop_replication_slot('sc')" >/dev/null

echo "--- d. the server restarts while the relay runs"
q "SELECT 1 FROM pg_create_logical_replication_slot('sd', 'pgoutput')" >/dev/null
start_relay sd "$work/d.ndjson"
q "BEGIN; SELECT count(emit('d1.' || i)) FROM generate_series(1, 50) i; COMMIT" >/dev/null
datadir=$(q "SHOW data_directory")
# pg_ctl restart starts the server again with the options it was started with
# (postmaster.opts), which name the cluster's configuration of pg_virtualenv. As the server's
# owner: pg_ctl refuses root.
as_owner=()
[ "$(id -u)" -eq 0 ] && as_owner=(runuser -u "$(stat -c %U "$datadir")" --)
# The server's own pg_ctl: the one beside its postmaster (also for a major of the matrix).
pgctl=$(dirname "$(readlink -f "/proc/$(head -n 1 "$datadir/postmaster.pid")/exe")")/pg_ctl
"${as_owner[@]}" "$pgctl" -D "$datadir" restart -m immediate -w \
  -l "$work/server-restart.log" >/dev/null
q "BEGIN; SELECT count(emit('d2.' || i)) FROM generate_series(1, 50) i; COMMIT" >/dev/null
caught_up sd || { echo "FAIL slot sd did not catch up after the server's restart"; FAILED=$((FAILED + 1)); }
check_eq "the relay is still running" yes "$(kill -0 "$RELAY_PID" 2>/dev/null && echo yes || echo no)"
check_eq "it connected again" yes "$(grep -q 'connecting again' "$work/d.ndjson.log" && echo yes || echo no)"
check_eq "every message from before and after the restart is there" \
  "$(for i in $(seq 1 50); do echo "d1.$i"; done; for i in $(seq 1 50); do echo "d2.$i"; done)" \
  "$(tags "$work/d.ndjson" | tr ' ' '\n' | awk '!seen[$0]++')"
kill -TERM "$RELAY_PID"; wait "$RELAY_PID" || true
q "SELECT pg_drop_replication_slot('sd')" >/dev/null

echo "--- e. refusals"
# refused NAME STATUS TEXT ARGS...: the relay exits with STATUS and its message has TEXT.
refused() {
  local name=$1 status=$2 text=$3 rc=0
  shift 3
  "$RELAY" "$@" --status-interval 1 >/dev/null 2>"$work/refused.log" || rc=$?
  if [ "$rc" = "$status" ] && grep -q -- "$text" "$work/refused.log"; then
    echo "ok   $name: exit $rc, $(grep -v ' LOG: ' "$work/refused.log" | head -n 1 | sed 's/.*FATAL: //' | cut -c1-110)"
  else
    echo "FAIL $name: exit $rc (expected $status), log: $(cat "$work/refused.log")"; FAILED=$((FAILED + 1))
  fi
}
q "SELECT 1 FROM pg_create_logical_replication_slot('s2', 'pgoutput', false, true)" >/dev/null
refused "a two_phase slot" 4 "two_phase" --slot s2 --sink "ndjson:$work/e.ndjson"
refused "a missing slot" 4 'replication slot "nope" does not exist' --slot nope --sink "ndjson:$work/e.ndjson"
q "SELECT 1 FROM pg_create_logical_replication_slot('se', 'pgoutput')" >/dev/null
refused "a missing publication" 4 'publication "nopub" does not exist' --slot se --publication nopub --sink "ndjson:$work/e.ndjson"
# test_decoding is contrib: Debian ships it, a build of the matrix may not have it.
if q "SELECT 1 FROM pg_create_logical_replication_slot('st', 'test_decoding')" >/dev/null 2>&1; then
  refused "a slot of another plugin" 4 "uses plugin test_decoding" --slot st --sink "ndjson:$work/e.ndjson"
else
  echo "skip a slot of another plugin (this server has no test_decoding)"
fi
refused "an unknown sink" 6 "unknown sink" --slot se --sink "kafka://x"
refused "a missing option" 2 "sink is required" --slot se
check_eq "nothing was written by a refused relay" no "$([ -s "$work/e.ndjson" ] && echo yes || echo no)"
# A message under whizbang's prefix that is no outbox message: the relay stops before it (7),
# having delivered and confirmed the transaction before it.
q "SELECT 1 FROM pg_create_logical_replication_slot('sx', 'pgoutput')" >/dev/null
q "SELECT emit('x1')" >/dev/null
x1_end=$(q "SELECT pg_current_wal_flush_lsn()")
q "SELECT pg_logical_emit_message(true, 'whizbang.outbox', '{\"Destination\": \"d\", \"MessageType\": \"t\"}')" >/dev/null
refused "a malformed outbox message" 7 "has no MessageId.*pg_replication_slot_advance" --slot sx --sink "ndjson:$work/x.ndjson"
check_eq "the message before it was delivered" x1 "$(tags "$work/x.ndjson")"
check "and its transaction confirmed, the malformed one not" \
  "SELECT confirmed_flush_lsn >= '$x1_end' AND confirmed_flush_lsn < pg_current_wal_flush_lsn() FROM pg_replication_slots WHERE slot_name = 'sx'"
# The way on the message names: the slot advanced past the bad transaction, a relay goes on.
advance=$(grep -o "SELECT pg_replication_slot_advance([^)]*)" "$work/refused.log")
q "$advance" >/dev/null
q "SELECT emit('x2')" >/dev/null
start_relay sx "$work/x.ndjson"
caught_up sx || { echo "FAIL slot sx did not catch up after it was advanced"; FAILED=$((FAILED + 1)); }
kill -TERM "$RELAY_PID"; wait "$RELAY_PID" || true
check_eq "after '$advance' a relay goes on with the next message" "x1 x2" "$(tags "$work/x.ndjson")"
q "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name IN ('s2', 'se', 'st', 'sx')" >/dev/null

echo "--- f. a sink that fails for a while"
# /dev/full answers every write with ENOSPC, as a full disk does: a transient error. The relay
# keeps running, starts over from the slot's position after a pause, and never confirms the
# transaction it could not write.
q "SELECT 1 FROM pg_create_logical_replication_slot('sg', 'pgoutput')" >/dev/null
before=$(q "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = 'sg'")
q "SELECT emit('g1')" >/dev/null
g1_end=$(q "SELECT pg_current_wal_flush_lsn()")
"$RELAY" --slot sg --sink ndjson:/dev/full --status-interval 1 2>"$work/g.log" &
RELAY_PID=$!
pids+=("$RELAY_PID")
deadline=$((SECONDS + 60))
until [ "$(grep -c 'No space left on device; starting over' "$work/g.log")" -ge 2 ] || [ $SECONDS -ge $deadline ]; do sleep 0.1; done
check_eq "the write failed at least twice, each time followed by a new attempt" yes \
  "$([ "$(grep -c 'No space left on device; starting over' "$work/g.log")" -ge 2 ] && echo yes || echo no)"
check_eq "the relay is still running" yes "$(kill -0 "$RELAY_PID" 2>/dev/null && echo yes || echo no)"
check "the slot stays before the transaction that could not be written" \
  "SELECT confirmed_flush_lsn < '$g1_end' AND confirmed_flush_lsn >= '$before' FROM pg_replication_slots WHERE slot_name = 'sg'"
kill -TERM "$RELAY_PID"; wait "$RELAY_PID" || true
q "SELECT pg_drop_replication_slot('sg')" >/dev/null

echo "--- g. an invalidated slot"
q "SELECT 1 FROM pg_create_logical_replication_slot('sl', 'pgoutput')" >/dev/null
q "SELECT 1 FROM pg_create_logical_replication_slot('sm', 'pgoutput')" >/dev/null
start_relay sm "$work/f.ndjson"
q "SELECT emit('f1')" >/dev/null
caught_up sm || { echo "FAIL slot sm did not catch up"; FAILED=$((FAILED + 1)); }
kill -STOP "$RELAY_PID"  # the relay stalls: its slot stays where it was
q "ALTER SYSTEM SET max_slot_wal_keep_size = '1MB'" >/dev/null
q "SELECT pg_reload_conf()" >/dev/null
q "CREATE TABLE filler (x text)" >/dev/null
for _ in 1 2 3 4 5; do
  q "INSERT INTO filler SELECT repeat('x', 1000) FROM generate_series(1, 2000)" >/dev/null
  q "SELECT pg_switch_wal()" >/dev/null
  q "CHECKPOINT" >/dev/null
  [ "$(q "SELECT count(*) FROM pg_replication_slots WHERE slot_name IN ('sl', 'sm') AND wal_status = 'lost'")" = 2 ] && break
done
check "both slots were invalidated (wal_status lost)" \
  "SELECT count(*) = 2 FROM pg_replication_slots WHERE slot_name IN ('sl', 'sm') AND wal_status = 'lost'"
refused "a relay started on the invalidated slot" 5 "LOST" --slot sl --sink "ndjson:$work/f2.ndjson"
kill -CONT "$RELAY_PID"
rc=0; wait "$RELAY_PID" || rc=$?
check_eq "the relay that streamed from the slot when it was lost exits 5" 5 "$rc"
check_eq "and says that messages are lost" yes "$(grep -q 'FATAL.*LOST' "$work/f.ndjson.log" && echo yes || echo no)"
q "ALTER SYSTEM RESET max_slot_wal_keep_size" >/dev/null
q "SELECT pg_reload_conf()" >/dev/null

if [ "$FAILED" -gt 0 ]; then
  echo "relay logs:"; tail -n 20 "$work"/*.log
  echo "$FAILED check(s) failed"
  exit 1
fi
echo "all relay checks passed"
