#!/usr/bin/env python3
"""The docs test: runs every ```sql block of the given Markdown pages as a reader would paste it
into psql, and compares the output a page shows with what psql printed (docs/testing.md, "The
docs test").

    run_docs.py --store table|shared_memory [--keep] [--fill] PAGE.md...

For each page that runs on the given lease store: a fresh database (CREATE EXTENSION whizbang,
unless the page creates it itself), then ONE psql session (psql -X -q, input on stdin, as if
pasted, ON_ERROR_STOP on, PGTZ=UTC) that runs the
page's hidden set-up blocks and sql blocks in page order. Prints one line per page, "ok   PAGE
(store)" or "FAIL PAGE (store)" followed by what differed, and "skip PAGE ..." for skipped blocks
and pages; exits 1 when a page failed. The server to use is the one libpq's environment names
(PGHOST, PGPORT, ...: pg_virtualenv sets them).

The conventions of a page (all in HTML comments, which a reader of the rendered page does not see):
  ```sql block, then (only blank lines between) a ``` or ```text block: the block's shown output,
      compared with psql's output of the whole block (lines stripped of trailing blanks; leading
      and trailing empty lines ignored). A shown line that is exactly "..." stands for any number
      of lines. A block whose shown output has an "ERROR:" line runs with ON_ERROR_STOP off.
  <!-- docs-test setup
  SQL
  -->                       hidden SQL, run where it stands (its output is not compared).
  <!-- docs-test skip: REASON -->  right before a ```sql block: the block is not run (counted).
  <!-- docs-test stores: table -->  the page runs on these lease stores only (default: both).
  <!-- docs-test store: shared_memory -->  right before a ```sql block: it runs on that store only.
  <!-- docs-test page-skip: REASON -->  the page is not run at all.
"""
import argparse
import difflib
import os
import re
import subprocess
import sys

FENCE = re.compile(r'^(\s*)```\s*([A-Za-z0-9_+-]*)\s*$')
STORES = ('table', 'shared_memory')


class Block:
    def __init__(self, kind, line, text):
        self.kind = kind          # 'sql' or 'setup'
        self.line = line          # 1-based line of its opening fence / comment in the page
        self.text = text
        self.shown = None         # shown output lines, or None
        self.shown_at = None      # (first, last) 0-based lines of the shown output in the page
        self.skip = None          # reason, or None
        self.store = None         # the only lease store it runs on, or None: every store


def parse(path):
    """The page's blocks in order, its stores, and its page-skip reason."""
    lines = open(path, encoding='utf-8').read().split('\n')
    blocks, stores, page_skip = [], list(STORES), None
    pending_skip = pending_store = None
    last_sql = None               # the sql block an output block may follow
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        m = re.match(r'<!--\s*docs-test\s+(setup|skip|stores|store|page-skip)\b:?(.*)$', stripped)
        if m:
            kind, rest = m.group(1), m.group(2)
            if kind == 'setup':
                body, j = [], i + 1
                if rest.strip() and rest.strip() != '-->':
                    raise SystemExit(f'{path}:{i + 1}: "docs-test setup" takes its SQL on the following lines')
                while j < len(lines) and lines[j].strip() != '-->':
                    body.append(lines[j])
                    j += 1
                if j == len(lines):
                    raise SystemExit(f'{path}:{i + 1}: unterminated docs-test setup comment')
                blocks.append(Block('setup', i + 1, '\n'.join(body)))
                last_sql = None
                i = j + 1
                continue
            if not rest.rstrip().endswith('-->'):
                raise SystemExit(f'{path}:{i + 1}: docs-test {kind} comment must fit on one line')
            arg = rest.rstrip()[:-3].strip()
            if kind == 'skip':
                if not arg:
                    raise SystemExit(f'{path}:{i + 1}: docs-test skip needs a reason')
                pending_skip = arg
            elif kind == 'store':
                if arg not in STORES:
                    raise SystemExit(f'{path}:{i + 1}: unknown lease store {arg!r}: use one of {STORES}')
                pending_store = arg
            elif kind == 'page-skip':
                page_skip = arg or 'no reason given'
            else:
                stores = arg.split()
                bad = [s for s in stores if s not in STORES]
                if bad or not stores:
                    raise SystemExit(f'{path}:{i + 1}: unknown lease store(s) {bad}: use {STORES}')
            i += 1
            continue
        m = FENCE.match(line)
        if m:
            indent, info = m.group(1), m.group(2)
            body, j = [], i + 1
            while j < len(lines) and not re.match(r'^\s*```\s*$', lines[j]):
                body.append(lines[j][len(indent):] if lines[j].startswith(indent) else lines[j].lstrip())
                j += 1
            if info == 'sql':
                b = Block('sql', i + 1, '\n'.join(body))
                b.skip, pending_skip = pending_skip, None
                b.store, pending_store = pending_store, None
                blocks.append(b)
                last_sql = b
            elif info in ('', 'text') and last_sql is not None and last_sql.shown is None:
                last_sql.shown = body
                last_sql.shown_at = (i + 1, j - 1)
                last_sql = None
            else:
                last_sql = None
            i = j + 1
            continue
        if stripped and last_sql is not None:
            last_sql = None       # prose between: what follows is no output of the block
        if stripped and pending_skip is not None and not stripped.startswith('<!--'):
            raise SystemExit(f'{path}:{i + 1}: docs-test skip must stand right before a ```sql block')
        i += 1
    return blocks, stores, page_skip


