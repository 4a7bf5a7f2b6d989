#!/usr/bin/env bash
# Memory stays bounded across the C++ <-> PostgreSQL boundary (DESIGN §6): in one backend,
# 100,000 calls of whizbang._bridge_selftest mixing 'ok' with every caught error mode, then
# 100,000 successful calls of dedup_insert_many (new, duplicate, conflict and expired
# outcomes) and fingerprint. The backend's VmRSS (read from /proc/self/status through
# pg_read_file) is taken after a 1,000-call warm-up of each kind and again at the end; the test
# fails if it grew by more than 8 MB, or if _bridge_selftest('ok') does not return 0 (a C++
# destructor was skipped) at any point.
#
# Then the big batches (issue 10): a 200,000-message store_inbox_messages, an inbox_receive of
# the same 200,000 messages (all duplicates), a 200,000-id dedup_insert_many and a
# 100,000-message store_outbox_messages, each in its own transaction. glibc keeps freed memory
# in the heap (160-570 MB after these calls), so whizbang trims it at the end of a big call's
# transaction (src/pg/memory.*): VmRSS after each call must be within 20 MB of VmRSS before the
# first.
#
# VmRSS also counts shared memory the backend touches, so the cluster runs with small shared
# buffers (and hence small WAL buffers), and the dedup workload reuses a fixed set of ids and
# commits regularly so its table stays a few pages; RssAnon (private memory) is printed too.
set -euo pipefail

self=$(readlink -f "$0")
cd "$(dirname "$self")/../.."

source scripts/lib.sh  # wb_free_port

LIMIT_KB=$((8 * 1024))
BIG_LIMIT_KB=$((20 * 1024))

if [ "${1:-}" != "--in-cluster" ]; then
    exec pg_virtualenv -t -c "-p $(wb_free_port)" -o fsync=off -o shared_buffers=2MB bash "$self" --in-cluster
fi

out=$(mktemp /tmp/whizbang-memory.XXXXXX)
trap 'rm -f "$out"' EXIT

start=$(date +%s)
psql -X -q -A -t -v ON_ERROR_STOP=1 >"$out" 2>&1 <<'SQL' || { cat "$out"; echo "bridge_memory: FAIL (session failed)"; exit 1; }
CREATE EXTENSION whizbang;

-- kB of one field of this backend's /proc/self/status.
CREATE FUNCTION pg_temp.status_kb(p_field text) RETURNS bigint
LANGUAGE sql AS $$
    SELECT (regexp_match(pg_read_file('/proc/self/status'), p_field || ':\s+(\d+) kB'))[1]::bigint
$$;

-- p_calls calls of _bridge_selftest, every other one 'ok' (which must return 0), the rest
-- cycling through the error modes, each caught. Commits every 1,000 calls so that PostgreSQL's
-- own per-transaction bookkeeping of subtransactions does not count as growth.
CREATE PROCEDURE pg_temp.selftest_loop(p_calls int)
LANGUAGE plpgsql AS $$
DECLARE
    v_modes  text[] := ARRAY['cpp_error', 'cpp_unknown', 'bad_alloc', 'pg_error', 'no_such_mode'];
    v_live   bigint;
    v_raised int := 0;
    v_errors int := 0;
BEGIN
    FOR i IN 1..p_calls LOOP
        IF i % 2 = 0 THEN
            v_live := whizbang._bridge_selftest('ok');
            IF v_live <> 0 THEN
                RAISE EXCEPTION 'after % calls _bridge_selftest(''ok'') = % (a destructor was skipped)', i, v_live;
            END IF;
        ELSE
            v_errors := v_errors + 1;
            BEGIN
                PERFORM whizbang._bridge_selftest(v_modes[1 + (i / 2) % 5]);
            EXCEPTION WHEN OTHERS THEN
                v_raised := v_raised + 1;
            END;
        END IF;
        IF i % 1000 = 0 THEN
            COMMIT;
        END IF;
    END LOOP;
    IF v_raised <> v_errors THEN
        RAISE EXCEPTION 'only % of % error-mode calls raised', v_raised, v_errors;
    END IF;
