# Shared set-up for scripts/demo, scripts/test and bench/run. Source it; do not run it.
# Everything a fresh Debian 12 machine lacks is installed here, so CI needs nothing else.

WB_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WB_PG_MAJOR=15
WB_PACKAGES=(
  build-essential g++ make cmake pkg-config
  "postgresql-$WB_PG_MAJOR" "postgresql-server-dev-$WB_PG_MAJOR" postgresql-common
  "postgresql-$WB_PG_MAJOR-pgtap" libtap-parser-sourcehandler-pgtap-perl
  libpq-dev libgtest-dev libbenchmark-dev python3 python3-psycopg2
)
# What only the test suites use (scripts/test sets WB_WITH_TEST_PACKAGES=1): the demo and the
# benchmarks do not install a pooler, node or an exporter on a user's machine.
WB_TEST_PACKAGES=(
  clang libclang-rt-dev  # libFuzzer for the fuzz targets (scripts/fuzz)
  pgbouncer  # test/scripts/pgbouncer.sh: the examples and pgbench through transaction pooling
  nodejs npm  # test/scripts/node_worker.sh: examples/node/inbox_worker.js (pg from npm)
  "postgresql-$WB_PG_MAJOR-cron"  # test/scripts/pg_cron.sh: pg_cron scheduling CALL whizbang.run_maintenance()
  prometheus-postgres-exporter  # test/scripts/prometheus_exporter.sh: contrib/prometheus/whizbang_queries.yaml
)

wb_log() { printf '==> %s\n' "$*" >&2; }

# Runs a command as root: directly when we are root, else through sudo.
wb_as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# Installed packages and the names they provide, one a line. A package counts as present when
# another provides it: NodeSource's nodejs provides npm and conflicts with Debian's npm package,
# which apt-get would then refuse to install.
wb_installed_packages() {
  dpkg-query -W -f='${Status}\t${Package}, ${Provides}\n' 2>/dev/null |
    awk -F'\t' '$1 ~ /install ok installed/ { print $2 }' | tr ',' '\n' | sed -E 's/^ +//; s/ .*//' | sort -u
}

wb_ensure_packages() {
  local missing=() p installed
  installed=$(wb_installed_packages)
  local wanted=("${WB_PACKAGES[@]}")
  [ "${WB_WITH_TEST_PACKAGES:-0}" = 1 ] && wanted+=("${WB_TEST_PACKAGES[@]}")
  for p in "${wanted[@]}"; do
    grep -qxF -- "$p" <<<"$installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  wb_log "installing Debian packages: ${missing[*]}"
  wb_as_root apt-get update -qq
  wb_as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

wb_pg_config() { echo "/usr/lib/postgresql/$WB_PG_MAJOR/bin/pg_config"; }

# Builds whizbang.so and installs it into the local PostgreSQL (needs root for the install).
wb_build_install() {
  wb_log "building and installing whizbang"
  make -C "$WB_ROOT" -s -j"$(nproc)" PG_CONFIG="$(wb_pg_config)" >/dev/null
  wb_as_root make -C "$WB_ROOT" -s install PG_CONFIG="$(wb_pg_config)" >/dev/null
}

wb_setup() {
  wb_ensure_packages
  wb_build_install
}

# A port no other cluster on this machine uses, for pg_virtualenv -c "-p PORT": several test
# runs may share a machine, and pg_virtualenv alone would always pick 5432.
wb_free_port() {
  local p
  for _ in $(seq 1 100); do
    p=$((20000 + RANDOM % 20000))
    if [ -z "$(ss -Hltn "sport = :$p" 2>/dev/null)" ] && [ ! -e "/var/run/postgresql/.s.PGSQL.$p" ]; then
      echo "$p"
      return
    fi
  done
  echo 5432
}
