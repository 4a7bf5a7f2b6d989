#!/usr/bin/env bash
# META.json agrees with whizbang.control (DESIGN §5: "META.json PGXN Meta Spec v1; version ==
# control default_version"): valid JSON, the meta-spec 1.0.0 required keys, "version" and
# provides.whizbang.version equal to default_version, provides.whizbang.file and
# sql/whizbang--<version>.sql present; a maintainer with a contact ("name <email>"), a
# release_status, and a PostgreSQL prerequisite that is a range closed above (the code builds
# against the majors it is tested on, 15 to 18: ">= 15.0.0, < 19.0.0", not "15.0.0", which
# reads "15 or later").
# Then, in a throw-away cluster, the installed extension reports the same version through
# whizbang.version() and pg_available_extensions.
#   meta_version.sh --meta-only DIR   only the META.json checks, of the tree in DIR (dist.sh
#                                     runs them on the unpacked distribution)
set -euo pipefail

self=$(readlink -f "$0")
cd "$(dirname "$self")/../.."
meta_only=""
if [ "${1:-}" = "--meta-only" ]; then meta_only=1; cd "$2"; fi

[ -n "$meta_only" ] || source scripts/lib.sh  # wb_free_port

if [ "${1:-}" = "--in-cluster" ]; then
    version=$2
    fail=0
    got=$(psql -XqAt -v ON_ERROR_STOP=1 -c "CREATE EXTENSION whizbang" \
               -c "SELECT whizbang.version() || '|' || default_version || '|' || installed_version
                     FROM pg_available_extensions WHERE name = 'whizbang'")
    echo "installed: version()|default_version|installed_version = $got"
    if [ "$got" != "$version|$version|$version" ]; then
        echo "FAIL: installed extension does not report $version everywhere"
        fail=1
    fi
    exit $fail
fi

control_version=$(sed -n "s/^[[:space:]]*default_version[[:space:]]*=[[:space:]]*'\([^']*\)'.*/\1/p" whizbang.control)
if [ -z "$control_version" ]; then
    echo "FAIL: no default_version in whizbang.control"
    exit 1
fi
echo "whizbang.control default_version = $control_version"

python3 - "$control_version" <<'PY'
import json
import os
import re
import sys

control_version = sys.argv[1]
failures = []

def check(ok, message):
    print(("ok   " if ok else "FAIL ") + message)
    if not ok:
        failures.append(message)

try:
    with open("META.json", encoding="utf-8") as f:
        meta = json.load(f)
except (OSError, ValueError) as e:
    print(f"FAIL META.json is not valid JSON: {e}")
    sys.exit(1)
check(isinstance(meta, dict), "META.json is a JSON object")

# Required keys of the PGXN Meta Spec 1.0.0.
for key in ("name", "abstract", "version", "maintainer", "license", "provides", "meta-spec"):
    check(key in meta, f'META.json has the required key "{key}"')

check(meta.get("name") == "whizbang", 'META.json "name" is "whizbang"')
check(isinstance(meta.get("abstract"), str) and meta.get("abstract", "").strip() != "",
      'META.json "abstract" is a non-empty string')
maintainer = meta.get("maintainer")
check((isinstance(maintainer, str) and maintainer.strip() != "")
      or (isinstance(maintainer, list) and len(maintainer) > 0 and all(isinstance(m, str) and m for m in maintainer)),
      'META.json "maintainer" is a string or a non-empty list of strings')
maintainers = [maintainer] if isinstance(maintainer, str) else maintainer if isinstance(maintainer, list) else []
contact = re.compile(r"^[^<>]*\S\s+<[^@<>\s]+@[^@<>\s]+\.[^@<>\s]+>$")
check(any(isinstance(m, str) and contact.match(m) for m in maintainers),
      f'META.json "maintainer" has a contact, "name <email>" ({maintainers})')
check(meta.get("release_status") in ("stable", "testing", "unstable"),
      f'META.json "release_status" is stable, testing or unstable ({meta.get("release_status")})')
license_ = meta.get("license")
check(isinstance(license_, (str, list, dict)) and bool(license_), 'META.json "license" is present and non-empty')

spec = meta.get("meta-spec")
check(isinstance(spec, dict) and spec.get("version") == "1.0.0", 'META.json "meta-spec" version is "1.0.0"')

semver = re.compile(r"^\d+\.\d+\.\d+$")
check(isinstance(meta.get("version"), str) and bool(semver.match(meta.get("version", ""))),
      'META.json "version" is a semantic version X.Y.Z')
check(meta.get("version") == control_version,
      f'META.json "version" ({meta.get("version")}) equals control default_version ({control_version})')

provides = meta.get("provides")
check(isinstance(provides, dict) and "whizbang" in provides, 'META.json "provides" has "whizbang"')
ext = provides.get("whizbang", {}) if isinstance(provides, dict) else {}
check(isinstance(ext, dict) and ext.get("version") == control_version,
      f'provides.whizbang.version ({ext.get("version") if isinstance(ext, dict) else None}) '
      f'equals control default_version ({control_version})')
check(isinstance(ext, dict) and isinstance(ext.get("file"), str),
      "provides.whizbang.file is given")
if isinstance(ext, dict) and isinstance(ext.get("file"), str):
    check(os.path.isfile(ext["file"]), f'provides.whizbang.file ({ext["file"]}) exists')
    # A docfile, when given, must ship (PGXN links to it; the Makefile installs it as DOCS).
    if "docfile" in ext:
        check(os.path.isfile(ext["docfile"]), f'provides.whizbang.docfile ({ext["docfile"]}) exists')
# Every provided extension has the two keys the spec requires of it.
if isinstance(provides, dict):
    for name, p in provides.items():
        check(isinstance(p, dict) and "file" in p and "version" in p,
              f'provides.{name} has the required "file" and "version"')

# The PostgreSQL prerequisite: a version range (Meta Spec v1: comparisons of X.Y.Z versions,
# AND-ed with commas) that admits 15 to 18 and nothing from 19 on.
prereq = (meta.get("prereqs", {}).get("runtime", {}).get("requires", {}).get("PostgreSQL")
          if isinstance(meta.get("prereqs"), dict) else None)
clause = re.compile(r"^(==|!=|<=|>=|<|>)?\s*(\d+)\.(\d+)\.(\d+)$")
clauses = [clause.match(c.strip()) for c in prereq.split(",")] if isinstance(prereq, str) else [None]
check(all(clauses), f'prereqs.runtime.requires.PostgreSQL is a v1 version range ({prereq})')
def admits(version):
    ops = {None: lambda a, b: a >= b, ">=": lambda a, b: a >= b, ">": lambda a, b: a > b,
           "<=": lambda a, b: a <= b, "<": lambda a, b: a < b,
           "==": lambda a, b: a == b, "!=": lambda a, b: a != b}
    return all(ops[m.group(1)](version, tuple(int(g) for g in m.group(2, 3, 4))) for m in clauses if m)
if all(clauses):
    check(all(admits((major, minor, 0)) for major in (15, 16, 17, 18) for minor in (0, 99)),
          f"the range admits PostgreSQL 15, 16, 17 and 18 ({prereq})")
    check(not admits((14, 99, 0)) and not admits((19, 0, 0)) and not admits((20, 0, 0)),
          f"the range admits neither 14 nor 19 and later ({prereq})")

script = f"sql/whizbang--{control_version}.sql"
check(os.path.isfile(script), f"{script} exists")

if failures:
    print(f"{len(failures)} check(s) failed")
    sys.exit(1)
print("META.json agrees with whizbang.control")
PY

[ -z "$meta_only" ] || exit 0

pg_virtualenv -t -c "-p $(wb_free_port)" -o fsync=off bash "$self" --in-cluster "$control_version"
echo "meta_version: PASS"