END
$$;

-- p_calls successful calls: every fourth one is dedup_insert_many over a fixed set of ids
-- (new once, then duplicate or conflict; every fifth of those adds two ids sent long ago,
-- which are expired: looked up, then removed again), the others are fingerprint. Commits every
-- 20 calls so that the few rows updated over and over do not grow long version chains.
CREATE PROCEDURE pg_temp.work_loop(p_calls int)
LANGUAGE plpgsql AS $$
DECLARE
    v_ids    uuid[] := ARRAY(SELECT md5('memory' || i)::uuid FROM generate_series(1, 6) i);
    v_old    uuid[] := ARRAY(SELECT md5('memory-old' || i)::uuid FROM generate_series(1, 2) i);
    v_rows   int;
    v_fp     bytea;
BEGIN
    FOR i IN 1..p_calls LOOP
        IF i % 20 = 0 THEN
            SELECT count(*) INTO v_rows
              FROM whizbang.dedup_insert_many(
                       v_ids || v_old || v_ids[1], 'memory',
                       ARRAY['\x01', NULL, '\x03', NULL, '\x05', NULL, NULL, NULL, '\xff']::bytea[],
                       ARRAY[NULL, NULL, NULL, NULL, NULL, NULL,
                             '2000-01-01 00:00:00+00', '2000-01-01 00:00:00+00', NULL]::timestamptz[])
             WHERE outcome = CASE WHEN message_id = ANY (v_old) THEN 'expired' ELSE outcome END;
            IF v_rows <> 9 THEN
                RAISE EXCEPTION 'dedup_insert_many with expired ids: % rows as expected, not 9', v_rows;
            END IF;
        ELSIF i % 4 = 0 THEN
            SELECT count(*) INTO v_rows
              FROM whizbang.dedup_insert_many(
                       v_ids || v_ids[1], 'memory',
                       ARRAY['\x01', NULL, '\x03', NULL, '\x05', NULL,
                             CASE WHEN i % 8 = 0 THEN '\x01' ELSE '\xff' END]::bytea[]);
            IF v_rows <> 7 THEN
                RAISE EXCEPTION 'dedup_insert_many returned % rows, not 7', v_rows;
            END IF;
        ELSE
            v_fp := whizbang.fingerprint(jsonb_build_object('n', i, 'items', jsonb_build_array(1.50, 'x', i),
                                                            'meta', jsonb_build_object('traceId', i)),
                                         ARRAY['meta.traceId', 'items.0']);
            IF octet_length(v_fp) <> 32 THEN
                RAISE EXCEPTION 'fingerprint returned % bytes', octet_length(v_fp);
            END IF;
        END IF;
        IF i % 20 = 0 THEN
            COMMIT;
        END IF;
    END LOOP;
END
$$;

-- Warm-up: 1,000 calls of each kind (library loaded, plans prepared, caches filled).
CALL pg_temp.selftest_loop(1000);
CALL pg_temp.work_loop(1000);

SELECT 'before ' || pg_backend_pid() || ' ' || pg_temp.status_kb('VmRSS') || ' '
       || pg_temp.status_kb('RssAnon') || ' ' || coalesce(pg_temp.status_kb('RssShmem'), 0);

CALL pg_temp.selftest_loop(100000);
SELECT 'after_selftest ' || pg_backend_pid() || ' ' || pg_temp.status_kb('VmRSS') || ' '
       || pg_temp.status_kb('RssAnon') || ' ' || coalesce(pg_temp.status_kb('RssShmem'), 0);

CALL pg_temp.work_loop(100000);
SELECT 'after ' || pg_backend_pid() || ' ' || pg_temp.status_kb('VmRSS') || ' '
       || pg_temp.status_kb('RssAnon') || ' ' || coalesce(pg_temp.status_kb('RssShmem'), 0);

