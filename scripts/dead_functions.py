#!/usr/bin/python3
"""Candidates for dead code: functions defined in lib/ that nothing names.

  scripts/dead_functions.py [SOURCE_DIR]

A function defined in a .c, .cu or .h file of lib/ is listed when its name
occurs in no code of lib/, include/, fortran/, python/, apps/, tests/,
bench/ or scripts/ other than its own definition and declarations
(comments aside).  A candidate is judged, not removed blindly: the public
API (CRPM_API) stays even when nothing in the tree calls it.  Exits 0.
"""
import os
import re
import sys

root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
root = os.path.abspath(root)
srcs = {}
for top in ("lib", "include", "fortran", "python", "apps", "tests", "bench", "scripts"):
    for d, _, fs in os.walk(os.path.join(root, top)):
        for f in fs:
            if f.endswith((".c", ".h", ".cu", ".cpp", ".hpp", ".f90", ".F90", ".py", ".inc", ".cc")):
                p = os.path.join(d, f)
                t = open(p, errors="replace").read()
                if not f.endswith((".py", ".f90", ".F90", ".inc")):
                    t = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), t, flags=re.S)
                    t = re.sub(r"//[^\n]*", "", t)
                srcs[p] = t
defs = {}
for p, s in srcs.items():
    if not p.startswith(os.path.join(root, "lib")) or not p.endswith((".c", ".cu", ".h")):
        continue
    for m in re.finditer(r"^[A-Za-z_][\w \*\(]*?\b([A-Za-z_]\w*)\)?\s*\(", s, re.M):
        line_end = s.find("\n", m.start())
        # definitions: followed (possibly after lines of parameters) by '{' before ';'
        rest = s[m.end():]
        i_semi, i_br = rest.find(";"), rest.find("{")
        if i_br != -1 and (i_semi == -1 or i_br < i_semi):
            defs.setdefault(m.group(1), p)
for name, p in sorted(defs.items()):
    pat = re.compile(r"\b%s\b" % re.escape(name))
    refs = 0
    for q, s in srcs.items():
        for line in s.split("\n"):
            if not pat.search(line):
                continue
            if re.match(r"^[A-Za-z_][\w \*\(]*?\b%s\)?\s*\(" % re.escape(name), line):
                continue  # its definition or a declaration
            code = re.sub(r"/\*.*?\*/|//.*$", "", line)
            if pat.search(code):
                refs += 1
    if refs == 0:
        print(name, p.replace(root + "/", ""))
