-- Identity helpers (DESIGN §3.1, §3.7): fingerprint, event_uuid, uuid_v7, partition_of and
-- version(), with bad input and the documented fixed behaviour.
--
-- Non-ASCII text is built from its UTF-8 bytes with convert_from(..., server_encoding) so the
-- file gives the same answers in a UTF8 and a SQL_ASCII database.
BEGIN;
SELECT plan(104);

-- ---------------------------------------------------------------------------------------
-- fingerprint: bad input
-- ---------------------------------------------------------------------------------------

SELECT throws_ok($$SELECT whizbang.fingerprint('{'::jsonb)$$, '22P02', NULL,
                 'fingerprint: ''{''::jsonb is rejected by jsonb itself (22P02)');
SELECT throws_ok($$SELECT whizbang.fingerprint('{')$$, '22P02', NULL,
                 'fingerprint: a malformed JSON literal is rejected (22P02)');
SELECT throws_ok($$SELECT whizbang.fingerprint('{"a": }')$$, '22P02', NULL,
                 'fingerprint: a missing value is rejected (22P02)');
SELECT throws_ok($$SELECT whizbang.fingerprint('')$$, '22P02', NULL,
                 'fingerprint: an empty string is not JSON (22P02)');

SELECT is(whizbang.fingerprint(NULL), NULL, 'fingerprint: NULL payload gives NULL');
SELECT is(whizbang.fingerprint(NULL, ARRAY['a']), NULL, 'fingerprint: NULL payload with paths gives NULL');
SELECT is(whizbang.fingerprint('{"a":1}', NULL), whizbang.fingerprint('{"a":1}'),
          'fingerprint: NULL p_ignore_paths is the same as no paths');
SELECT is(whizbang.fingerprint('{"a":1}', '{}'), whizbang.fingerprint('{"a":1}'),
          'fingerprint: an empty p_ignore_paths is the same as no paths');

SELECT throws_ok($$SELECT whizbang.fingerprint('{"a":1}', ARRAY[NULL]::text[])$$, '22004', NULL,
                 'fingerprint: a NULL path raises 22004');
SELECT throws_like($$SELECT whizbang.fingerprint('{"a":1}', ARRAY['a', NULL])$$, '%p\_ignore\_paths[2]%',
                   'fingerprint: the NULL path error names p_ignore_paths[2]');
SELECT throws_ok($$SELECT whizbang.fingerprint('{"a":1}', ARRAY['a..b'])$$, '22023', NULL,
                 'fingerprint: path ''a..b'' (empty segment) raises 22023');
SELECT throws_ok($$SELECT whizbang.fingerprint('{"a":1}', ARRAY['.a'])$$, '22023', NULL,
                 'fingerprint: path ''.a'' (leading empty segment) raises 22023');
SELECT throws_ok($$SELECT whizbang.fingerprint('{"a":1}', ARRAY['a.'])$$, '22023', NULL,
                 'fingerprint: path ''a.'' (trailing empty segment) raises 22023');
SELECT throws_ok($$SELECT whizbang.fingerprint('{"a":1}', ARRAY[''])$$, '22023', NULL,
                 'fingerprint: an empty path raises 22023');
SELECT throws_ok($$SELECT whizbang.fingerprint('{"a":1}', ARRAY['ok', 'x..y'])$$, '22023', NULL,
                 'fingerprint: a bad path after a good one raises 22023');
SELECT throws_ok($$SELECT whizbang.fingerprint('{"a":1}', ARRAY[['a'], ['b']])$$, '2202E', NULL,
                 'fingerprint: a two-dimensional p_ignore_paths raises 2202E');
SELECT throws_ok($$SELECT whizbang.fingerprint('{"a":1}'::json)$$, '42883', NULL,
                 'fingerprint: json (not jsonb) does not resolve (42883)');

-- ---------------------------------------------------------------------------------------
-- fingerprint: canonical form (DESIGN §3.1), fixed vectors
-- ---------------------------------------------------------------------------------------