def unterminated(sql):
    """Whether the block ends inside a statement (no ';' after its last statement): psql would
    glue it to whatever is pasted next."""
    code = [l for l in sql.split('\n') if l.strip() and not l.strip().startswith('--')]
    if not code:
        return False
    last = re.sub(r'\s--.*$', '', code[-1]).rstrip()
    return not (last.endswith(';') or last.lstrip().startswith('\\') or re.search(r'\\g\w*(\s+\S+)?$', last))


def psql(args, **kw):
    return subprocess.run(['psql', '-X'] + args, capture_output=True, text=True, **kw)


def roles_now():
    return set(psql(['-qAt', '-d', 'postgres', '-c', 'SELECT rolname FROM pg_roles']).stdout.split())


def normalise(lines):
    out = [l.rstrip() for l in lines]
    while out and not out[0]:
        out.pop(0)
    while out and not out[-1]:
        out.pop()
    return out


def matches(shown, got):
    """shown (with "..." lines matching any run of lines) against got, both normalised."""
    def rec(si, gi):
        if si == len(shown):
            return gi == len(got)
        if shown[si].strip() == '...':
            return any(rec(si + 1, k) for k in range(gi, len(got) + 1))
        return gi < len(got) and shown[si] == got[gi] and rec(si + 1, gi + 1)
    return rec(0, 0)


MARK = '<<<docs-test block {}>>>'


