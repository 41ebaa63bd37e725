#!/usr/bin/env python3
"""libcrpm.so must export exactly the public API: every CRPM_API name of the
public headers, and nothing else (internals are hidden).

usage: check_exports.py LIBRARY HEADER..."""
import re
import subprocess
import sys


def declared(headers):
    names = set()
    for h in headers:
        text = '\n'.join(l for l in open(h).read().splitlines() if not l.lstrip().startswith('#'))
        for decl in re.findall(r'CRPM_API\s+([^;{]*)', text):
            if '(' in decl:
                names.add(re.search(r'(\w+)\s*\(', decl).group(1))
            else:  # extern const crpm_type_t A, B, ...
                names.update(re.findall(r'\b(CRPM_[A-Z]+)\b', decl.split('crpm_type_t', 1)[-1]))
    return names


def exported(lib):
    out = subprocess.run(['nm', '-D', '--defined-only', lib], check=True, capture_output=True, text=True).stdout
    return {line.split()[-1] for line in out.splitlines() if len(line.split()) == 3}


def main():
    lib, headers = sys.argv[1], sys.argv[2:]
    want, have = declared(headers), exported(lib)
    extra, missing = sorted(have - want), sorted(want - have)
    print(f'{len(have)} symbols exported, {len(want)} declared public')
    for name in extra:
        print(f'exported but not public API: {name}')
    for name in missing:
        print(f'public API not exported: {name}')
    return 1 if extra or missing or not want else 0


if __name__ == '__main__':
    sys.exit(main())
