#!/usr/bin/env bash
# Settings changes reach other sessions (docs/settings.md: "A change applies to every call that
# starts after the change has committed, and to later calls of the transaction that made it.
# No restart or reload is needed."). whizbang caches the effective settings per backend, so
# this checks, with two sessions, that a long-lived session B sees every change session A
# commits (UPDATE, DELETE back to the default, the seed's upsert) at its next call, also in the
# middle of one of B's READ COMMITTED transactions, and that a change A rolls back is never seen.
set -euo pipefail

self=$(readlink -f "$0")
cd "$(dirname "$self")/../.."

source scripts/lib.sh  # wb_free_port

if [ "${1:-}" != "--in-cluster" ]; then
    exec pg_virtualenv -t -c "-p $(wb_free_port)" -o fsync=off bash "$self" --in-cluster
fi

psql -X -q -v ON_ERROR_STOP=1 -c "CREATE EXTENSION whizbang"

out=$(mktemp /tmp/whizbang-settings-cache.XXXXXX)
trap 'rm -f "$out"' EXIT

# Session B is this psql; every \! line is session A, a separate connection that commits (or
# rolls back) before B goes on. Each probe records a fresh id sent on 2024-01-01 with
# p_now = 2024-06-30, i.e. 181 days before: expired under the default (30 days, reject).
psql -X -q -A -t -v ON_ERROR_STOP=1 >"$out" 2>&1 <<'SQL' || { cat "$out"; echo "settings_cache: FAIL (session failed)"; exit 1; }
-- The generation of 2024-06-30, made by maintenance run then (0.13.0: a store makes none that has
-- left the window).
DO $$ BEGIN PERFORM whizbang.perform_maintenance('2024-06-30 00:00:00+00'); END $$;
CREATE FUNCTION pg_temp.probe(p_label text) RETURNS text
LANGUAGE sql AS $$
    SELECT p_label || ' ' || whizbang.dedup_insert(md5(p_label)::uuid, 'cache', NULL,
                                                   '2024-01-01 00:00:00+00', '2024-06-30 00:00:00+00')
$$;

SELECT pg_temp.probe('1_default');
\! psql -X -q -v ON_ERROR_STOP=1 -c "UPDATE whizbang.wh_settings SET setting_value = 'accept' WHERE setting_key = 'replay_policy'"
SELECT pg_temp.probe('2_after_update_accept');
\! psql -X -q -v ON_ERROR_STOP=1 -c "DELETE FROM whizbang.wh_settings WHERE setting_key = 'replay_policy'"
SELECT pg_temp.probe('3_after_delete');
\! psql -X -q -v ON_ERROR_STOP=1 -c "INSERT INTO whizbang.wh_settings (setting_key, setting_value, value_type, description) VALUES ('dedup_retention_days', '365', 'integer', 'Days to retain message deduplication entries') ON CONFLICT (setting_key) DO UPDATE SET setting_value = EXCLUDED.setting_value"
SELECT pg_temp.probe('4_after_seed_upsert_365');
\! psql -X -q -v ON_ERROR_STOP=1 -c "BEGIN; UPDATE whizbang.wh_settings SET setting_value = '1' WHERE setting_key = 'dedup_retention_days'; ROLLBACK"
SELECT pg_temp.probe('5_after_rolled_back_change');

BEGIN;
SELECT pg_temp.probe('6_in_transaction_before');
\! psql -X -q -v ON_ERROR_STOP=1 -c "UPDATE whizbang.wh_settings SET setting_value = '30' WHERE setting_key = 'dedup_retention_days'"
SELECT pg_temp.probe('7_in_transaction_after_commit_elsewhere');
COMMIT;

BEGIN;
-- (the replay_policy row was deleted in step 3: an INSERT sets it again)
INSERT INTO whizbang.wh_settings (setting_key, setting_value) VALUES ('replay_policy', 'accept');
SELECT pg_temp.probe('8_own_uncommitted_change');
ROLLBACK;
SELECT pg_temp.probe('9_after_own_rollback');
SQL

cat "$out"
expected="1_default expired
2_after_update_accept new
3_after_delete expired
4_after_seed_upsert_365 new
5_after_rolled_back_change new
6_in_transaction_before new
7_in_transaction_after_commit_elsewhere expired
8_own_uncommitted_change new
9_after_own_rollback expired"
if [ "$(grep -E '^[0-9]_' "$out")" = "$expected" ]; then
    echo "settings_cache: PASS"
else
    echo "expected:"
    echo "$expected"
    echo "settings_cache: FAIL"
    exit 1
fi
