-- whizbang.distribute() and the distribution column (0.8.0, issue 14, DESIGN §3.9) on a server
-- without Citus: the arguments are checked first (22004, 22023), then Citus is asked for
-- (55000), and nothing is changed; the partition_number columns of the message companions are
-- nullable and stay NULL on a single server, while the message rows carry their partition
-- (claim_work's p_partitions, since 0.14.0 in the row that holds the work state), and the keys
-- are the single server's (message_id, consumer). What distribute()
-- does on a cluster is test/citus/distribute.sh's.
SET client_min_messages = warning;
BEGIN;
SELECT plan(12);

SELECT throws_ok($$SELECT whizbang.distribute(NULL)$$, '22004', NULL, 'distribute(NULL): 22004');
SELECT throws_ok($$SELECT whizbang.distribute(0)$$, '22023', NULL, 'distribute(0): 22023');
SELECT throws_ok($$SELECT whizbang.distribute(64001)$$, '22023', NULL, 'distribute(64001): 22023');
SELECT throws_ok($$SELECT whizbang.distribute()$$, '55000',
                 'whizbang.distribute() needs the citus extension in this database',
                 'distribute() without Citus: 55000, with what it needs');
SELECT is((SELECT count(*)::int FROM information_schema.columns
            WHERE table_schema = 'whizbang' AND column_name = 'partition_number' AND data_type = 'integer'),
          9, 'the eight tables of a message and the routing anchor wh_partitions carry partition_number');
SELECT is((SELECT count(*)::int FROM information_schema.columns
            WHERE table_schema = 'whizbang' AND column_name = 'partition_number' AND is_nullable = 'YES'),
          6, 'the companions'' columns are nullable (the message rows'' have been NOT NULL since 0.14.0, the work rows'' before)');

SELECT whizbang.dedup_insert('01900000-0000-7000-8000-000000000d01', 'pgtap');
SELECT count(*) FROM whizbang.inbox_receive(
    '[{"MessageId": "01900000-0000-7000-8000-000000000d02", "HandlerName": "h", "MessageType": "t",
       "Envelope": {}, "StreamId": "01900000-0000-7000-8000-000000000d0f"}]', 'pgtap');
SELECT count(*) FROM whizbang.store_outbox_messages(
    '[{"MessageId": "01900000-0000-7000-8000-000000000d03", "Destination": "d", "MessageType": "t", "Envelope": {},
       "StreamId": "01900000-0000-7000-8000-000000000d0f"}]');
SELECT is((SELECT count(*)::int FROM whizbang.wh_message_deduplication
            WHERE consumer = 'pgtap' AND partition_number IS NULL), 2,
          'a single server leaves partition_number NULL in the dedup records');
SELECT is((SELECT partition_number FROM whizbang.wh_inbox WHERE message_id = '01900000-0000-7000-8000-000000000d02'),
          whizbang.partition_of('01900000-0000-7000-8000-000000000d0f', 10000), 'the inbox message carries its stream''s partition');
SELECT is((SELECT partition_number FROM whizbang.wh_inbox_streams WHERE consumer = 'pgtap'), NULL, '... in the stream counter');
SELECT is((SELECT partition_number FROM whizbang.wh_outbox WHERE message_id = '01900000-0000-7000-8000-000000000d03'),
          whizbang.partition_of('01900000-0000-7000-8000-000000000d0f', 10000), '... and the outbox message');
SELECT is((SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conname = 'wh_inbox_pkey'),
          'PRIMARY KEY (message_id, consumer)', 'the single server keeps its keys');
SELECT is((SELECT count(*)::int FROM pg_trigger t WHERE t.tgrelid = 'whizbang.wh_inbox'::regclass AND NOT t.tgisinternal),
          2, 'and its lease triggers (distribute() drops them)');

SELECT * FROM finish();
ROLLBACK;
