#!/usr/bin/env bash
# The native dedup insertion writes no XLOG_HEAP_CONFIRM (issue 31): new ids are inserted as
# ordinary tuples in a subtransaction of the batch (src/pg/store/dedup_store.cpp, "plain
# insertion"), not speculatively, which cost a 48-byte CONFIRM record per new id. Reads the WAL
# of each case with pg_waldump and asserts, in a cluster of the installed whizbang:
# (pg_waldump names the record CONFIRM up to 17, HEAP_CONFIRM from 18.)
#   - 10 batches of 100 new ids, each its own transaction, into the dedup generations (the
#     default table) and into the single table (0.11.0's, as Citus keeps it): no CONFIRM, every
#     id new;
#   - a batch whose first id is new and half of whose ids are on record (the plain insertion
#     meets a record, rolls its subtransaction back, the batch is recorded again the
#     speculative way): the same answers as ever, each delivery counted once;
#   - one transaction of 70 batches: the first 63 plain, the rest speculative (a transaction's
#     64th subtransaction would overflow its subxid cache in PGPROC): 700 CONFIRMs, every id new.
set -euo pipefail
cd "$(dirname "$0")/../.."
work=$(mktemp -d /tmp/whizbang-dedup-wal.XXXXXX)
chmod 755 "$work"
cat >"$work/check.sh" <<'SH'
set -euo pipefail
work=$1
q() { psql -qAtX -v ON_ERROR_STOP=1 "$@"; }
bindir=$(q -c "SELECT setting FROM pg_catalog.pg_config WHERE name = 'BINDIR'")
datadir=$(q -c "SHOW data_directory")
fail=0
# confirms <label> <sql file>: runs the file, prints the CONFIRM records its WAL holds.
confirms() {
  local start end
  start=$(q -c "SELECT pg_catalog.pg_current_wal_insert_lsn()")
  q -f "$2" >"$work/$1.out"
  end=$(q -c "SELECT pg_catalog.pg_current_wal_insert_lsn()")
  "$bindir/pg_waldump" -p "$datadir/pg_wal" -s "$start" -e "$end" >"$work/$1.wal" 2>/dev/null || true
  grep -cE 'desc: (HEAP_)?CONFIRM' "$work/$1.wal" || true
}
expect() {  # label got want
  if [ "$2" = "$3" ]; then echo "ok: $1 ($2)"; else echo "FAILED: $1: got $2, want $3"; fail=1; fi
}
batches() {  # consumer, first batch, last batch, in one transaction (1) or each its own (0)
  [ "$4" = 1 ] && echo "BEGIN;"
  for b in $(seq "$2" "$3"); do
    echo "INSERT INTO outcomes SELECT outcome FROM whizbang.dedup_insert_many((SELECT pg_catalog.array_agg(pg_catalog.md5('$1' || ($b * 1000 + g))::uuid ORDER BY g) FROM generate_series(1, 100) g), '$1');"
  done
  [ "$4" = 1 ] && echo "COMMIT;"
  return 0
}
for db in generations single; do
  q -d postgres -c "CREATE DATABASE $db"
  export PGDATABASE=$db
  if [ $db = single ]; then
    q -c "CREATE EXTENSION whizbang VERSION '0.11.0'"
  else
    q -c "CREATE EXTENSION whizbang"
  fi
  q -c "CREATE TABLE outcomes (outcome text)"
  echo "== $db: $(q -c "SELECT relkind FROM pg_catalog.pg_class WHERE oid = 'whizbang.wh_message_deduplication'::regclass") (p: generations, r: single table)"
  q -c "CHECKPOINT"

  batches new 1 10 0 >"$work/$db-new.sql"
  expect "$db: CONFIRM records of 1,000 new ids in 10 batches" "$(confirms $db-new "$work/$db-new.sql")" 0
  expect "$db: new ids" "$(q -c "SELECT count(*) FILTER (WHERE outcome = 'new') || '/' || count(*) FROM outcomes")" 1000/1000

  # Half of batch 11's ids are batch 1's (the odd ones), its first id is new.
  q -c "TRUNCATE outcomes"
  cat >"$work/$db-mixed.sql" <<SQL
INSERT INTO outcomes SELECT outcome FROM whizbang.dedup_insert_many((SELECT pg_catalog.array_agg(
  pg_catalog.md5('new' || CASE WHEN g % 2 = 1 THEN 1000 + g ELSE 11000 + g END)::uuid ORDER BY g) FROM generate_series(0, 99) g), 'new');
SQL
  confirms $db-mixed "$work/$db-mixed.sql" >/dev/null
  expect "$db: a half-redelivered batch" "$(q -c "SELECT count(*) FILTER (WHERE outcome = 'new') || ' new, ' || count(*) FILTER (WHERE outcome = 'duplicate') || ' duplicate' FROM outcomes")" "50 new, 50 duplicate"
  expect "$db: observations of the redelivered ids" "$(q -c "SELECT sum(observation_count) FROM whizbang.wh_message_deduplication WHERE consumer = 'new' AND message_id IN (SELECT pg_catalog.md5('new' || (1000 + g))::uuid FROM generate_series(1, 99, 2) g)")" 100

  q -c "TRUNCATE outcomes"
  batches txn 1 70 1 >"$work/$db-txn.sql"
  expect "$db: CONFIRM records of 70 batches in one transaction (batches 64-70 speculative)" "$(confirms $db-txn "$work/$db-txn.sql")" 700
  expect "$db: new ids" "$(q -c "SELECT count(*) FILTER (WHERE outcome = 'new') || '/' || count(*) FROM outcomes")" 7000/7000
done
exit $fail
SH
source scripts/lib.sh  # wb_free_port
pg_virtualenv -t -c "-p $(wb_free_port)" -o fsync=off -o full_page_writes=off bash "$work/check.sh" "$work"
rm -rf "$work"
