#!/usr/bin/env bash
# contrib/prometheus/whizbang_queries.yaml with Debian's prometheus-postgres-exporter. In a
# throw-away cluster it stores known work (inbox: 3 messages for consumer billing, one of them
# claimed, 1 for consumer audit, dead-lettered; outbox: 2 messages), creates a login role with
# only the monitoring grants of docs/operations.md, starts the exporter as a non-root user on a
# free localhost port with the query file, fetches /metrics and checks:
#   - whizbang_stats_value{metric=...} for every stats() metric, with the known values;
#   - whizbang_queues_*{source=...,consumer=...} per consumer (when whizbang.queues exists);
#   - no scrape error (pg_exporter_last_scrape_error 0, pg_up 1).
# Bounded in time (the exporter gets 30 s to answer); the exporter is stopped at the end.
# Needs prometheus-postgres-exporter (scripts/lib.sh installs it); without it: SKIP, exit 0.
set -euo pipefail
cd "$(dirname "$0")/../.."

EXPORTER=/usr/bin/prometheus-postgres-exporter
if [ "${1:-}" != "--in-cluster" ]; then
  source scripts/lib.sh  # wb_free_port, wb_as_root
  if [ ! -x "$EXPORTER" ]; then
    echo "prometheus-postgres-exporter missing: trying the Debian package"
    { wb_as_root apt-get update -qq &&
      wb_as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus-postgres-exporter; } \
      >/dev/null 2>&1 || true
  fi
  if [ ! -x "$EXPORTER" ]; then
    echo "SKIP prometheus_exporter: prometheus-postgres-exporter is missing and could not be installed"
    exit 0
  fi
  status=0
  # With the preload: the throughput counters (whizbang.counters) are kept in shared memory.
  WB_EXPORTER_PORT=$(wb_free_port) pg_virtualenv -t -c "-p $(wb_free_port)" -o fsync=off -o shared_preload_libraries=whizbang \
    bash -c "bash '$PWD/test/scripts/prometheus_exporter.sh' --in-cluster" || status=$?
  exit "$status"
fi

# ----------------------------------------------------------------------------------------
# Inside the cluster (PG* variables point at it)
# ----------------------------------------------------------------------------------------
source test/lib/checks.sh  # check_eq, FAILED

work=$(mktemp -d /tmp/whizbang-exporter.XXXXXX)
chmod 755 "$work"
exporter_pid=""
cleanup() {
  if [ -n "$exporter_pid" ] && kill -0 "$exporter_pid" 2>/dev/null; then
    kill "$exporter_pid" 2>/dev/null || true
    wait "$exporter_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

psql -qX -v ON_ERROR_STOP=1 <<'SQL'
CREATE EXTENSION whizbang;
-- Inbox, consumer billing: 3 messages, the first claimed (leased); consumer audit: 1 message,
-- dead-lettered at once. Outbox: 2 messages.
SELECT count(*) FROM whizbang.store_inbox_messages((SELECT jsonb_agg(jsonb_build_object(
    'MessageId', 'e0000000-0000-7000-8000-00000000000' || i, 'HandlerName', 'h', 'MessageType', 't',
    'Envelope', '{}'::jsonb)) FROM generate_series(1, 3) i), p_consumer => 'billing') \g /dev/null
SELECT count(*) FROM whizbang.claim_work('00000000-0000-4000-8000-000000000001', 'inbox', 1, 600,
                                         p_consumer => 'billing') \g /dev/null
SELECT count(*) FROM whizbang.store_inbox_messages('[{"MessageId": "e0000000-0000-7000-8000-0000000000a1",
    "HandlerName": "h", "MessageType": "t", "Envelope": {}}]', p_consumer => 'audit') \g /dev/null
SELECT lease_token AS audit_token FROM whizbang.claim_work('00000000-0000-4000-8000-000000000002', 'inbox', 1, 600,
                                                           p_consumer => 'audit') \gset
SELECT outcome FROM whizbang.fail_work('inbox', '{e0000000-0000-7000-8000-0000000000a1}', '{boom}',
    ARRAY[:audit_token]::bigint[], '{false}', 'audit') \g /dev/null
