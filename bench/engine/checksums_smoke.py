#!/usr/bin/env python3
"""Smoke test of bench_engine --checksums: a small run succeeds and its JSON
holds the figures the budget verdicts are made of.
Usage: checksums_smoke.py BENCH_ENGINE OUT_DIR"""
import json
import os
import shutil
import subprocess
import sys
import tempfile


def main():
    bench, out = sys.argv[1], sys.argv[2]
    if os.environ.get("CRPM_TEST_HOOKS", "ON").upper() == "OFF":
        print("SKIPPED: the baseline without checksums needs a libcrpm configured with -DCRPM_TEST_HOOKS=ON")
        sys.exit(77)
    os.makedirs(out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="crpm-bench-smoke-", dir="/dev/shm")
    try:
        subprocess.run([bench, "--checksums", "--sizes", "8", "--reps", "3", "--dir", work, "--out", out],
                       check=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    with open(os.path.join(out, "engine_checksums.json")) as f:
        d = json.load(f)
    b = d["budget"]
    for k in ("pair_ratio_1pct_worst", "pair_ratio_100pct_worst", "cpu_pair_ratio_1pct_worst",
              "cpu_pair_ratio_100pct_worst", "recover_verify_gb_per_s_worst", "recover_verify_cpu_gb_per_s_worst",
              "first_touch_gb_per_s_best"):
        if not b.get(k, 0) > 0:
            sys.exit(f"budget figure {k} missing or not positive: {b.get(k)}")
    whats = {p["what"] for p in d["points"]}
    for w in ("checkpoint 1% dirty", "checkpoint 100% dirty", "fresh recover + verify", "fresh recover, no CRCs",
              "fresh floor: first touch", "fresh memcpy, touched"):
        if w not in whats:
            sys.exit(f"row {w!r} missing from the JSON")
    with open(os.path.join(out, "engine_checksums.csv")) as f:
        rows = f.read().splitlines()
    if len(rows) < 1 + len(d["points"]) - 1:
        sys.exit("CSV shorter than the JSON")
    print("ok:", b)


if __name__ == "__main__":
    main()
