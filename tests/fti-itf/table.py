#!/usr/bin/env python3
"""The table of FTI's suites on libcrpm (run_suites.sh): one row per suite,
cases, passed, failed and not applicable per rank count, from the results
itf_driver.sh wrote (<resdir>/np<N>.tsv).

    table.py RESDIR KNOWN_FAILURES.tsv N...

Exit code 1 when a case failed that known_failures.tsv does not list, or a
listed case passed."""
import sys, os, re, collections
resdir, known_file, ranks = sys.argv[1], sys.argv[2], sys.argv[3:]
known = []
for line in open(known_file):
    if line.startswith("#") or not line.strip():
        continue
    suite, fn, regex, why = line.rstrip("\n").split("\t")[:4]
    known.append((suite, fn, re.compile(regex), why))
def known_why(suite, fn, params):
    for s, f, r, why in known:
        if s == suite and f in ("*", fn) and r.search(" %s " % params):
            return why
    return None
rows = collections.OrderedDict()
unexpected, fixed = [], []
for n in ranks:
    for line in open(os.path.join(resdir, "np%s.tsv" % n)):
        suite, fn, params, verdict, why = (line.rstrip("\n").split("\t") + [""] * 5)[:5]
        c = rows.setdefault(suite, {}).setdefault(n, collections.Counter())
        if verdict == "skip":
            continue
        c["cases"] += 1
        c[verdict] += 1
        k = known_why(suite, fn, params)
        if verdict == "fail" and not k:
            unexpected.append("%s ranks: %s %s %s: %s" % (n, suite, fn, params, why))
        if verdict == "pass" and k:
            fixed.append("%s ranks: %s %s %s (known_failures.tsv: %s)" % (n, suite, fn, params, k))
head = "| suite |" + "".join(" %s ranks: cases | passed | failed | n/a |" % n for n in ranks)
print(head)
print("|---|" + "---:|" * (4 * len(ranks)))
tot = {n: collections.Counter() for n in ranks}
for suite, per in rows.items():
    cells = []
    for n in ranks:
        c = per.get(n, collections.Counter())
        tot[n].update(c)
        cells += [c["cases"], c["pass"], c["fail"], c["na"]]
    print("| %s | %s |" % (suite, " | ".join(str(x) for x in cells)))
cells = []
for n in ranks:
    cells += [tot[n]["cases"], tot[n]["pass"], tot[n]["fail"], tot[n]["na"]]
print("| **all** | %s |" % " | ".join(str(x) for x in cells))
# Failures listed in known_failures.tsv (open work, each with its reason) do
# not fail the run; any other failure does, and so does a listed case that
# passes (the list must shrink with the fixes).
for u in unexpected:
    print("unexpected failure: " + u)
for f in fixed:
    print("passes now, remove it from known_failures.tsv: " + f)
sys.exit(1 if unexpected or fixed else 0)
