#!/usr/bin/python3
"""The documentation's references resolve (test docs.links).

  check_docs.py SOURCE_DIR

Every Markdown file of the tree (the result tables under bench/results
excepted) is read, and:

  * every relative link or image, [text](path) or [text](path#anchor),
    names an existing file or directory, and an anchor into a Markdown file
    names one of its headings (GitHub's rule: lower case, punctuation other
    than '-' and '_' dropped, spaces as '-');
  * every `bench/results/<file>` a document names exists;
  * docs/performance.md names its sources as `<file>` relative to
    bench/results (the source column of its targets table): each exists.

Prints one line per broken reference and exits 1 if there is any.
"""
import os
import re
import sys

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
CODE_SPAN = re.compile(r"`([^`]+)`")
RESULT_NAME = re.compile(r"bench/results/([\w./{},-]+)")
FILE_NAME = re.compile(r"^[\w-]+(/[\w-]+)*\.(md|txt|json|csv|png)$")
SKIP_DIRS = {".git", "build", "build-san", "build-sanitize", "node_modules"}


def markdown_files(root):
    for d, dirs, files in os.walk(root):
        rel = os.path.relpath(d, root)
        dirs[:] = sorted(x for x in dirs if x not in SKIP_DIRS and not x.startswith(".")
                         and not x.startswith("build"))
        if rel.replace(os.sep, "/").startswith("bench/results"):
            continue
        for f in sorted(files):
            if f.endswith(".md"):
                yield os.path.join(d, f)


def strip_code_blocks(text):
    """The text outside fenced code blocks, line numbers kept."""
    out, fenced = [], False
    for line in text.split("\n"):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            out.append("")
        else:
            out.append("" if fenced else line)
    return out


def slug(heading):
    h = heading.strip().lower()
    h = re.sub(r"[^\w\- ]", "", h)
    return h.replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        with open(path, encoding="utf-8") as f:
            lines = strip_code_blocks(f.read())
        seen, out = {}, set()
        for line in lines:
            m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
            if not m:
                continue
            s = slug(m.group(1))
            n = seen.get(s, 0)
            seen[s] = n + 1
            out.add(s if n == 0 else "%s-%d" % (s, n))
        cache[path] = out
    return cache[path]


def expand_braces(name):
    m = re.search(r"\{([^}]*)\}", name)
    if not m:
        return [name]
    return [x for alt in m.group(1).split(",")
            for x in expand_braces(name[:m.start()] + alt + name[m.end():])]


def check_file(root, path, problems):
    rel = os.path.relpath(path, root)
    with open(path, encoding="utf-8") as f:
        lines = strip_code_blocks(f.read())
    here = os.path.dirname(path)
    results = os.path.join(root, "bench", "results")
    for no, line in enumerate(lines, 1):
        for target in LINK.findall(line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                continue
            file_part, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(here, file_part)) if file_part else path
            if not os.path.exists(dest):
                problems.append("%s:%d: link to %s: no such file" % (rel, no, target))
            elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
                problems.append("%s:%d: link to %s: no heading with that anchor" % (rel, no, target))
        for name in RESULT_NAME.findall(line):
            name = name.rstrip(".,)")
            for n in expand_braces(name):
                if n and not os.path.exists(os.path.join(results, n)):
                    problems.append("%s:%d: bench/results/%s does not exist" % (rel, no, n))
        if rel.replace(os.sep, "/") == "docs/performance.md":
            for span in CODE_SPAN.findall(line):
                if FILE_NAME.match(span) and not span.startswith("bench/") \
                        and not os.path.exists(os.path.join(results, span)):
                    problems.append("%s:%d: source `%s` is not in bench/results" % (rel, no, span))


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    root = os.path.abspath(sys.argv[1])
    problems, count = [], 0
    for path in markdown_files(root):
        count += 1
        check_file(root, path, problems)
    for p in problems:
        print(p)
    print("%d Markdown files, %d broken references" % (count, len(problems)))
    sys.exit(1 if problems or count == 0 else 0)


if __name__ == "__main__":
    main()
