# shellcheck shell=bash
# Shared by the script tests (test/scripts/*.sh): source it; do not run it.
#   check "description" "SQL returning true/false"   one check against the PG* database
#   check_eq "description" expected actual
#   FAILED                                            how many checks failed so far
#   wb_python                                         sets PY to a python3 that has psycopg2
#   stop_pids_and_remove DIR                          stops what is still running of the pids
#                                                     array and removes DIR (an EXIT trap)
#   summary FILES KEY...                              totals from the examples' JSON count lines
#   in_each_lease_store VAR CMD...                    CMD in a throw-away cluster of each lease store
#   check_lease_store                                 the cluster runs the store it was started for
FAILED=0
check() {
  local got
  got=$(psql -qXtA -v ON_ERROR_STOP=1 -c "$2" 2>&1) || true
  if [ "$got" = "t" ]; then echo "ok   $1"; else echo "FAIL $1 (got: $got)"; FAILED=$((FAILED + 1)); fi
}
check_eq() {
  if [ "$2" = "$3" ]; then echo "ok   $1"; else echo "FAIL $1 (expected: $2, got: $3)"; FAILED=$((FAILED + 1)); fi
}
wb_python() {
  local candidate
  PY=""
  for candidate in /usr/bin/python3 python3; do
    if command -v "$candidate" >/dev/null && "$candidate" -c 'import psycopg2' 2>/dev/null; then PY=$candidate; return 0; fi
  done
  echo "no python3 with psycopg2 found (Debian: python3-psycopg2)"
  return 1
}
stop_pids_and_remove() {
  local p
  for p in "${pids[@]}"; do
    if kill -0 "$p" 2>/dev/null; then kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; fi
  done
  rm -rf "$1"
}

# summary FILES KEY... (after wb_python): "key=value ..." from the last JSON line of each file
# (a comma-separated list), numbers summed over the files; a dotted key reads a nested object.
summary() {
  "$PY" - "$@" <<'PY'
import json, sys
paths, keys = sys.argv[1].split(","), sys.argv[2:]
total = dict.fromkeys(keys, 0)
for path in paths:
    lines = [l for l in open(path) if l.strip().startswith("{")]
    d = json.loads(lines[-1]) if lines else {}
    for k in keys:
        v = d
        for part in k.split("."):
            v = v.get(part, 0) if isinstance(v, dict) else 0
        total[k] += v
print(" ".join("%s=%s" % (k, total[k]) for k in keys))
PY
}

# in_each_lease_store VAR CMD... (outside a cluster; needs scripts/lib.sh): runs CMD in a
# throw-away cluster of each lease store (issue 11, DESIGN §3.8): a plain one ("table": leases in
# the work rows) and one with shared_preload_libraries = whizbang ("shared_memory"). Only the
# stores named in the environment variable VAR run, or else those in WB_LEASE_STORES (as for
# ./scripts/test's isolation and pgTAP runs). CMD finds its store in WB_LEASE_STORE. Prints a
# header per cluster; fails when a run failed.
in_each_lease_store() {
  local var=$1 store status=0 opts
  shift
  for store in ${!var:-${WB_LEASE_STORES:-table shared_memory}}; do
    opts=(-o fsync=off)
    [ "$store" = table ] || opts+=(-o shared_preload_libraries=whizbang)
    echo "=== cluster for the $store lease store (${opts[*]})"
    WB_LEASE_STORE=$store pg_virtualenv -t -c "-p $(wb_free_port)" "${opts[@]}" "$@" || status=1
  done
  return "$status"
}
# check_lease_store (inside a cluster of in_each_lease_store, whizbang created): the server
# runs the lease store the cluster was started for.
check_lease_store() {
  check_eq "the cluster runs the ${WB_LEASE_STORE:-table} lease store" "${WB_LEASE_STORE:-table}" \
    "$(psql -qXtA -c "SELECT whizbang.lease_store()" 2>&1)"
}
