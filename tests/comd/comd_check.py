#!/usr/bin/env python3
"""Checks of the CoMD proxy (apps/comd).

  comd_check.py reference --comd EXE [--layouts IxJxK,...] [-- comd args...]
      Default problem (20^3 unit cells, 100 steps, 600 K) on each layout
      (default 1x1x1): the step-0 total energy per atom must be the upstream
      figure -1.166063303458 to 1e-9, the step-0 kinetic energy 1.5 kB T,
      |eFinal/eInitial - 1| <= 2e-5, no atom lost, step 100 near upstream's
      (-1.16605 eV, about 316 K), and every layout must print exactly what
      the first prints.

  comd_check.py layouts --comd EXE --layouts IxJxK,... [--min-migrations M]
                [-- comd args...]
      Runs the same problem on every rank layout: all energy lines and
      results must be identical, and every multi-rank run must have moved at
      least M atoms between ranks (so migration is exercised).

  comd_check.py restart --comd EXE --np N --keep1 CFG --ckpt-every K
                --steps A,B [-- comd args...]
      (CFG must set keep_last_ckpt = 1.)  Run 1: A steps with checkpointing
      must print what a run without checkpointing prints.  Run 2: B > A steps
      with the same checkpoint directory must restart from the last
      checkpoint of run 1, print only energy lines of a failure-free B-step
      run, and the same results.  Run 3: a relaunch with another
      temperature must be refused.

comd arguments after "--" are passed to every run.  MPI launch
settings come from CRPM_MPIEXEC and CRPM_MPIEXEC_FLAGS (crpm_add_script_test).
"""
import argparse
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import crpmtest  # noqa: E402

ENERGY_RE = re.compile(r"^ +(\d+) +(\S+) +(\S+) +(\S+) +(\S+) +(\S+) +(\d+)$")
RESULT_RE = re.compile(r"^  (Initial energy|Final energy|eFinal/eInitial|Final temperature|"
                       r"Final atom count)")
MIGRATION_RE = re.compile(r"^Migration: (\d+) link-cell changes, (\d+) atoms sent")
RESTART_RE = re.compile(r"^crpm: restarted from the checkpoint of step (\d+)")

KB = 8.6173324e-5


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def launch(np_, cmd, env=None, timeout=120, expect_ok=True):
    full = crpmtest.mpiexec(np_) + cmd
    print("+ " + crpmtest.format_cmd(full), flush=True)
    r = crpmtest.run_job(full, env=crpmtest.job_env(env), timeout=timeout, separate_stderr=True)
    if r.timed_out:
        fail("timed out after %s s" % timeout)
    sys.stdout.write(r.out)
    if r.err:
        sys.stdout.write("[stderr]\n" + r.err)
    if expect_ok and r.rc != 0:
        fail("exit status %d" % r.rc)
    return r.rc, r.lines


def energy_lines(lines):
    return [l for l in lines if ENERGY_RE.match(l)]


def result_lines(lines):
    return [l for l in lines if RESULT_RE.match(l)]


def energies(lines):
    """step -> (total, potential, kinetic, temperature, atoms)"""
    out = {}
    for l in lines:
        m = ENERGY_RE.match(l)
        if m:
            out[int(m.group(1))] = (float(m.group(3)), float(m.group(4)), float(m.group(5)),
                                    float(m.group(6)), int(m.group(7)))
    return out


def result_value(lines, key):
    for l in lines:
        if l.startswith("  " + key):
            return l.split(":", 1)[1].strip()
    fail("no '%s' line" % key)


def check(cond, msg):
    if not cond:
        fail(msg)
    print("ok: " + msg, flush=True)


def same_as(ref, layout, got):
    if got != ref[1]:
        for x, y in zip(ref[1], got):
            if x != y:
                print("  %s: %s\n  %s: %s" % (ref[0], x, layout, y))
        fail("layout %s prints other results than %s" % (layout, ref[0]))
    print("ok: layout %s prints exactly what %s prints" % (layout, ref[0]), flush=True)


def layout_args(layout):
    i, j, k = (int(v) for v in layout.split("x"))
    return i * j * k, ["-i", str(i), "-j", str(j), "-k", str(k)]


def check_reference(lines):
    e = energies(lines)
    check(0 in e and 100 in e, "energy lines for steps 0 and 100 printed")
    tot0, pe0, ke0, t0, n0 = e[0]
    check(n0 == 32000, "32000 atoms at step 0 (got %d)" % n0)
    check(abs(tot0 - (-1.166063303458)) <= 1e-9,
          "step-0 energy %.12f within 1e-9 of -1.166063303458" % tot0)
    check(abs(ke0 - 1.5 * KB * 600.0) <= 1e-12,
          "step-0 kinetic energy %.12f is 1.5 kB T" % ke0)
    ratio = float(result_value(lines, "eFinal/eInitial"))
    check(abs(ratio - 1.0) <= 2e-5, "|eFinal/eInitial - 1| = %.3g <= 2e-5" % abs(ratio - 1.0))
    check("no atoms lost" in result_value(lines, "Final atom count"), "no atoms lost")
    tot100, _, _, t100, n100 = e[100]
    check(n100 == 32000, "32000 atoms at step 100")
    # Upstream's velocities come from another generator: same ensemble,
    # different sample, so only closeness is expected.
    check(abs(tot100 - (-1.16605)) <= 2e-5, "step-100 energy %.12f near -1.16605" % tot100)
    check(290.0 <= t100 <= 340.0, "step-100 temperature %.2f K near 316 K" % t100)