SELECT is(octet_length(whizbang.fingerprint('{}')), 32, 'fingerprint: 32 bytes');
SELECT is(whizbang.fingerprint('{"b":[1,2],"a":1}'), sha256('{"a":1,"b":[1,2]}'::bytea),
          'fingerprint: SHA-256 of the canonical text (sorted keys, no whitespace)');
-- jsonb orders keys shorter-first; canonical text orders them by code point.
SELECT is(whizbang.fingerprint('{"b":1,"aa":2}'), sha256('{"aa":2,"b":1}'::bytea),
          'fingerprint: keys sorted by code point, not by jsonb''s length-first order');
SELECT is(whizbang.fingerprint('{"z":{"y":1,"x":[true,null,"s"]},"a":-1.50,"B":0}'),
          sha256('{"B":0,"a":-1.5,"z":{"x":[true,null,"s"],"y":1}}'::bytea),
          'fingerprint: nested objects sorted, upper case before lower case');
SELECT is(whizbang.fingerprint('[1.0, 1.50, -0, -0.0, 1e2, 0.000, 1.5e-3, -2.50, 10]'),
          sha256('[1,1.5,0,0,100,0,0.0015,-2.5,10]'::bytea),
          'fingerprint: numbers as their value (trailing fraction zeros and negative zero removed)');
SELECT is(whizbang.fingerprint($j${"s":"line\nbreak \"q\" \u0001 \\ /"}$j$),
          sha256(convert_to($b${"s":"line\nbreak \"q\" \u0001 \\ /"}$b$, current_setting('server_encoding'))),
          'fingerprint: strings escaped as jsonb prints them');
SELECT is(whizbang.fingerprint(('{"s":"' || convert_from('\xc3a9', current_setting('server_encoding')) || '"}')::jsonb),
          sha256('\x7b2273223a22c3a9227d'::bytea),
          'fingerprint: non-ASCII text hashed as its UTF-8 bytes');

SELECT is(whizbang.fingerprint('{ "b" : [1, 2],   "a" : 1 }'), whizbang.fingerprint('{"a":1,"b":[1,2]}'),
          'fingerprint: whitespace and key order do not matter');
SELECT is(whizbang.fingerprint('{"a":1.0}'), whizbang.fingerprint('{"a":1}'), 'fingerprint: 1.0 = 1');
SELECT is(whizbang.fingerprint('{"a":1.50}'), whizbang.fingerprint('{"a":1.5}'), 'fingerprint: 1.50 = 1.5');
SELECT isnt(whizbang.fingerprint('{"a":1}'), whizbang.fingerprint('{"a":2}'), 'fingerprint: 1 <> 2');
SELECT isnt(whizbang.fingerprint('{"a":1}'), whizbang.fingerprint('{"a":"1"}'), 'fingerprint: 1 <> "1"');
SELECT isnt(whizbang.fingerprint('{"a":1}'), whizbang.fingerprint('{"a":1,"b":null}'),
            'fingerprint: a null member is not the same as a missing one');
SELECT isnt(whizbang.fingerprint('[1,2]'), whizbang.fingerprint('[2,1]'), 'fingerprint: array order matters');
SELECT isnt(whizbang.fingerprint('{"a":1.5}'), whizbang.fingerprint('{"a":1.05}'), 'fingerprint: 1.5 <> 1.05');

-- Ignore paths
SELECT is(whizbang.fingerprint('{"a":1,"meta":{"traceId":"t-1","v":2}}', ARRAY['meta.traceId']),
          whizbang.fingerprint('{"a":1,"meta":{"v":2}}'),
          'fingerprint: meta.traceId is removed before hashing');
SELECT is(whizbang.fingerprint('{"items":[{"n":1,"note":"x"},{"n":2}]}', ARRAY['items.0.note']),
          whizbang.fingerprint('{"items":[{"n":1},{"n":2}]}'),
          'fingerprint: items.0.note removes a member of an array element');
