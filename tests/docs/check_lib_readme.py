#!/usr/bin/python3
"""lib/README.md names only what exists (test docs.lib_readme).

  check_lib_readme.py SOURCE_DIR [README]

From every code span (`...`) and bold name (**...**) of the README:

  * a file (name.c, dir/name.h, name.c/h for both, also .cu .py .sh .txt
    .md .cmake): it exists.  A bare name in the file table exists in the
    folder of its section (**util/** ...); elsewhere a path is relative to
    lib/ or to the source tree, and a bare name exists somewhere in lib/;
  * a function: an identifier followed by '(' , or one with the prefix
    crpm_, l2_, l3_ or l4_ (shorthand `_flush` after `crpm_crc_compute`
    completes a prefix of the name before it): it is defined in lib/ or
    include/ as a function, a function-like or other macro, an op of an ops
    table (a function-pointer member), a variable, a type or an enum constant (or
    it is a CMake target); `crpm_name_*` is a pattern, not checked;
  * any other identifier with an underscore (a static function, a field, a
    configuration key): it occurs in the code of lib/ (comments aside);
  * an upper-case CRPM_ name occurs in lib/ or include/.

Prints one line per name that does not resolve and exits 1 if any.
"""
import os
import re
import sys

CODE_SPAN = re.compile(r"`([^`]+)`")
BOLD = re.compile(r"\*\*([^*]+)\*\*")
FILE = re.compile(r"(?<![\w./-])((?:[\w-]+/)*[\w-]+\.(?:c|h|cu|py|sh|txt|md|cmake))(/h)?(?![\w])")
IDENT = re.compile(r"(?<![\w.>%-])([A-Za-z_]\w*)(\s*\(|\*)?")
PREFIXED = re.compile(r"^(crpm_|l2_|l3_|l4_)")
SECTION = re.compile(r"^\|\s*\*\*(\w+)/\*\*\s*\|")
TOP_ROW = re.compile(r"^\|\s*\*\*[\w.]+\.[ch]\b")  # | **api.c** |: a file of lib/ itself
C_EXT = (".c", ".h", ".cu")


def code_text(root, dirs):
    """Every C file under dirs, comments removed (strings kept: keys)."""
    out = []
    for top in dirs:
        for d, _, files in os.walk(os.path.join(root, top)):
            for f in sorted(files):
                if f.endswith(C_EXT) or f.endswith(".h.in"):
                    t = open(os.path.join(d, f), errors="replace").read()
                    t = re.sub(r"/\*.*?\*/", " ", t, flags=re.S)
                    out.append(re.sub(r"//[^\n]*", "", t))
    return "\n".join(out)


def defined(name, code):
    n = re.escape(name)
    pats = [
        r"^[\w][\w \t\*]*?\b%s\s*\([^;{]*\)\s*(?:__attribute__\(\([^)]*\)\)\s*)?\{" % n,  # function
        r"^[\w][\w \t\*]*?\(\s*%s\s*\)\s*\([^;{]*\)\s*\{" % n,  # int (name)(...) {
        r"#\s*define\s+%s\b" % n,  # macro
        r"^[\w][\w \t\*]*?\b%s\s*(?:\[[^\]]*\]\s*)?(?:=|;|,)" % n,  # a variable or constant (crpm_mem_host)
        r"\(\s*\*\s*%s\s*\)\s*\(" % n,  # op of an ops table
        r"\b(?:struct|enum|union)\s+%s\s*\{" % n,  # tag
        r"\}\s*%s\s*;" % n, r"typedef\s+[^;]*\b%s\s*;" % n,  # typedef
        r"^\s*%s\s*(?:=[^=][^,\n]*)?,?\s*$" % n,  # enum constant on its own line
        r"[{,]\s*%s\s*(?:=[^,}]*)?(?=[,}])" % n,  # enum constant in a list
    ]
    return any(re.search(p, code, re.M | re.S) for p in pats)


def cmake_targets(root):
    """Targets of the build (crpm_testsupport, ...): names a README may cite."""
    names = set()
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if not x.startswith(("build", "."))]
        if "CMakeLists.txt" in files:
            t = open(os.path.join(d, "CMakeLists.txt"), errors="replace").read()
            names.update(re.findall(r"\badd_(?:library|executable)\(\s*([\w-]+)", t))
    return names


def occurs(name, code):
    return re.search(r"\b%s\b" % re.escape(name), code) is not None


def main():
    root = sys.argv[1]
    readme = sys.argv[2] if len(sys.argv) > 2 else os.path.join(root, "lib", "README.md")
    lib = os.path.join(root, "lib")
    lib_code = code_text(root, ["lib"])
    all_code = lib_code + "\n" + code_text(root, ["include"])
    basenames = {f for _, _, fs in os.walk(lib) for f in fs}
    targets = cmake_targets(root)
    problems, checked = [], 0
    section, fenced = None, False
    for ln, line in enumerate(open(readme).read().split("\n"), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        m = SECTION.match(line)
        if m:
            section = m.group(1)
        elif not line.startswith("|") or TOP_ROW.match(line):
            section = None
        spans = CODE_SPAN.findall(line) + BOLD.findall(line)
        prev = None
        for span in spans:
            for fm in FILE.finditer(span):
                path = fm.group(1)
                names = [path] + ([path[:-2] + ".h"] if fm.group(2) else [])
                for p in names:
                    checked += 1
                    if "/" in p:
                        ok = any(os.path.exists(os.path.join(b, p)) for b in (lib, root))
                    elif section:  # its folder's, or a public header
                        ok = any(os.path.exists(os.path.join(b, p))
                                 for b in (os.path.join(lib, section), os.path.join(root, "include")))
                    else:
                        ok = p in basenames or os.path.exists(os.path.join(lib, p))
                    if not ok:
                        where = "lib/%s/" % section if section and "/" not in p else "lib/ or the source tree"
                        problems.append("%s:%d: file %s does not exist in %s" % (readme, ln, p, where))
            rest = FILE.sub(" ", span)
            for im in IDENT.finditer(rest):
                name, call = im.group(1), im.group(2) not in (None, "*")
                if im.group(2) == "*":  # a pattern (crpm_name_*): not one name
                    continue
                if name.startswith("_") and prev:  # shorthand: a prefix of the name before it
                    parts = prev.split("_")
                    cands = ["_".join(parts[:k]) + name for k in range(len(parts) - 1, 0, -1)]
                    checked += 1
                    if not any(defined(c, all_code) for c in cands):
                        problems.append("%s:%d: `%s` (after `%s`) is defined nowhere in lib/ or include/"
                                        % (readme, ln, name, prev))
                    continue
                if name.isupper() or name[0].isupper():
                    if name.startswith("CRPM_") and name.upper() == name:
                        checked += 1
                        if not occurs(name, all_code):
                            problems.append("%s:%d: %s occurs nowhere in lib/ or include/" % (readme, ln, name))
                    continue
                if call or PREFIXED.match(name):
                    checked += 1
                    if not defined(name, all_code) and name not in targets:
                        problems.append("%s:%d: `%s` is not defined in lib/ or include/" % (readme, ln, name))
                    prev = name
                elif "_" in name.strip("_"):
                    checked += 1
                    if not occurs(name, lib_code):
                        problems.append("%s:%d: `%s` occurs nowhere in lib/'s code" % (readme, ln, name))
    for p in problems:
        print(p)
    print("%s: %d names checked, %d do not exist" % (os.path.relpath(readme, root), checked, len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