SELECT 'leaked ' || whizbang._bridge_selftest('ok');
SELECT 'records ' || count(*) || ' ' || sum(observation_count) || ' ' || sum(conflict_count)
  FROM whizbang.wh_message_deduplication;

-- Big batches: the arguments are built first, in tables, so that building them does not count.
CREATE TABLE big_inbox AS
SELECT jsonb_agg(jsonb_build_object('MessageId', md5('big' || g)::uuid, 'HandlerName', 'h', 'MessageType', 't',
                                    'StreamId', md5('big-stream' || g % 1000)::uuid,
                                    'Envelope', jsonb_build_object('n', g, 'pad', repeat('x', 100)))) AS m
  FROM generate_series(1, 200000) g;
CREATE TABLE big_outbox AS
SELECT jsonb_agg(jsonb_build_object('MessageId', md5('big-out' || g)::uuid, 'Destination', 'd', 'MessageType', 't',
                                    'Envelope', jsonb_build_object('n', g, 'pad', repeat('x', 100)))) AS m
  FROM generate_series(1, 100000) g;
CREATE TABLE big_ids AS SELECT array_agg(md5('big-id' || g)::uuid) AS ids FROM generate_series(1, 200000) g;
SQL

# The big batches in a new backend (its heap holds nothing of the loops above), each call in
# its own transaction.
psql -X -q -A -t -v ON_ERROR_STOP=1 >>"$out" 2>&1 <<'SQL' || { cat "$out"; echo "bridge_memory: FAIL (big batch session failed)"; exit 1; }
CREATE FUNCTION pg_temp.status_kb(p_field text) RETURNS bigint
LANGUAGE sql AS $$
    SELECT (regexp_match(pg_read_file('/proc/self/status'), p_field || ':\s+(\d+) kB'))[1]::bigint
$$;
-- Warm-up: one small call of each (library loaded, plans prepared).
SELECT count(*) FROM whizbang.store_inbox_messages(
    '[{"MessageId": "00000000-0000-4000-8000-00000000b001", "HandlerName": "h", "MessageType": "t", "Envelope": {}}]',
    p_consumer => 'memory-warm');
SELECT count(*) FROM whizbang.inbox_receive(
    '[{"MessageId": "00000000-0000-4000-8000-00000000b001", "HandlerName": "h", "MessageType": "t", "Envelope": {}}]',
    'memory-warm');
SELECT count(*) FROM whizbang.store_outbox_messages(
    '[{"MessageId": "00000000-0000-4000-8000-00000000b001", "Destination": "d", "MessageType": "t", "Envelope": {}}]');

SELECT 'big_before ' || pg_backend_pid() || ' ' || pg_temp.status_kb('VmRSS') || ' ' || pg_temp.status_kb('RssAnon');
SELECT 'big_store_rows ' || count(*) FROM big_inbox b, whizbang.store_inbox_messages(b.m, p_consumer => 'memory-big');
SELECT 'big_after_store ' || pg_temp.status_kb('VmRSS') || ' ' || pg_temp.status_kb('RssAnon');
SELECT 'big_receive_duplicates ' || count(*)
  FROM big_inbox b, whizbang.inbox_receive(b.m, 'memory-big') r WHERE r.outcome = 'duplicate';
SELECT 'big_after_receive ' || pg_temp.status_kb('VmRSS') || ' ' || pg_temp.status_kb('RssAnon');
SELECT 'big_dedup_rows ' || count(*) FROM big_ids b, whizbang.dedup_insert_many(b.ids, 'memory-big');
SELECT 'big_after_dedup ' || pg_temp.status_kb('VmRSS') || ' ' || pg_temp.status_kb('RssAnon');
SELECT 'big_outbox_rows ' || count(*) FROM big_outbox b, whizbang.store_outbox_messages(b.m);
SELECT 'big_after_outbox ' || pg_backend_pid() || ' ' || pg_temp.status_kb('VmRSS') || ' ' || pg_temp.status_kb('RssAnon');
SQL
elapsed=$(($(date +%s) - start))
# big_before and big_after_outbox start with the backend pid.
big_rss() { sed -n "s/^$1 //p" "$out" | awk '{ print $(NF - 1) }'; }
big_anon() { sed -n "s/^$1 //p" "$out" | awk '{ print $NF }'; }
big_pid() { sed -n "s/^$1 //p" "$out" | cut -d' ' -f1; }