SELECT is(whizbang.fingerprint('{"a":1,"b":2,"c":3}', ARRAY['a', 'c']), whizbang.fingerprint('{"b":2}'),
          'fingerprint: several paths are all removed');
SELECT is(whizbang.fingerprint('{"a":{"b":1}}', ARRAY['a.b.c', 'x', 'a.0']), whizbang.fingerprint('{"a":{"b":1}}'),
          'fingerprint: paths that do not exist change nothing');
SELECT is(whizbang.fingerprint('{"a":1,"t":"x"}', ARRAY['t']), whizbang.fingerprint('{"a":1,"t":"y"}', ARRAY['t']),
          'fingerprint: payloads that differ only in an ignored path are equal');

-- Large payloads are not bad input.
SELECT is(octet_length(whizbang.fingerprint(jsonb_build_object('s', repeat('x', 8000000)))), 32,
          'fingerprint: an 8 MB string member works');
SELECT is(octet_length(whizbang.fingerprint(
              (SELECT jsonb_agg(jsonb_build_object('k', i, 'v', 'value ' || i)) FROM generate_series(1, 50000) i))), 32,
          'fingerprint: a 50,000-element array of objects works');
SELECT is(whizbang.fingerprint((repeat('[', 9000) || repeat(']', 9000))::jsonb),
          sha256((repeat('[', 9000) || repeat(']', 9000))::bytea),
          'fingerprint: 9,000 levels of nesting work');
-- The depth limit (docs/fingerprint.md, Limits): 10,000 levels work, deeper is refused. A
-- valid jsonb value is not malformed input, so the refusal is a limit: 54000, like every other
-- whizbang limit (commit 3906caa "JSON nested too deep is 54000, not 22P02").
SELECT is(whizbang.fingerprint((repeat('[', 10000) || repeat(']', 10000))::jsonb),
          sha256((repeat('[', 10000) || repeat(']', 10000))::bytea),
          'fingerprint: 10,000 levels of nesting (the limit) work');
SELECT throws_ok($$SELECT whizbang.fingerprint((repeat('[', 10001) || repeat(']', 10001))::jsonb)$$, '54000', NULL,
                 'fingerprint: 10,001 levels of nesting are refused with 54000 (the depth limit)');
SELECT throws_ok($$SELECT whizbang.fingerprint((repeat('{"a":', 10001) || '1' || repeat('}', 10001))::jsonb)$$, '54000', NULL,
                 'fingerprint: 10,001 levels of nested objects are refused with 54000');
SELECT throws_ok($$SELECT whizbang.fingerprint('{}', array_fill('x'::text, ARRAY[1000001]))$$, '54000', NULL,
                 'fingerprint: more than 1,000,000 ignore paths raise 54000');
SELECT throws_ok($$SELECT whizbang.fingerprint('{"a":"\u0000"}')$$, '22P05', NULL,
                 'fingerprint: \u0000 in a string is rejected by jsonb input (22P05)');
SELECT throws_ok($$SELECT whizbang.fingerprint('{"a":1e-100000}')$$, '22003', NULL,
                 'fingerprint: a number outside numeric range is rejected by jsonb input (22003)');

-- The worked examples of docs/fingerprint.md, digest for digest. The payload is cast to jsonb
-- only when the row runs, so the rows with non-ASCII text can be skipped outside UTF8.
CREATE FUNCTION pg_temp.fingerprint_hex(p_payload text, p_paths text[]) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    v_hex text;
BEGIN
    EXECUTE 'SELECT encode(whizbang.fingerprint($1::jsonb, $2), ''hex'')' INTO v_hex USING p_payload, p_paths;
    RETURN v_hex;
