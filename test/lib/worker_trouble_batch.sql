-- The worker tests' trouble batch (test/scripts/inbox_worker_example.sh, node_worker.sh), read
-- with \i from the repository root after s1 and s2 are set to the streams of acct-1 and acct-2:
-- in acct-1's stream a failing message (seq 100) and one after it (seq 101); a message with no
-- handler; a slow message (3 s, longer than the workers' 2 s lease) in acct-2's stream, and seq 201.
SELECT count(*) FROM whizbang.store_inbox_messages(jsonb_build_array(
  jsonb_build_object('MessageId', 'f0000000-0000-7000-8000-000000000100', 'StreamId', :'s1',
                     'HandlerName', 'ledger.post', 'MessageType', 'LedgerEntryRequested',
                     'Envelope', '{"account": "acct-1", "seq": 100, "amount": 0, "fail": true}'::jsonb),
  jsonb_build_object('MessageId', 'f0000000-0000-7000-8000-000000000101', 'StreamId', :'s1',
                     'HandlerName', 'ledger.post', 'MessageType', 'LedgerEntryRequested',
                     'Envelope', '{"account": "acct-1", "seq": 101, "amount": 101}'::jsonb),
  jsonb_build_object('MessageId', 'f0000000-0000-7000-8000-000000000102',
                     'HandlerName', 'no.such.handler', 'MessageType', 'Unknown', 'Envelope', '{}'::jsonb),
  jsonb_build_object('MessageId', 'f0000000-0000-7000-8000-000000000200', 'StreamId', :'s2',
                     'HandlerName', 'ledger.post', 'MessageType', 'LedgerEntryRequested',
                     'Envelope', '{"account": "acct-2", "seq": 200, "amount": 200, "sleep": 3}'::jsonb),
  jsonb_build_object('MessageId', 'f0000000-0000-7000-8000-000000000201', 'StreamId', :'s2',
                     'HandlerName', 'ledger.post', 'MessageType', 'LedgerEntryRequested',
                     'Envelope', '{"account": "acct-2", "seq": 201, "amount": 201}'::jsonb)));