SELECT count(*) FROM whizbang.store_outbox_messages((SELECT jsonb_agg(jsonb_build_object(
    'MessageId', 'e0000000-0000-7000-8000-0000000000b' || i, 'Destination', 'orders', 'MessageType', 't',
    'Envelope', '{}'::jsonb)) FROM generate_series(1, 2) i)) \g /dev/null

-- The exporter's role: the monitoring grants of docs/operations.md, and pg_monitor for the
-- exporter's own PostgreSQL metrics.
CREATE ROLE whizbang_exporter LOGIN PASSWORD 'exporter-test-password';
GRANT pg_monitor TO whizbang_exporter;
GRANT USAGE ON SCHEMA whizbang TO whizbang_exporter;
GRANT EXECUTE ON FUNCTION whizbang.stats() TO whizbang_exporter;
GRANT SELECT ON whizbang.stats TO whizbang_exporter;
GRANT SELECT ON whizbang.wh_inbox, whizbang.wh_outbox,
      whizbang.wh_dead_letters, whizbang.wh_message_deduplication, whizbang.wh_idempotency_keys
   TO whizbang_exporter;
SQL
# whizbang.queues arrives with 0.5.0 (issue 13 item 7): grant it, and check it, when it is there.
has_queues=$(psql -qXtA -c "SELECT to_regclass('whizbang.queues') IS NOT NULL")
has_counters=$(psql -qXtA -c "SELECT to_regclass('whizbang.counters') IS NOT NULL")
if [ "$has_counters" = t ]; then
  psql -qX -v ON_ERROR_STOP=1 -c "GRANT EXECUTE ON FUNCTION whizbang.counters(), whizbang._counters() TO whizbang_exporter;
                                  GRANT SELECT ON whizbang.counters TO whizbang_exporter"
fi
if [ "$has_queues" = t ]; then
  psql -qX -v ON_ERROR_STOP=1 -c "GRANT SELECT ON whizbang.queues TO whizbang_exporter" \
    -c "GRANT EXECUTE ON FUNCTION whizbang.queues TO whizbang_exporter" >/dev/null
  queries=contrib/prometheus/whizbang_queries.yaml
else
  echo "NOTE: this whizbang has no view whizbang.queues (before 0.5.0): its block is left out, and not checked"
  # The file without its whizbang_queues block (from that key to the end of the file).
  sed '/^whizbang_queues:/,$d' contrib/prometheus/whizbang_queries.yaml >"$work/queries.yaml"
  queries=$work/queries.yaml
fi
cp "$queries" "$work/whizbang_queries.yaml"   # readable by the exporter's user
chmod 644 "$work/whizbang_queries.yaml"

# The exporter, as a non-root user (Debian's package creates "prometheus"), on a free port.
port=${WB_EXPORTER_PORT:?}
as_user=()
if [ "$(id -u)" -eq 0 ]; then
  user=prometheus
  id "$user" >/dev/null 2>&1 || user=nobody
  as_user=(setpriv --reuid="$user" --regid="$(id -g "$user")" --clear-groups)
fi
# A clean environment, as under systemd: the exporter's Go driver (lib/pq) reads PG* variables
# too, and panics on PGSYSCONFDIR, which pg_virtualenv sets.
env -i PATH=/usr/bin:/bin \
  DATA_SOURCE_NAME="postgresql://whizbang_exporter:exporter-test-password@localhost:$PGPORT/$PGDATABASE?sslmode=disable" \
  "${as_user[@]}" "$EXPORTER" --web.listen-address="127.0.0.1:$port" \
  --extend.query-path="$work/whizbang_queries.yaml" >"$work/exporter.log" 2>&1 &
exporter_pid=$!

# Fetch /metrics until the whizbang metrics are there (30 s at most).
for _ in $(seq 60); do
  if curl -fsS --max-time 5 "http://127.0.0.1:$port/metrics" >"$work/metrics" 2>/dev/null &&
     grep -q '^whizbang_stats_value' "$work/metrics"; then
    break
  fi
  kill -0 "$exporter_pid" 2>/dev/null || break
  sleep 0.5
done