def cmd_reference(a, extra):
    ref = None
    for layout in (a.layouts or "1x1x1").split(","):
        np_, largs = layout_args(layout)
        _, lines = launch(np_, [a.comd] + largs + extra, timeout=a.timeout)
        check_reference(lines)
        got = energy_lines(lines) + result_lines(lines)
        if ref is None:
            ref = (layout, got)
        else:
            same_as(ref, layout, got)


def cmd_layouts(a, extra):
    ref = None
    for layout in a.layouts.split(","):
        np_, largs = layout_args(layout)
        _, lines = launch(np_, [a.comd] + largs + extra, timeout=a.timeout)
        got = energy_lines(lines) + result_lines(lines)
        check(len(energy_lines(lines)) >= 2 and len(result_lines(lines)) == 5,
              "layout %s printed energy and result lines" % layout)
        check("no atoms lost" in result_value(lines, "Final atom count"),
              "layout %s lost no atoms" % layout)
        if np_ > 1:
            mig = [MIGRATION_RE.match(l) for l in lines if MIGRATION_RE.match(l)]
            check(mig and int(mig[0].group(2)) >= a.min_migrations,
                  "layout %s moved >= %d atoms between ranks" % (layout, a.min_migrations))
        if ref is None:
            ref = (layout, got)
        else:
            same_as(ref, layout, got)


def cmd_restart(a, extra):
    steps_a, steps_b = (int(v) for v in a.steps.split(","))
    if not (0 < steps_a < steps_b and a.ckpt_every <= steps_a):
        fail("need 0 < A < B and ckpt-every <= A")
    work = crpmtest.make_workdir(prefix="comd-restart-")
    env = {"CRPM_CKPT_DIR": work, "CRPM_JOB_NAME": "comd-restart"}
    try:
        crpm = ["--crpm", a.keep1, "--ckpt-every", str(a.ckpt_every)]
        _, plain_a = launch(a.np, [a.comd, "-N", str(steps_a)] + extra, timeout=a.timeout)
        _, plain_b = launch(a.np, [a.comd, "-N", str(steps_b)] + extra, timeout=a.timeout)
        _, run1 = launch(a.np, [a.comd, "-N", str(steps_a)] + extra + crpm, env=env,
                         timeout=a.timeout)
        check(energy_lines(run1) == energy_lines(plain_a) and
              result_lines(run1) == result_lines(plain_a),
              "run with checkpointing prints what the run without prints")
        nck = steps_a // a.ckpt_every
        check(any(re.match(r"^crpm: rank 0: %d checkpoints" % nck, l) for l in run1),
              "run 1 took %d checkpoints" % nck)

        _, run2 = launch(a.np, [a.comd, "-N", str(steps_b)] + extra + crpm, env=env,
                         timeout=a.timeout)
        last = nck * a.ckpt_every
        rs = [RESTART_RE.match(l) for l in run2 if RESTART_RE.match(l)]
        check(rs and int(rs[0].group(1)) == last, "run 2 restarted from step %d" % last)
        e2 = energy_lines(run2)
        ref_e = energy_lines(plain_b)
        check(e2 and all(l in ref_e for l in e2) and
              all(int(ENERGY_RE.match(l).group(1)) > last for l in e2),
              "run 2 printed only energy lines of the failure-free run, after step %d" % last)
        expect = [l for l in ref_e if int(ENERGY_RE.match(l).group(1)) > last]
        check(e2 == expect, "run 2 printed every energy line after step %d" % last)
        check(result_lines(run2) == result_lines(plain_b),
              "run 2 ends with the results of the failure-free run")

        rc, run3 = launch(a.np, [a.comd, "-N", str(steps_b)] + extra + ["-T", "650"] + crpm,
                          env=env, timeout=a.timeout, expect_ok=False)
        check(rc != 0, "relaunch with another temperature refused (exit %d)" % rc)
        check(not energy_lines(run3), "refused relaunch printed no energy lines")
    finally:
        crpmtest.clean_workdir(work)


def main():
    argv = sys.argv[1:]
    extra = []
    if "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1:]
    ap = argparse.ArgumentParser(allow_abbrev=False)
    ap.add_argument("mode", choices=["reference", "layouts", "restart"])
    ap.add_argument("--comd", required=True)
    ap.add_argument("--np", type=int, default=1, help="ranks (restart mode)")
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--layouts")
    ap.add_argument("--min-migrations", type=int, default=0)
    ap.add_argument("--keep1")
    ap.add_argument("--ckpt-every", type=int, default=5)
    ap.add_argument("--steps")
    a = ap.parse_args(argv)
    if a.mode == "reference":
        cmd_reference(a, extra)
    elif a.mode == "layouts":
        if not a.layouts:
            fail("--layouts needed")
        cmd_layouts(a, extra)
    else:
        if not (a.keep1 and a.steps):
            fail("--keep1 and --steps needed")
        cmd_restart(a, extra)
    print("PASS", flush=True)


if __name__ == "__main__":
    main()
