# Shared set-up for scripts/demo, scripts/test and bench/run. Source it; do not run it.
# Everything a fresh Debian 12 machine lacks is installed here, so CI needs nothing else.

WB_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WB_PG_MAJOR=15
WB_PACKAGES=(
  build-essential g++ make cmake pkg-config
  "postgresql-$WB_PG_MAJOR" "postgresql-server-dev-$WB_PG_MAJOR" postgresql-common
  "postgresql-$WB_PG_MAJOR-pgtap" libtap-parser-sourcehandler-pgtap-perl
  libpq-dev libgtest-dev libbenchmark-dev python3 python3-psycopg2
  libcurl4-openssl-dev librabbitmq-dev  # whizbang-relay's HTTP and RabbitMQ sinks (src/relay/sinks.mk)
)
# What only the test suites use (scripts/test sets WB_WITH_TEST_PACKAGES=1): the demo and the
# benchmarks do not install a pooler, node or an exporter on a user's machine.
WB_TEST_PACKAGES=(
  clang libclang-rt-dev  # libFuzzer for the fuzz targets (scripts/fuzz)
  pgbouncer  # test/scripts/pgbouncer.sh: the examples and pgbench through transaction pooling
  nodejs npm  # test/scripts/node_worker.sh: examples/node/inbox_worker.js (pg from npm)
  "postgresql-$WB_PG_MAJOR-cron"  # test/scripts/pg_cron.sh: pg_cron scheduling CALL whizbang.run_maintenance()
  prometheus-postgres-exporter  # test/scripts/prometheus_exporter.sh: contrib/prometheus/whizbang_queries.yaml
  rabbitmq-server python3-pika  # test/scripts/relay_rabbitmq.sh, relay_e2e.sh: a throw-away broker, its queues set up, read and consumed
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

# Builds whizbang against pg_config $1 and installs it there. Debian's 15 builds in the
# checkout (wb_build_install); another major in build/pg<major>/, a copy of the sources kept
# between runs, so that one major's objects are never linked into another's library.
wb_build_install_with() {
  local pgc=$1 major dir
  if [ "$pgc" = "$(wb_pg_config)" ]; then wb_build_install; return; fi
  major=$("$pgc" --version | sed -E 's/^PostgreSQL ([0-9]+).*/\1/')
  dir="$WB_ROOT/build/pg$major"
  wb_log "building and installing whizbang for PostgreSQL $major ($dir)"
  mkdir -p "$dir" || return 1
  # Sources removed from the checkout must not stay in the copy (the Makefile globs them).
  find "$dir" \( -name '*.cpp' -o -name '*.h' -o -name '*.sql' -o -name '*.md' \) -delete
  # No build output of the checkout (15's objects) comes along; tar keeps the times, so make
  # rebuilds only what changed since the last run.
  tar -C "$WB_ROOT" -cf - --exclude='*.o' --exclude='*.d' --exclude='*.so' --exclude='*.bc' \
    Makefile whizbang.control README.md src sql docs | tar -C "$dir" -xf - &&
    make -C "$dir" -s -j"$(nproc)" PG_CONFIG="$pgc" >/dev/null || return 1
  # A build in the cache belongs to whoever built it; a packaged major needs root.
  if [ -w "$("$pgc" --pkglibdir)" ]; then
    make -C "$dir" -s install PG_CONFIG="$pgc" >/dev/null
  else
    wb_as_root make -C "$dir" -s install PG_CONFIG="$pgc" >/dev/null
  fi
}

# Citus for the scale-out suite (test/citus, issue 14). Debian has no package: when citus.so is
# missing, it is built from the upstream source archive and patch in $WB_CITUS_SOURCE (default:
# ../shared/vendor/citus beside the checkout; its README says how) and installed. Returns 1,
# with the reason on stderr, where neither Citus nor its source is present.
WB_CITUS_PACKAGES=(liblz4-dev libzstd-dev libkrb5-dev)
# Installs the packages "$@", a set of their own (not those of WB_PACKAGES).
wb_ensure_package_set() {
  local saved=("${WB_PACKAGES[@]}") rc
  WB_PACKAGES=("$@")
  WB_WITH_TEST_PACKAGES=0 wb_ensure_packages; rc=$?
  WB_PACKAGES=("${saved[@]}")
  return "$rc"
}
wb_citus_packages() { wb_ensure_package_set "${WB_CITUS_PACKAGES[@]}"; }
wb_ensure_citus() {
  local pgc=${1:-$(wb_pg_config)} pkglib src tarball build
  pkglib=$("$pgc" --pkglibdir)
  [ -f "$pkglib/citus.so" ] && return 0
  src=${WB_CITUS_SOURCE:-$WB_ROOT/../shared/vendor/citus}
  tarball=$(ls "$src"/citus-*.tar.gz 2>/dev/null | head -1)
  if [ -z "$tarball" ]; then
    echo "Citus is not installed and no Citus source archive is in $src (set WB_CITUS_SOURCE)" >&2
    return 1
  fi
  wb_citus_packages || return 1
  build=$(mktemp -d /tmp/whizbang-citus-build.XXXXXX)
  wb_log "building Citus from $tarball for $("$pgc" --version) (a few minutes)"
  (
    set -e
    cd "$build"
    tar xzf "$tarball"
    cd "$(ls -d citus-*/ | head -1)"
    for p in "$src"/*.patch; do [ -f "$p" ] && patch -s -p1 <"$p"; done
    ./configure -q --without-libcurl PG_CONFIG="$pgc" >/dev/null
    make -s -j"$(nproc)" >/dev/null 2>&1
    if [ -w "$pkglib" ]; then make -s install >/dev/null; else wb_as_root make -s install >/dev/null; fi
  ) >"$build.log" 2>&1 || { echo "building Citus failed; log: $build.log" >&2; return 1; }
  rm -rf "$build"
  [ -f "$pkglib/citus.so" ]
}

# PostgreSQL 16, 17 and 18 for the version matrix (issue 21). Debian 12 packages 15 only: the
# others are built once per machine from the unmodified upstream archives in $WB_PG_SOURCE
# (default ../shared/vendor/postgresql beside the checkout), each into a prefix of its own in a
# cache outside the checkout, named by the archive's sha256 (a changed archive is a new build).
# With the server come pg_regress, the isolation tester and pgTAP (pure SQL: Debian's
# postgresql-15-pgtap files, whose install script is the same for every major from 15 on).
WB_PG_MATRIX=(16 17 18)
WB_PG_BUILD_PACKAGES=(bison flex zlib1g-dev pkgconf bzip2)
wb_pg_source() { echo "${WB_PG_SOURCE:-$WB_ROOT/../shared/vendor/postgresql}"; }
wb_pg_cache() {
  if [ -n "${WB_PG_CACHE:-}" ]; then echo "$WB_PG_CACHE"
  elif [ "$(id -u)" -eq 0 ]; then echo /var/cache/whizbang
  else echo "${XDG_CACHE_HOME:-$HOME/.cache}/whizbang"; fi
}
# The source archive of major $1 (newest minor), or nothing.
wb_pg_archive() {
  local f
  f=$(ls "$(wb_pg_source)"/postgresql-"$1".*.tar.* 2>/dev/null | sort -V | tail -1)
  [ -n "$f" ] && echo "$f"
}
# The prefix major $1 is (or will be) built into: <cache>/postgresql-<version>-<sha256 prefix>.
wb_pg_prefix() {
  local archive sum version
  archive=$(wb_pg_archive "$1") || return 1
  sum=$(sha256sum "$archive" | cut -c1-16)
  version=$(basename "$archive" | sed -E 's/^postgresql-([0-9.]+)\.tar\..*/\1/')
  echo "$(wb_pg_cache)/postgresql-$version-$sum"
}
# pg_config of major $1: Debian's for 15 (and for any major Debian has installed), else that of
# the build in the cache, built first when missing. Fails, saying why on stderr, when major $1
# is neither installed nor has a source archive.
wb_pg_config_of() {
  local major=$1 prefix
  if [ -x "/usr/lib/postgresql/$major/bin/pg_config" ]; then
    echo "/usr/lib/postgresql/$major/bin/pg_config"; return 0
  fi
  if ! prefix=$(wb_pg_prefix "$major"); then
    echo "no source archive of PostgreSQL $major in $(wb_pg_source) (set WB_PG_SOURCE)" >&2
    return 1
  fi
  [ -f "$prefix/.whizbang-built" ] || wb_pg_build "$major" "$prefix" >&2 || return 1
  local tap
  for tap in /usr/share/postgresql/15/extension/pgtap*; do
    [ -f "$tap" ] && [ ! -f "$prefix/share/extension/$(basename "$tap")" ] && install -m 644 "$tap" "$prefix/share/extension/"
  done
  echo "$prefix/bin/pg_config"
}
# The Debian packages a PostgreSQL build needs (a no-op once they are there).
wb_pg_build_packages() { wb_ensure_package_set "${WB_PG_BUILD_PACKAGES[@]}"; }
# Whether major $1 still has to be built (it has an archive and no finished build).
wb_pg_needs_build() {
  local prefix
  [ ! -x "/usr/lib/postgresql/$1/bin/pg_config" ] && prefix=$(wb_pg_prefix "$1") && [ ! -f "$prefix/.whizbang-built" ]
}
wb_pg_build() {
  local major=$1 prefix=$2 archive build log
  archive=$(wb_pg_archive "$major")
  wb_pg_build_packages || return 1
  mkdir -p "$(wb_pg_cache)" && chmod 755 "$(wb_pg_cache)" || return 1
  rm -rf "$prefix"
  build=$(mktemp -d /tmp/whizbang-pg-build.XXXXXX)
  log="$(wb_pg_cache)/build-$(basename "$prefix").log"
  wb_log "building PostgreSQL $major from $archive into $prefix (about 5 minutes; log: $log)"
  (
    set -e
    cd "$build"
    tar xf "$archive"
    cd postgresql-*/
    # No ICU and no readline: nothing whizbang tests needs them, and fewer packages to install.
    ./configure --prefix="$prefix" --without-icu --without-readline
    make -s -j"$(nproc)"
    make -s install
    make -s -C src/test/isolation install
    touch "$prefix/.whizbang-built"
  ) >"$log" 2>&1 || { echo "building PostgreSQL $major failed; log: $log" >&2; rm -rf "$build"; return 1; }
  rm -rf "$build"
  chmod -R a+rX "$prefix"
}

wb_setup() {
  wb_ensure_packages
  wb_build_install
}

# A port no other cluster on this machine uses, for pg_virtualenv -c "-p PORT": several test
# runs may share a machine, and pg_virtualenv alone would always pick 5432. Taken below the
# kernel's ephemeral range (net.ipv4.ip_local_port_range, 32768+ by default): a port there can be
# handed to any outgoing connection between this check and the server's bind, which once made the
# exporter test fail with "address already in use". Any socket state counts, not only listeners.
wb_free_port() {
  local p low=20000 high=32767 start
  start=$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || true)
  if [ -n "$start" ] && [ "$start" -gt $((low + 1000)) ] && [ "$start" -le "$high" ]; then
    high=$((start - 1))
  fi
  for _ in $(seq 1 100); do
    p=$((low + RANDOM % (high - low + 1)))
    if [ -z "$(ss -Htan "( sport = :$p )" 2>/dev/null)" ] && [ ! -e "/var/run/postgresql/.s.PGSQL.$p" ]; then
      echo "$p"
      return
    fi
  done
  echo 5432
}