read -r _ pid_before rss_before anon_before shmem_before < <(grep '^before ' "$out")
read -r _ pid_mid rss_mid anon_mid shmem_mid < <(grep '^after_selftest ' "$out")
read -r _ pid_after rss_after anon_after shmem_after < <(grep '^after ' "$out")
leaked=$(sed -n 's/^leaked //p' "$out")
records=$(sed -n 's/^records //p' "$out")

grow=$((rss_after - rss_before))
echo "backend pid:          $pid_before (same at the end: $pid_after)"
echo "VmRSS   before:       ${rss_before} kB   (RssAnon ${anon_before} kB, RssShmem ${shmem_before} kB)"
echo "VmRSS   after 100,000 _bridge_selftest calls: ${rss_mid} kB   (RssAnon ${anon_mid} kB, RssShmem ${shmem_mid} kB)"
echo "VmRSS   after 100,000 dedup_insert_many/fingerprint calls: ${rss_after} kB   (RssAnon ${anon_after} kB, RssShmem ${shmem_after} kB)"
echo "VmRSS   growth:       ${grow} kB (limit ${LIMIT_KB} kB); RssAnon growth $((anon_after - anon_before)) kB"
echo "_bridge_selftest('ok') at the end: ${leaked}"
echo "dedup records / observations / conflicts: ${records}"
big_before=$(big_rss big_before)
echo "big batches: VmRSS before ${big_before} kB (RssAnon $(big_anon big_before) kB)"
for step in store receive dedup outbox; do
    echo "  after the ${step}: VmRSS $(big_rss big_after_$step) kB (RssAnon $(big_anon big_after_$step) kB)"
done
echo "  rows: store $(sed -n 's/^big_store_rows //p' "$out"), receive duplicates $(sed -n 's/^big_receive_duplicates //p' "$out"),"\
     "dedup $(sed -n 's/^big_dedup_rows //p' "$out"), outbox $(sed -n 's/^big_outbox_rows //p' "$out")"
echo "elapsed: ${elapsed} s"

status=0
if [ "$pid_before" != "$pid_after" ]; then
    echo "FAIL: the measurements come from different backends"
    status=1
fi
if [ "$grow" -gt "$LIMIT_KB" ]; then
    echo "FAIL: VmRSS grew by ${grow} kB, more than ${LIMIT_KB} kB"
    status=1
fi
if [ "$(big_pid big_before)" != "$(big_pid big_after_outbox)" ]; then
    echo "FAIL: the big batch measurements come from different backends"
    status=1
fi
for step in store receive dedup outbox; do
    big_grow=$(($(big_rss big_after_$step) - big_before))
    if [ "$big_grow" -gt "$BIG_LIMIT_KB" ]; then
        echo "FAIL: VmRSS after the big ${step} is ${big_grow} kB above before the big batches, more than ${BIG_LIMIT_KB} kB"
        status=1
    fi
done
if [ "$(sed -n 's/^big_store_rows //p' "$out")" != 200000 ] ||
   [ "$(sed -n 's/^big_receive_duplicates //p' "$out")" != 200000 ] ||
   [ "$(sed -n 's/^big_dedup_rows //p' "$out")" != 200000 ] ||
   [ "$(sed -n 's/^big_outbox_rows //p' "$out")" != 100000 ]; then
    echo "FAIL: the big batches did not return 200,000 stored, 200,000 duplicates, 200,000 dedup rows, 100,000 outbox rows"
    status=1
fi
if [ "$leaked" != "0" ]; then
    echo "FAIL: _bridge_selftest('ok') returned ${leaked}, not 0"
    status=1
fi
[ "$status" -eq 0 ] && echo "bridge_memory: PASS" || echo "bridge_memory: FAIL"
exit $status