# "name{label=...,...}" -> value, without the exporter's "server" label, labels sorted.
metrics=$(python3 - "$work/metrics" <<'PY'
import re, sys
line_re = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
label_re = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
for line in open(sys.argv[1]):
    m = line_re.match(line.strip())
    if not m or not (m.group(1).startswith("whizbang_") or m.group(1) in ("pg_up", "pg_exporter_last_scrape_error")):
        continue
    labels = sorted((k, v) for k, v in label_re.findall(m.group(2) or "") if k != "server")
    print("%s{%s} %s" % (m.group(1), ",".join('%s="%s"' % kv for kv in labels), m.group(3)))
PY
)
metric() { awk -v k="$1" '$1 == k { print $2 }' <<<"$metrics"; }

check_eq "the exporter is up and reached the database" 1 "$(metric 'pg_up{}')"
check_eq "no scrape error" 0 "$(metric 'pg_exporter_last_scrape_error{}')"
check_eq "40 whizbang_stats_value metrics (5 of them the lease store's, 2 of waiting claims, 2 of dedup generations, 4 of logical slots, 11 of the throughput counters)" 40 "$(grep -c '^whizbang_stats_value{metric=' <<<"$metrics" || true)"
check_eq "stats: inbox pending 2, leased 1, scheduled 0, dead-lettered 1" "2 1 0 1" \
  "$(for k in pending leased scheduled dead_lettered; do metric "whizbang_stats_value{metric=\"inbox_$k\"}"; done | xargs)"
check_eq "stats: outbox pending 2, leased 0, dead-lettered 0" "2 0 0" \
  "$(for k in pending leased dead_lettered; do metric "whizbang_stats_value{metric=\"outbox_$k\"}"; done | xargs)"
check_eq "stats: 4 dedup rows" 4 "$(metric 'whizbang_stats_value{metric="dedup_rows"}')"
age=$(metric 'whizbang_stats_value{metric="inbox_oldest_pending_seconds"}')
check_eq "stats: inbox_oldest_pending_seconds is a small age" ok "$([[ "$age" =~ ^[0-9]+$ ]] && [ "$age" -lt 120 ] && echo ok || echo "$age")"
grep -q '^# HELP whizbang_stats_value whizbang.stats()' "$work/metrics" && help=ok || help=missing
check_eq "the metric carries the file's description" ok "$help"

if [ "$has_queues" = t ]; then
  q() { metric "whizbang_queues_$1{consumer=\"$2\",source=\"$3\"}"; }
  check_eq "queues: billing pending 2, leased 1, scheduled 0, dead-lettered 0" "2 1 0 0" \
    "$(q pending billing inbox) $(q leased billing inbox) $(q scheduled billing inbox) $(q dead_lettered billing inbox)"
  check_eq "queues: audit pending 0, dead-lettered 1, oldest pending 0" "0 1 0" \
    "$(q pending audit inbox) $(q dead_lettered audit inbox) $(q oldest_pending_seconds audit inbox)"
  check_eq "queues: outbox (consumer \"\") pending 2" 2 "$(q pending '' outbox)"
  check_eq "queues: 3 queues, 5 gauges each" 15 "$(grep -c '^whizbang_queues_' <<<"$metrics" || true)"
fi

if [ "$has_counters" = t ]; then
  c() { metric "whizbang_counters_$1{consumer=\"$2\",source=\"$3\"}"; }
  check_eq "counters: billing stored 3, claimed 1, completed 0" "3 1 0" \
    "$(c stored billing inbox) $(c claimed billing inbox) $(c completed billing inbox)"
  check_eq "counters: audit failed 1, dead-lettered 1" "1 1" "$(c failed audit inbox) $(c dead_lettered audit inbox)"
  check_eq "counters: outbox (consumer \"\") stored 2" 2 "$(c stored '' outbox)"
  check_eq "stats: counters_inbox_stored 4" 4 "$(metric 'whizbang_stats_value{metric="counters_inbox_stored"}')"
  grep -q '^# TYPE whizbang_counters_stored counter' "$work/metrics" && kind=counter || kind=other
  check_eq "the counters are Prometheus counters" counter "$kind"
fi

if [ "$FAILED" -ne 0 ]; then
  echo "---- exporter.log"; cat "$work/exporter.log"
  echo "---- whizbang metrics"; echo "$metrics"
  echo "$FAILED check(s) failed"
  exit 1
fi
echo "all checks passed"
