#!/usr/bin/env bash
# Errors that lead somewhere (issue 30 item 13), as a client sees them (psql's ERROR, DETAIL,
# HINT, CONTEXT and NOTICE lines), with whizbang in shared_preload_libraries:
#   - a role without USAGE on schema whizbang gets PostgreSQL's "permission denied for schema
#     whizbang" with a hint naming grant_worker / grant_admin (the library's emit_log_hook: the
#     error is raised before any whizbang code runs);
#   - an inbox-only role that calls outbox work, or an idempotency role missing one grant (a
#     statement the entry's check does not cover), gets 42501 with a hint and without
#     whizbang's internal SQL in CONTEXT, and a PL/pgSQL caller's own context is kept;
#   - complete_work (and the other outcome calls) answer not_found for an id that has work under
#     another consumer, with a NOTICE that names that consumer.
# (The 40001 wording under REPEATABLE READ: test/isolation/specs/dedup_repeatable_read_recorded.spec.)
set -euo pipefail

self=$(readlink -f "$0")
cd "$(dirname "$self")/../.."

source scripts/lib.sh  # wb_free_port
source test/lib/checks.sh

if [ "${1:-}" != "--in-cluster" ]; then
    exec pg_virtualenv -t -c "-p $(wb_free_port)" -o fsync=off -o shared_preload_libraries=whizbang \
        bash "$self" --in-cluster
fi

psql -X -q -v ON_ERROR_STOP=1 -c "CREATE EXTENSION whizbang" \
    -c "CREATE ROLE wb_nobody NOLOGIN; CREATE ROLE wb_inbox NOLOGIN; CREATE ROLE wb_idem NOLOGIN" \
    -c "SELECT count(*) FROM whizbang.grant_worker('wb_inbox', ARRAY['inbox'])" \
    -c "SELECT count(*) FROM whizbang.grant_worker('wb_idem', ARRAY['idempotency'])" \
    -c "REVOKE SELECT ON whizbang.wh_idempotency_policies FROM wb_idem" >/dev/null

# What psql prints for `sql` run as `role` (stderr too), verbosity default.
as() { psql -X -q -A -t -c "SET ROLE $1" -c "$2" 2>&1 || true; }
has() { grep -q -- "$2" <<<"$1" && echo yes || echo no; }

out=$(as wb_nobody "SELECT whizbang.version()")
check_eq "no USAGE: PostgreSQL's error" yes "$(has "$out" 'ERROR:  permission denied for schema whizbang')"
check_eq "no USAGE: a hint names grant_worker and grant_admin" yes "$(has "$out" "HINT:  .*whizbang.grant_worker('role', ARRAY\['inbox'\]).*grant_admin")"
out=$(as wb_nobody "SELECT * FROM whizbang_other.x()")
check_eq "another schema's error gets no whizbang hint" no "$(has "$out" 'HINT:  .*grant_worker')"

out=$(as wb_inbox "SELECT * FROM whizbang.claim_work('0c0c0c0c-0000-4000-8000-0000000000a1', 'outbox')")
check_eq "inbox role claims the outbox: 42501 on the outbox tables" yes "$(has "$out" 'ERROR:  permission denied for table wh_outbox')"
check_eq "inbox role claims the outbox: the detail names the function and the privilege" yes "$(has "$out" 'DETAIL:  whizbang.claim_work needs .* on whizbang.wh_outbox')"
check_eq "inbox role claims the outbox: the hint is the relay's grant" yes "$(has "$out" "HINT:  .*grant_worker('wb_inbox', ARRAY\['relay'\])")"
check_eq "inbox role claims the outbox: no internal SQL in CONTEXT" no "$(has "$out" 'CONTEXT')"
out=$(as wb_inbox "SELECT * FROM whizbang.complete_work('outbox', ARRAY['0c0c0c0c-0000-4000-8000-0000000000a2']::uuid[])")
check_eq "inbox role completes outbox work: 42501" yes "$(has "$out" 'ERROR:  permission denied for table wh_outbox')"
check_eq "inbox role completes outbox work: no internal SQL in CONTEXT" no "$(has "$out" 'SQL statement')"

out=$(as wb_idem "SELECT * FROM whizbang.idempotency_begin('s', 'k')")
check_eq "a statement's own 42501 (idempotency role without the policies grant)" yes "$(has "$out" 'ERROR:  permission denied for table wh_idempotency_policies')"
check_eq "... without whizbang's internal SQL in CONTEXT" no "$(has "$out" 'CONTEXT')"
check_eq "... with a hint" yes "$(has "$out" 'HINT:  whizbang runs its statements as the calling role')"
out=$(as wb_idem "DO \$\$ BEGIN PERFORM whizbang.idempotency_begin('s', 'k'); END \$\$")
check_eq "... a PL/pgSQL caller's own context is kept" yes "$(has "$out" 'PL/pgSQL function inline_code_block')"
check_eq "... and still no internal SQL" no "$(has "$out" 'wh_idempotency_policies p\|FROM whizbang.wh_')"

psql -X -q -v ON_ERROR_STOP=1 -c "SELECT count(*) FROM whizbang.inbox_receive('[{\"MessageId\": \"0c0c0c0c-0000-4000-8000-0000000000b1\", \"HandlerName\": \"h\", \"MessageType\": \"t\", \"Envelope\": {}}]'::jsonb, 'billing')" >/dev/null
out=$(psql -X -q -A -t -c "SELECT outcome FROM whizbang.complete_work('inbox', ARRAY['0c0c0c0c-0000-4000-8000-0000000000b1']::uuid[])" 2>&1)
check_eq "complete_work without p_consumer: the outcome stays not_found" yes "$(has "$out" '^not_found$')"
check_eq "... a NOTICE says the message has work for consumer 'billing'" yes "$(has "$out" "NOTICE:  whizbang.complete_work: message 0c0c0c0c-0000-4000-8000-0000000000b1 is not_found for consumer '': it has work for consumer 'billing'")"
check_eq "... and the hint passes it" yes "$(has "$out" "HINT:  Pass the consumer the message was stored for: p_consumer => 'billing'.")"
out=$(psql -X -q -A -t -c "SELECT outcome FROM whizbang.complete_work('inbox', ARRAY['0c0c0c0c-0000-4000-8000-0000000000b9']::uuid[])" 2>&1)
check_eq "an id with no work anywhere: not_found without a NOTICE" no "$(has "$out" 'NOTICE')"
out=$(psql -X -q -A -t -c "SELECT outcome FROM whizbang.fail_work('inbox', ARRAY['0c0c0c0c-0000-4000-8000-0000000000b1']::uuid[], ARRAY['e'], p_consumer => 'shipping')" 2>&1)
check_eq "fail_work with another consumer: the NOTICE too" yes "$(has "$out" "NOTICE:  whizbang.fail_work: .* it has work for consumer 'billing'")"
check "the message is still there, unfinished" \
  "SELECT count(*) = 1 FROM whizbang.wh_inbox WHERE message_id = '0c0c0c0c-0000-4000-8000-0000000000b1' AND consumer = 'billing'"

echo "$FAILED failed"
[ "$FAILED" -eq 0 ]
