#!/usr/bin/env bash
# The docs test (issue 30; docs/testing.md, "The docs test"): every ```sql block of README.md and
# docs/*.md run as written, page by page, each page in a fresh database, and the output a page
# shows compared with what psql printed. Once in a throw-away cluster of each lease store: a
# plain one (leases in the work rows) and one with shared_preload_libraries = whizbang (leases in
# shared memory); a page may name the stores it runs on (<!-- docs-test stores: ... -->).
#   bash test/docs/run.sh [PAGE.md...]     (default: README.md docs/*.md)
#   DOCS_LEASE_STORES="table" (or "shared_memory"; else WB_LEASE_STORES) one cluster only
# Prints "ok   PAGE (store)" / "FAIL PAGE (store)" per page and "skip ..." per skipped block;
# exits non-zero when a page failed. Expects whizbang to be installed already (./scripts/test
# does that) and pg_virtualenv, psql and python3 on PATH.
set -uo pipefail

self=$(readlink -f "$0")
cd "$(dirname "$self")/../.."
source scripts/lib.sh  # wb_free_port

pages=("$@")
[ ${#pages[@]} -gt 0 ] || pages=(README.md docs/*.md)
read -r -a stores <<<"${DOCS_LEASE_STORES:-${WB_LEASE_STORES:-table shared_memory}}"

rc=0
for store in "${stores[@]}"; do
  opts=()
  [ "$store" = shared_memory ] && opts=(-o shared_preload_libraries=whizbang)
  # max_prepared_transactions: the pages that show two-phase commit; wal_level: the WAL outbox.
  pg_virtualenv -t -c "-p $(wb_free_port)" -o fsync=off -o max_prepared_transactions=10 -o wal_level=logical "${opts[@]}" \
    bash -c '
      store=$1; shift
      got=$(psql -qXAt -v ON_ERROR_STOP=1 -d postgres -c "CREATE EXTENSION whizbang" -c "SELECT whizbang.lease_store()" \
        -c "DROP EXTENSION whizbang") || exit 1
      if [ "$got" != "$store" ]; then echo "FAIL lease store: expected $store, the cluster runs $got"; exit 1; fi
      exec python3 test/docs/run_docs.py --store "$store" "$@"' _ "$store" "${pages[@]}" || rc=1
done
exit $rc