END
$$;
CREATE TEMP TABLE fingerprint_examples (n int, payload text, paths text[], needs_utf8 boolean, digest text);
INSERT INTO fingerprint_examples VALUES
 (1, $j${"currency": "EUR", "amount": 10.50}$j$, NULL, false,
  '048b5e29dedb96693ec3e7a9ee486d3fa7eaa9bec07e0d92e558d3303f1566d0'),
 (2, $j${"b": 1.50, "a": [1.0, -0, "x"]}$j$, NULL, false,
  '1d62d6fb9e6588d66b86f28af560d89963bdffd71bbd47b5d93ba9067e6fc3da'),
 (3, $j${"b": 1, "aa": 2, "B": 3, "é": 4, "a": 5}$j$, NULL, true,
  'b3747787ca6a39514a2c570693529378bd4bc65534c6a85fa5c379d3a89b2c58'),
 (4, $j$[1e3, 1.5e-3, -0.0, 100, 0.10, 12345678901234567890.000, -2.50e2]$j$, NULL, false,
  '0c135ce1be62ee83bf8dab698095598a4a01caf869d4b55a98d3a03b54ae38b4'),
 (5, $j${"note": "line1\nline2", "path": "a\/b", "name": "caf\u00e9", "quote": "say \"hi\"", "bell": "\u0007"}$j$, NULL, true,
  '257220b02eae5997611aae2935ccdf171c4158d70d217d6bf951eac1a6687b5b'),
 (6, $j${"order": 7, "meta": {"traceId": "t-1", "source": "web"}}$j$, '{meta.traceId}', false,
  '2c712a1e56103092f7799bb39efd0c33f4d17162236b1cc63b09b6489118746c'),
 (7, $j${"items": [{"sku": "a", "note": "x"}, {"sku": "b"}], "at": "2026-01-01"}$j$, '{items.0.note,at}', false,
  'd799a97eeb683467c97fdda53c7e52daf7404999f6469697314df69fe0ddd6a6'),
 (8, $j${"a": [10, 20, 30]}$j$, '{a.0,a.0}', false,
  'bf9cac4516bd4e5ad1ed81a1a7ae53bf6d2009ace31e205c9b09bcc33b9e6b75'),
 (9, $j${"a": [10, 20, 30]}$j$, '{a.-1,a.3,b.c,a.0.x}', false,
  '5f62108eff8159b42a0c9ee3dfccdc93e7da529f13877eb5a0c638a23da8dbcb'),
 (10, $j${"meta.traceId": "t-1", "meta": {"traceId": "t-2"}}$j$, '{meta.traceId}', false,
  'eb9cd2004fc7f1923ca7aac22c8d354412e042eb40b687783bc0221ffc01b568'),
 (11, $j${"a": {"x": 1}, "a": 2}$j$, NULL, false,
  '7e8059f495589fcd981232cc11d00b00da3802c01d688fa1cf1f6bed6e5bb33c'),
 (12, $j${}$j$, NULL, false,
  '44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a'),
 (13, $j$"hello"$j$, NULL, false,
  '5aa762ae383fbb727af3c7a36d4940a5b8c40a989452d2304fc958ff3f354e7a');
SELECT CASE WHEN needs_utf8 AND current_setting('server_encoding') <> 'UTF8'
            THEN skip('fingerprint.md example ' || n || ' has non-ASCII text: needs a UTF8 database', 1)
            ELSE is(pg_temp.fingerprint_hex(payload, paths), digest, 'fingerprint: docs/fingerprint.md worked example ' || n)
       END
  FROM fingerprint_examples ORDER BY n;