def run_page(path, store, keep, fill=False):
    blocks, stores, page_skip = parse(path)
    name = os.path.relpath(path)
    if page_skip:
        print(f'skip {name} ({store}): {page_skip}')
        return True, 0
    if store not in stores:
        return True, 0
    problems, skipped = [], 0
    script = ['\\set ON_ERROR_STOP 1']
    # A block for one lease store only runs in that store's cluster (it is no skip: the other
    # cluster runs it).
    blocks = [b for b in blocks if b.store in (None, store)]
    for n, b in enumerate(blocks):
        if b.skip:
            skipped += 1
            print(f'skip {name}:{b.line} ({store}): {b.skip}')
            continue
        if b.kind == 'sql' and unterminated(b.text):
            problems.append(f'{name}:{b.line}: the block ends without ";" (psql would join it to the next one)')
        expect_error = b.shown is not None and (any(re.match(r'^(psql:\S+ )?ERROR:', l) for l in b.shown)
                                                or (fill and [l.strip() for l in b.shown] == ['FILL']))
        script.append('\\echo ' + MARK.format(n))
        if expect_error:
            script.append('\\set ON_ERROR_STOP 0')
        script.append(b.text)
        if expect_error:
            script.append('\\set ON_ERROR_STOP 1')
    script.append('\\echo ' + MARK.format('end'))
    db = 'docs_' + re.sub(r'\W', '_', os.path.splitext(os.path.basename(path))[0]).lower()
    psql(['-q', '-d', 'postgres', '-c', f'DROP DATABASE IF EXISTS {db}'])
    roles = roles_now()
    r = psql(['-q', '-v', 'ON_ERROR_STOP=1', '-d', 'postgres', '-c', f'CREATE DATABASE {db}'])
    # The extension is there already, unless the page creates it itself (README.md, inbox.md).
    creates = any(re.search(r'^\s*CREATE\s+EXTENSION\s+(IF\s+NOT\s+EXISTS\s+)?whizbang\b', b.text, re.I | re.M)
                  for b in blocks if not b.skip)
    r2 = r.returncode == 0 and psql(['-q', '-v', 'ON_ERROR_STOP=1', '-d', db, '-c',
                                     'SELECT 1' if creates else 'CREATE EXTENSION whizbang'])
    if r.returncode != 0 or not r2 or r2.returncode != 0:
        print(f'FAIL {name} ({store}): could not create the database: {r.stderr}{r2 and r2.stderr}')
        return False, skipped
    # One session for the whole page, errors (stderr) merged into the output in order.
    # -q: no command tags (BEGIN, INSERT 0 1), so that shown outputs are the results only.
    run = subprocess.run(['psql', '-X', '-q', '-d', db], input='\n'.join(script) + '\n', text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600)
    if not keep:
        # The database, and the roles the page created (roles belong to the cluster, and the
        # next page may create the same ones).
        psql(['-q', '-d', 'postgres', '-c', f'DROP DATABASE IF EXISTS {db}'])
        for role in sorted(roles_now() - roles):
            psql(['-q', '-d', 'postgres', '-c', f'DROP ROLE "{role}"'])
    # The output of each block: between its mark and the next one.
    parts, current, fills = {}, None, []
    for line in run.stdout.split('\n'):
        m = re.match(r'^<<<docs-test block (\w+)>>>$', line)
        if m:
            current = m.group(1)
            parts[current] = []
        elif current is not None:
            parts[current].append(line)
    for n, b in enumerate(blocks):
        if b.skip:
            continue
        if str(n) not in parts:
            problems.append(f'{name}:{b.line}: not reached')
            break
        got = normalise(parts[str(n)])
        if 'end' not in parts and max(int(k) for k in parts if k != 'end') == n:
            problems.append(f'{name}:{b.line}: psql stopped in this {b.kind} block:\n    '
                            + '\n    '.join(got[-15:]))
            break
        if b.shown is None:
            continue
        if fill and [l.strip() for l in b.shown] == ['FILL']:
            fills.append((b.shown_at, got))
            continue
        shown = normalise(b.shown)
        if not matches(shown, got):
            diff = difflib.unified_diff(shown, got, 'shown', 'psql printed', lineterm='', n=2)
            problems.append(f'{name}:{b.line}: the output differs from the one shown:\n    '
                            + '\n    '.join(diff))
    if run.returncode != 0 and 'end' in parts:
        problems.append(f'{name}: psql exited with {run.returncode}')
    if fills:
        # A writer's aid (--fill): shown outputs written as the single line FILL get what psql
        # printed. Read what it wrote before committing it.
        lines = open(path, encoding='utf-8').read().split('\n')
        for (first, last), got in sorted(fills, reverse=True):
            lines[first:last + 1] = got
        open(path, 'w', encoding='utf-8').write('\n'.join(lines))
        print(f'filled {len(fills)} shown output(s) in {name}')
    if problems:
        print(f'FAIL {name} ({store})')
        for p in problems:
            print('  ' + p)
        return False, skipped
    print(f'ok   {name} ({store})')
    return True, skipped


def main():
    # Timestamps print in UTC, as every page shows them.
    os.environ['PGTZ'] = 'UTC'
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--store', choices=STORES, required=True, help='the lease store of the server')
    ap.add_argument('--keep', action='store_true', help='keep each page\'s database')
    ap.add_argument('--fill', action='store_true',
                    help='write what psql printed into shown outputs that read just FILL (a writer\'s aid)')
    ap.add_argument('pages', nargs='+')
    a = ap.parse_args()
    failed = skipped = 0
    for p in a.pages:
        ok, s = run_page(p, a.store, a.keep, a.fill)
        failed += not ok
        skipped += s
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
