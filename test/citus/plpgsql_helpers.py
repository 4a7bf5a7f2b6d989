#!/usr/bin/env python3
"""Copies pgTAP files for a run on a Citus coordinator (test/citus/pgtap.sh).

Citus cannot plan a query on a distributed table inside a LANGUAGE sql function that has
parameters ("could not create distributed plan ... parameters in SQL functions"). The pgTAP
files' own helpers (pg_temp.*) count rows that way. This rewrites each such helper, and only
those, into the PL/pgSQL function that returns the same thing (#variable_conflict use_column
keeps SQL's rule that a column name wins over a parameter's); the tests themselves are copied
unchanged.

    plpgsql_helpers.py SOURCE_DIR DEST_DIR FILE...
"""
import os
import re
import shutil
import sys

FUNC = re.compile(
    r"(CREATE (?:OR REPLACE )?FUNCTION pg_temp\.\w+\s*\([^)]*\)\s*)"
    r"(RETURNS\s+(?P<ret>TABLE\s*\([^)]*\)|SETOF\s+\S+|[\w\[\]\s.]+?))\s*"
    r"LANGUAGE\s+sql(?P<vol>\s+(?:IMMUTABLE|STABLE|VOLATILE))?\s+AS\s+\$\$(?P<body>.*?)\$\$",
    re.S | re.I)


def rewrite(text):
    def one(m):
        body = m.group("body").strip().rstrip(";")
        if "whizbang.wh_" not in body:
            return m.group(0)
        ret = m.group("ret").strip()
        vol = m.group("vol") or ""
        if ret.upper().startswith("TABLE") or ret.upper().startswith("SETOF"):
            new = "BEGIN RETURN QUERY " + body + "; END"
        else:
            new = "BEGIN RETURN (" + body + "); END"
        return (m.group(1) + m.group(2) + " LANGUAGE plpgsql" + vol + " AS $$ #variable_conflict use_column\n"
                + new + " $$")
    return FUNC.sub(one, text)


def main():
    src, dest, files = sys.argv[1], sys.argv[2], sys.argv[3:]
    os.makedirs(dest, exist_ok=True)
    if os.path.isdir(os.path.join(src, "lib")):
        shutil.copytree(os.path.join(src, "lib"), os.path.join(dest, "lib"), dirs_exist_ok=True)
    for name in files:
        with open(os.path.join(src, name)) as f:
            text = f.read()
        with open(os.path.join(dest, name), "w") as f:
            f.write(rewrite(text))


if __name__ == "__main__":
    main()
