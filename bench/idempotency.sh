#!/usr/bin/env bash
# Handler idempotency benchmark: begin + complete of one new key per transaction, 2 clients,
# whizbang (native) against the PL/pgSQL reference of the same contract (idempotency_reference.sql),
# in one run on one throw-away cluster. Keys are made by pgbench from a random number, so no
# payload is generated on the server. Prints keys/s and the ratio.
#   BENCH_FSYNC=on BENCH_SYNC_COMMIT=on BENCH_SHARED_BUFFERS=256MB BENCH_SECONDS=10 BENCH_CONNS=2
set -euo pipefail
BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
: "${BENCH_FSYNC:=on}" "${BENCH_SYNC_COMMIT:=on}" "${BENCH_SHARED_BUFFERS:=256MB}" "${BENCH_SECONDS:=10}" "${BENCH_CONNS:=2}"
export BENCH_DIR BENCH_SECONDS BENCH_CONNS
if [ "${1:-}" != inside ]; then
  source "$BENCH_DIR/../scripts/lib.sh"
  wb_setup
  exec pg_virtualenv -t -o fsync="$BENCH_FSYNC" -o synchronous_commit="$BENCH_SYNC_COMMIT" \
    -o shared_buffers="$BENCH_SHARED_BUFFERS" bash "$BENCH_DIR/idempotency.sh" inside
fi

work=$(mktemp -d)
psql -qX -v ON_ERROR_STOP=1 -c "CREATE EXTENSION whizbang" -f "$BENCH_DIR/idempotency_reference.sql" >/dev/null
cat >"$work/native.sql" <<'SQL'
\set k random(1, 9000000000000)
BEGIN;
SELECT whizbang.idempotency_complete('bench', 'key-' || :k, token, '{"status": 201, "id": 42}')
  FROM whizbang.idempotency_begin('bench', 'key-' || :k) WHERE outcome = 'claimed';
COMMIT;
SQL
cat >"$work/plpgsql.sql" <<'SQL'
\set k random(1, 9000000000000)
BEGIN;
SELECT bench.plpgsql_complete('bench', 'key-' || :k, token, '{"status": 201, "id": 42}')
  FROM bench.plpgsql_begin('bench', 'key-' || :k) WHERE outcome = 'claimed';
COMMIT;
SQL
run() { pgbench -n -c "$BENCH_CONNS" -j "$BENCH_CONNS" -T "$BENCH_SECONDS" -f "$work/$1.sql" 2>&1 | sed -nE 's/^tps = ([0-9.]+) .*/\1/p'; }
settings=$(psql -AtX -c "SELECT string_agg(name || '=' || setting, ' ' ORDER BY name) FROM pg_settings WHERE name IN ('fsync','synchronous_commit','shared_buffers')")
echo "server: PostgreSQL $(psql -AtX -c 'SHOW server_version'), $settings; $BENCH_CONNS clients, ${BENCH_SECONDS}s per run"
declare -A best
for round in 1 2 3; do
  for m in native plpgsql; do
    t=$(run "$m")
    echo "round $round $m: $t keys/s"
    if [ -z "${best[$m]:-}" ] || awk -v a="$t" -v b="${best[$m]}" 'BEGIN{exit !(a>b)}'; then best[$m]=$t; fi
  done
done
ratio=$(awk -v a="${best[native]}" -v b="${best[plpgsql]}" 'BEGIN{printf "%.2f", a/b}')
echo "best of 3: native ${best[native]} keys/s, PL/pgSQL ${best[plpgsql]} keys/s, ratio ${ratio}x"
rm -rf "$work"
