#!/usr/bin/env bash
# The PGXN distribution and the install layout (issue 13 item 3), without a cluster:
#   - `make dist` writes whizbang-<version>.zip (<version>: HEAD's default_version), every entry
#     under whizbang-<version>/, with META.json, the control file, the Makefile, the sources,
#     the install script, pg_regress inputs and outputs, tests and docs; no build output
#     (objects, whizbang.so, build/, results/), no benchmark output (bench/results), nothing
#     untracked; the META.json inside passes meta_version.sh's checks against the control file
#     inside, and the unpacked tree's Makefile runs without git;
#   - `make install` puts the docs into a folder of their own (extension/whizbang/, README.md
#     and docs/*.md), and nothing called README.md into the folder all extensions share; and
#     whizbang-relay into PostgreSQL's bindir;
#   - the Makefile stops with a clear message on a server major other than 15.
# Exits non-zero on failure.
set -euo pipefail

self=$(readlink -f "$0")
cd "$(dirname "$self")/../.."
source scripts/lib.sh  # wb_pg_config
source test/lib/checks.sh  # check_eq, FAILED

tmp=$(mktemp -d /tmp/whizbang-dist.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
mk() { make -s --no-print-directory PG_CONFIG="$(wb_pg_config)" "$@"; }

# --- make dist ---
version=$(git show HEAD:whizbang.control | sed -n "s/^default_version = '\(.*\)'/\1/p")
zip="whizbang-$version.zip"
rm -f "$zip"
mk dist
mv "$zip" "$tmp/"
echo "made $zip ($(stat -c %s "$tmp/$zip") bytes)"
git ls-tree -r --name-only HEAD >"$tmp/tracked"

python3 - "$tmp/$zip" "$version" "$tmp/tracked" <<'PY' || FAILED=$((FAILED + 1))
import fnmatch
import re
import sys
import zipfile

path, version, tracked_list = sys.argv[1:]
top = f"whizbang-{version}/"
failures = []

def check(ok, message):
    print(("ok   " if ok else "FAIL ") + message)
    if not ok:
        failures.append(message)

with zipfile.ZipFile(path) as z:
    names = z.namelist()
    files = [n[len(top):] for n in names if n.startswith(top) and not n.endswith("/")]
    outside = [n for n in names if not n.startswith(top)]
    check(not outside, f"every entry is under {top} ({outside[:3]})")
    control = z.read(top + "whizbang.control").decode() if top + "whizbang.control" in names else ""
    meta_in_zip = top + "META.json" in names

check(meta_in_zip, f"{top}META.json is in the archive")
control_version = re.search(r"^default_version = '([^']*)'", control, re.M)
check(bool(control_version) and control_version.group(1) == version,
      f"the control file inside says default_version = '{version}'")

for required in ("Makefile", "whizbang.control", "README.md", f"sql/whizbang--{version}.sql",
                 "src/pg/module.cpp", "src/pg/boundary/bridge.h", "docs/reference.md", "CMakeLists.txt"):
    check(required in files, f"ships {required}")
for folder in ("sql/", "expected/", "test/pgtap/", "test/isolation/", "test/unit/", "test/scripts/"):
    check(any(f.startswith(folder) for f in files), f"ships {folder}")

# Build output, benchmark output, the repository's plumbing: none of it.
excluded = ["*.o", "*.so", "*.bc", "*.d", "build/*", "results/*", "*/results/*", "regression.*",
            "tmp_check/*", "log/*", "output_iso/*", "bench/results/*", "bench/driver",
            "whizbang-*.zip", ".ci/*", ".gitignore", ".gitattributes", "__pycache__/*", "*/__pycache__/*"]
shipped_excluded = [f for f in files if any(fnmatch.fnmatch(f, p) for p in excluded)]
check(not shipped_excluded, f"no build, benchmark or repository-plumbing files ({shipped_excluded[:5]})")
tracked = set(open(tracked_list).read().split("\n"))
untracked = [f for f in files if f not in tracked]
check(not untracked, f"nothing that git does not track ({untracked[:5]})")
print(f"{len(files)} files in the archive")
sys.exit(1 if failures else 0)
PY

# The archive's META.json against the archive's control file (meta_version.sh's checks).
python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$tmp/$zip" "$tmp/unpacked"
bash test/scripts/meta_version.sh --meta-only "$tmp/unpacked/whizbang-$version" || FAILED=$((FAILED + 1))
# A PGXN client unpacks and runs make without git: the Makefile must not need it.
if (cd "$tmp/unpacked/whizbang-$version" && make -n PG_CONFIG="$(wb_pg_config)" >"$tmp/make-n.log" 2>&1); then
  echo "ok   the unpacked tree's Makefile runs (make -n) outside a git repository"
else
  echo "FAIL the unpacked tree's Makefile does not run:"; cat "$tmp/make-n.log"; FAILED=$((FAILED + 1))
fi

# --- the docs' install layout ---
install_cmds=$(mk -n install DESTDIR=/DESTDIR)
shared_readme=$(grep -cE "install .*README\.md '/DESTDIR[^']*/extension/'" <<<"$install_cmds" || true)
check_eq "make install puts no README.md into the shared extension doc folder" "0" "$shared_readme"
mk install-docs DESTDIR="$tmp/root"
docfolder=$(find "$tmp/root" -type d -path '*/extension/whizbang' | head -n 1)
check_eq "the docs go into extension/whizbang/ (${docfolder#"$tmp/root"})" \
  "README.md docs/reference.md" \
  "$(cd "${docfolder:-/nonexistent}" 2>/dev/null && ls README.md docs/reference.md 2>/dev/null | tr '\n' ' ' | sed 's/ $//')"
check_eq "beside nothing else: the shared folder holds only whizbang/" "whizbang" "$(ls "$docfolder/.." 2>/dev/null)"
check_eq "every docs/*.md is installed" "$(ls docs/*.md | wc -l)" "$(ls "$docfolder"/docs/*.md 2>/dev/null | wc -l)"
check_eq "make install runs install-docs (it installs README.md into extension/whizbang/)" "1" \
  "$(grep -cE "install .*README\.md '/DESTDIR[^']*/extension/whizbang/'" <<<"$install_cmds" || true)"
check_eq "make install installs whizbang-relay into PostgreSQL's bindir" "1" \
  "$(grep -cF "build/relay/whizbang-relay '/DESTDIR$("$(wb_pg_config)" --bindir)/whizbang-relay'" <<<"$install_cmds" || true)"
mk uninstall-docs DESTDIR="$tmp/root"
check_eq "make uninstall removes them" "" "$(find "$tmp/root" -path '*/extension/whizbang*' 2>/dev/null)"

# --- an unsupported server ---
# MAJORVERSION comes from the server's PGXS; set on the command line it stands for another server.
for major in 14 19; do
  if out=$(make -n PG_CONFIG="$(wb_pg_config)" MAJORVERSION=$major 2>&1); then
    echo "FAIL make went on for PostgreSQL $major"; FAILED=$((FAILED + 1))
  else
    check_eq "make stops on PostgreSQL $major with a clear message" "t" \
      "$(grep -q "whizbang supports PostgreSQL 15, 16, 17 and 18; found $major" <<<"$out" && echo t || echo "f: $out")"
  fi
done
for major in 15 16 17 18; do
  mk -n MAJORVERSION=$major >/dev/null 2>&1 && echo "ok   and goes on for $major" ||
    { echo "FAIL make -n fails for $major"; FAILED=$((FAILED + 1)); }
done

if [ "$FAILED" -ne 0 ]; then echo "dist: $FAILED check(s) failed"; exit 1; fi
echo "dist: PASS"