-- ---------------------------------------------------------------------------------------
-- event_uuid: UUIDv5 in the URL namespace of octet_length(source) || ':' || source || id
-- (vectors computed independently with Python's uuid.uuid5(uuid.NAMESPACE_URL, name))
-- ---------------------------------------------------------------------------------------

SELECT is(whizbang.event_uuid(NULL, 'a'), NULL, 'event_uuid: NULL source gives NULL');
SELECT is(whizbang.event_uuid('a', NULL), NULL, 'event_uuid: NULL id gives NULL');
SELECT is(whizbang.event_uuid(NULL, NULL), NULL, 'event_uuid: NULL both gives NULL');
SELECT is(whizbang.event_uuid('', ''), 'ce909d2b-be23-5d2b-8ea2-dc860a2b4852'::uuid,
          'event_uuid: ('''', '''') = uuid5(URL, ''0:'')');
SELECT is(whizbang.event_uuid('https://example.com/src', 'A234-1234-1234'),
          '4c9c31c0-7ab4-5fb6-9f46-d3e86c787224'::uuid,
          'event_uuid: CloudEvents-style source and id');
SELECT is(whizbang.event_uuid('ab', 'c'), '6fe076e4-5f7b-5589-9e96-f6149b9422c7'::uuid,
          'event_uuid: (''ab'', ''c'') = uuid5(URL, ''2:abc'')');
SELECT is(whizbang.event_uuid('a', 'bc'), 'a0b5e1ae-a786-5ddc-9011-75ec0d54eece'::uuid,
          'event_uuid: (''a'', ''bc'') = uuid5(URL, ''1:abc''), so it differs from (''ab'', ''c'')');
SELECT is(whizbang.event_uuid(convert_from('\x2f737263c3a9', current_setting('server_encoding')), '1'),
          'cfd45ddf-c645-5c83-a8e5-63d9c48c5907'::uuid,
          'event_uuid: the length prefix counts bytes (''/srcé'' is 6 bytes)');
SELECT is(whizbang.event_uuid('urn:x', ''), 'de222b2e-f72f-542a-b7a8-2d33b453ab8c'::uuid,
          'event_uuid: an empty id');
SELECT is(whizbang.event_uuid('https://example.com/orders', 'evt-42'), '6236898b-0cd8-5232-8a18-6192fa81285d'::uuid,
          'event_uuid: the example of docs/reference.md');
SELECT is(whizbang.event_uuid('caf' || convert_from('\xc3a9', current_setting('server_encoding')), 'x'),
          '0d252417-5681-507a-8cd4-369135007025'::uuid,
          'event_uuid: ''café'' counts 5 bytes (uuid5(URL, ''5:caféx''))');
SELECT ok(substr(whizbang.event_uuid(repeat('s', 1000000), repeat('i', 1000000))::text, 15, 1) = '5',
          'event_uuid: megabyte inputs work and give a version-5 uuid');

-- ---------------------------------------------------------------------------------------
-- uuid_v7
-- ---------------------------------------------------------------------------------------

SELECT throws_ok($$SELECT whizbang.uuid_v7('infinity')$$, '22023', NULL, 'uuid_v7: infinity raises 22023');
SELECT throws_ok($$SELECT whizbang.uuid_v7('-infinity')$$, '22023', NULL, 'uuid_v7: -infinity raises 22023');
SELECT throws_ok($$SELECT whizbang.uuid_v7(NULL)$$, '22004', NULL, 'uuid_v7: NULL raises 22004');
SELECT throws_ok($$SELECT whizbang.uuid_v7('1969-12-31 23:59:59.999+00')$$, '22008', NULL,
                 'uuid_v7: one millisecond before 1970 raises 22008');
SELECT throws_ok($$SELECT whizbang.uuid_v7('1900-01-01 00:00:00+00')$$, '22008', NULL,
                 'uuid_v7: 1900 raises 22008');
SELECT throws_ok($$SELECT whizbang.uuid_v7('12000-01-01 00:00:00+00')$$, '22003', NULL,
                 'uuid_v7: a time beyond the 48-bit millisecond field raises 22003');
SELECT throws_ok($$SELECT whizbang.uuid_v7('10889-08-02 05:31:50.656+00')$$, '22003', NULL,
                 'uuid_v7: 2^48 ms after 1970 raises 22003');
SELECT ok(whizbang.uuid_v7('10889-08-02 05:31:50.655+00')::text LIKE 'ffffffff-ffff-7%',
          'uuid_v7: 2^48 - 1 ms after 1970 (10889-08-02 05:31:50.655 UTC) is the largest timestamp');
SELECT ok(whizbang.uuid_v7('1970-01-01 00:00:00+00')::text LIKE '00000000-0000-7%',
          'uuid_v7: 1970-01-01 is the smallest timestamp');
SELECT ok(whizbang.uuid_v7('2024-01-01 00:00:00+00')::text LIKE '018cc251-f400-7%',
          'uuid_v7: the first 48 bits are the Unix time in milliseconds');

CREATE TEMP TABLE v7 AS
SELECT n, whizbang.uuid_v7() AS u FROM generate_series(1, 10000) AS n;
SELECT is((SELECT count(*) FROM v7 WHERE substr(u::text, 15, 1) = '7'), 10000::bigint,
          'uuid_v7: version nibble is 7');
SELECT is((SELECT count(*) FROM v7 WHERE substr(u::text, 20, 1) IN ('8', '9', 'a', 'b')), 10000::bigint,
          'uuid_v7: variant bits are 10');
SELECT is((SELECT count(*) FROM (SELECT u > lag(u) OVER (ORDER BY n) AS up FROM v7) s WHERE up), 9999::bigint,
          'uuid_v7: 10,000 values of one session are strictly increasing');

CREATE TEMP TABLE v7_same_ms AS
SELECT n, whizbang.uuid_v7('2030-06-01 12:00:00.123+00') AS u FROM generate_series(1, 5000) AS n;
SELECT is((SELECT count(*) FROM (SELECT u > lag(u) OVER (ORDER BY n) AS up FROM v7_same_ms) s WHERE up), 4999::bigint,
          'uuid_v7: 5,000 values of one millisecond are strictly increasing');
SELECT is((SELECT count(DISTINCT left(u::text, 13)) FROM v7_same_ms), 1::bigint,
          'uuid_v7: values of one millisecond share the timestamp bits');

-- Clock jitter (docs/reference.md): a step back of less than 10 s keeps the previous
-- millisecond, so values stay increasing; a step back of 10 s or more is honoured.
CREATE TEMP TABLE v7_steps AS
SELECT n, whizbang.uuid_v7(at) AS u
  FROM (VALUES (1, '2031-01-01 00:00:20+00'::timestamptz), (2, '2031-01-01 00:00:15+00'),
               (3, '2031-01-01 00:00:19.999+00'), (4, '2031-01-01 00:00:05+00')) v(n, at)
 ORDER BY n;
SELECT ok((SELECT u FROM v7_steps WHERE n = 2) > (SELECT u FROM v7_steps WHERE n = 1)
          AND left((SELECT u FROM v7_steps WHERE n = 2)::text, 13) = left((SELECT u FROM v7_steps WHERE n = 1)::text, 13),
          'uuid_v7: a 5 s step back keeps the previous millisecond and stays increasing');
SELECT ok((SELECT u FROM v7_steps WHERE n = 3) > (SELECT u FROM v7_steps WHERE n = 2),
          'uuid_v7: still increasing after the jitter');
SELECT ok((SELECT u FROM v7_steps WHERE n = 4) < (SELECT u FROM v7_steps WHERE n = 3)
          AND (SELECT u FROM v7_steps WHERE n = 4)::text LIKE (SELECT left(whizbang.uuid_v7('2031-01-01 00:00:05+00')::text, 13)) || '%',
          'uuid_v7: a step back of 15 s is honoured (the timestamp asked for)');

-- ---------------------------------------------------------------------------------------
-- partition_of
-- ---------------------------------------------------------------------------------------

-- Fixed vectors: computed independently from the algorithm of docs/reference.md (FNV-1a 64
-- over the 16 bytes, MurmurHash3 fmix64, high 32 bits as a signed integer, floor modulo).
SELECT results_eq(
    $$SELECT whizbang.partition_of(id, n) FROM (VALUES
        (1, '0190a1b2-c3d4-7e5f-8a9b-000000000001'::uuid, 16),
        (2, '0190a1b2-c3d4-7e5f-8a9b-000000000001'::uuid, 2147483647),
        (3, '00000000-0000-0000-0000-000000000000'::uuid, 1000),
        (4, 'ffffffff-ffff-ffff-ffff-ffffffffffff'::uuid, 7),
        (5, '00000000-0000-4000-8000-000000000001'::uuid, 10000),
        (6, '6ba7b811-9dad-11d1-80b4-00c04fd430c8'::uuid, 3)) v(k, id, n) ORDER BY k$$,
    ARRAY[14, 449292046, 638, 0, 7158, 0],
    'partition_of: fixed vectors (the documented example gives 14)');

SELECT throws_ok($$SELECT whizbang.partition_of('00000000-0000-4000-8000-000000000001', 0)$$, '22023', NULL,
                 'partition_of: count 0 raises 22023');
SELECT throws_ok($$SELECT whizbang.partition_of('00000000-0000-4000-8000-000000000001', -1)$$, '22023', NULL,
                 'partition_of: count -1 raises 22023');
SELECT throws_ok($$SELECT whizbang.partition_of('00000000-0000-4000-8000-000000000001', -2147483648)$$, '22023', NULL,
                 'partition_of: count INT_MIN raises 22023');
SELECT is(whizbang.partition_of(NULL, 10), NULL, 'partition_of: NULL stream gives NULL');
SELECT is(whizbang.partition_of('00000000-0000-4000-8000-000000000001', NULL), NULL,
          'partition_of: NULL count gives NULL');
SELECT throws_ok($$SELECT whizbang.partition_of('00000000-0000-4000-8000-000000000001', 2147483648)$$, '42883', NULL,
                 'partition_of: a bigint count does not resolve (42883)');

SELECT is((SELECT count(*) FROM generate_series(1, 2000) i
            WHERE whizbang.partition_of(md5(i::text)::uuid, 1) <> 0), 0::bigint,
          'partition_of: count 1 always gives 0');
SELECT is((SELECT count(*) FROM generate_series(1, 20000) i
            WHERE whizbang.partition_of(md5(i::text)::uuid, 2147483647) NOT BETWEEN 0 AND 2147483646), 0::bigint,
          'partition_of: count INT_MAX gives results in [0, INT_MAX)');
SELECT results_eq(
    $$SELECT min(p), max(p), count(DISTINCT p)
        FROM (SELECT whizbang.partition_of(md5(i::text)::uuid, 7) AS p FROM generate_series(1, 10000) i) s$$,
    $$VALUES (0, 6, 7::bigint)$$,
    'partition_of: count 7 uses exactly [0, 7) over 10,000 ids');
SELECT is((SELECT count(*) FROM generate_series(1, 2000) i
            WHERE whizbang.partition_of(md5(i::text)::uuid, 10000)
                  <> whizbang.partition_of(md5(i::text)::uuid, 10000)), 0::bigint,
          'partition_of: stable for the same input');
SELECT is((SELECT count(*) FROM (VALUES ('00000000-0000-0000-0000-000000000000'::uuid),
                                        ('ffffffff-ffff-ffff-ffff-ffffffffffff'::uuid)) v(id)
            WHERE whizbang.partition_of(id, 2147483647) < 0
               OR whizbang.partition_of(id, 3) NOT BETWEEN 0 AND 2), 0::bigint,
          'partition_of: the all-zero and all-one uuids are in range');

-- ---------------------------------------------------------------------------------------
-- version()
-- ---------------------------------------------------------------------------------------

SELECT is(whizbang.version(),
          (SELECT default_version FROM pg_available_extensions WHERE name = 'whizbang'),
          'version: equals default_version of whizbang.control');
SELECT is(whizbang.version(), (SELECT extversion FROM pg_extension WHERE extname = 'whizbang'),
          'version: equals the installed extension version');
SELECT matches(whizbang.version(), '^[0-9]+\.[0-9]+\.[0-9]+$', 'version: looks like X.Y.Z');

SELECT * FROM finish();
ROLLBACK;
