#!/usr/bin/env python3
"""libcrpm.so must export exactly the public API: every CRPM_API name of the
public headers, and nothing else (internals are hidden).  With --test-hooks
OFF or ON (how the build was configured, CRPM_TEST_HOOKS) it also checks
that the test machinery is in the library exactly when asked for: without
the hooks no test-hook code (the mock GPU device included) and none of their
environment variables' names;
with them the hook code is there; the crash simulator never is.

usage: check_exports.py [--test-hooks ON|OFF] LIBRARY HEADER..."""
import re
import subprocess
import sys


def declared(headers):
    names = set()
    for h in headers:
        text = '\n'.join(l for l in open(h).read().splitlines() if not l.lstrip().startswith('#'))
        for decl in re.findall(r'CRPM_API\s+([^;{]*)', text):
            if '(' in decl:
                # int (name)(...): a name kept from a function-like macro of the same name
                decl = re.sub(r'\(\s*(\w+)\s*\)\s*\(', r' \1(', decl, count=1)
                names.add(re.search(r'(\w+)\s*\(', decl).group(1))
            elif 'crpm_type_t' in decl:  # extern const crpm_type_t A, B, ...
                names.update(re.findall(r'\b(CRPM_[A-Z]+)\b', decl.split('crpm_type_t', 1)[-1]))
            else:  # extern <type> name: a variable
                names.add(re.findall(r'(\w+)\s*$', decl.strip())[0])
    return names


def exported(lib):
    out = subprocess.run(['nm', '-D', '--defined-only', lib], check=True, capture_output=True, text=True).stdout
    return {line.split()[-1] for line in out.splitlines() if len(line.split()) == 3}


HOOK_SYMBOLS = re.compile(r'^(crpm_testhook_\w+|crpm_devmock_\w+|crpm_devops_mock)$')
SIM_SYMBOLS = re.compile(r'^crpm_(sim_\w+|backend_sim)$')
HOOK_STRINGS = (b'CRPM_TEST_KILL', b'CRPM_TEST_L3_VERIFY', b'CRPM_BENCH_BASELINE', b'CRPM_TEST_DEVICE')


def test_machinery(lib, hooks):
    """Problems with the test machinery in lib (every symbol, local ones too)."""
    out = subprocess.run(['nm', lib], check=True, capture_output=True, text=True).stdout
    syms = {line.split()[-1] for line in out.splitlines() if len(line.split()) >= 2}
    data = open(lib, 'rb').read()
    problems = [f'crash simulator in the library: {s}' for s in sorted(filter(SIM_SYMBOLS.match, syms))]
    hook_syms = sorted(filter(HOOK_SYMBOLS.match, syms))
    if hooks:
        if not hook_syms:
            problems.append('built with CRPM_TEST_HOOKS=ON but no crpm_testhook_* code in the library')
    else:
        problems += [f'test hook in a library built without CRPM_TEST_HOOKS: {s}' for s in hook_syms]
        problems += [f'{v.decode()} named in a library built without CRPM_TEST_HOOKS' for v in HOOK_STRINGS
                     if v in data]
    return problems


def main():
    args = sys.argv[1:]
    hooks = None
    if args[:1] == ['--test-hooks']:
        hooks, args = args[1].upper() in ('ON', '1', 'TRUE', 'YES'), args[2:]
    lib, headers = args[0], args[1:]
    want, have = declared(headers), exported(lib)
    extra, missing = sorted(have - want), sorted(want - have)
    print(f'{len(have)} symbols exported, {len(want)} declared public')
    for name in extra:
        print(f'exported but not public API: {name}')
    for name in missing:
        print(f'public API not exported: {name}')
    problems = test_machinery(lib, hooks) if hooks is not None else []
    for p in problems:
        print(p)
    if hooks is not None and not problems:
        print('test machinery: as configured (CRPM_TEST_HOOKS=%s)' % ('ON' if hooks else 'OFF'))
    return 1 if extra or missing or not want or problems else 0


if __name__ == '__main__':
    sys.exit(main())
