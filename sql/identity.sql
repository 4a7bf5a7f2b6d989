-- Identity helpers: fingerprints, event ids, UUIDv7, partitions.

-- Canonical form: key order, whitespace and trailing fractional zeros do not matter.
SELECT whizbang.fingerprint('{"b": 1.50, "a": [1.0, -0, "x"]}')
     = whizbang.fingerprint('{"a":[1,0,"x"],"b":1.5}') AS same_canonical_text;
-- The canonical text of that document is {"a":[1,0,"x"],"b":1.5}; its SHA-256:
SELECT encode(whizbang.fingerprint('{"a":[1,0,"x"],"b":1.5}'), 'hex');
SELECT encode(sha256('{"a":[1,0,"x"],"b":1.5}'::bytea), 'hex');
-- Values matter.
SELECT whizbang.fingerprint('{"amount": 10}') = whizbang.fingerprint('{"amount": 11}') AS same;
-- Ignored paths are removed before hashing.
SELECT whizbang.fingerprint('{"order": 7, "meta": {"traceId": "t-1"}}', ARRAY['meta.traceId'])
     = whizbang.fingerprint('{"order": 7, "meta": {"traceId": "t-2"}}', ARRAY['meta.traceId']) AS same;
SELECT whizbang.fingerprint('{"items": [{"sku": "a", "note": "x"}]}', ARRAY['items.0.note'])
     = whizbang.fingerprint('{"items": [{"sku": "a"}]}') AS same;
SELECT whizbang.fingerprint(NULL) IS NULL AS null_payload_null_result;

-- UUIDv5 of "23:https://example.com/src42" in the URL namespace.
SELECT whizbang.event_uuid('https://example.com/src', '42');
-- The length prefix keeps ("ab", "c") and ("a", "bc") apart.
SELECT whizbang.event_uuid('ab', 'c') <> whizbang.event_uuid('a', 'bc') AS distinct_ids;

-- UUIDv7: version 7, RFC variant, the requested millisecond in the first 48 bits.
SELECT substr(u::text, 15, 1) AS version,
       substr(u::text, 20, 1) IN ('8', '9', 'a', 'b') AS rfc_variant,
       substr(replace(u::text, '-', ''), 1, 12) = lpad(to_hex(1767225600000), 12, '0') AS timestamp_bits
  FROM whizbang.uuid_v7('2026-01-01 00:00:00+00') AS u;
-- Monotonic within a backend, even inside one millisecond.
SELECT bool_and(a < b) AS increasing
  FROM (SELECT u AS a, lead(u) OVER (ORDER BY n) AS b
          FROM (SELECT n, whizbang.uuid_v7('2026-01-01 00:00:00+00') AS u
                  FROM generate_series(1, 1000) n) s) t
 WHERE b IS NOT NULL;

-- partition_of: stable and never negative.
SELECT whizbang.partition_of('00000000-0000-0000-0000-000000000000', 10000),
       whizbang.partition_of('ffffffff-ffff-ffff-ffff-ffffffffffff', 7);
SELECT min(p) >= 0 AND max(p) < 16 AS in_range, count(DISTINCT p) AS partitions_used
  FROM (SELECT whizbang.partition_of(md5(i::text)::uuid, 16) AS p FROM generate_series(1, 2000) i) s;

SELECT whizbang.version() = (SELECT default_version FROM pg_available_extensions WHERE name = 'whizbang') AS version_matches;
