#!/usr/bin/python3
"""Level 2 or 3 under node losses: kill the whole job, wipe nodes, relaunch.

  l2_crash.py --trials T --seed S --result REGEX [--progress REGEX]
              [--crpm-args "ARGS with {cfg}"] [--basic K=V ...] [--advanced K=V ...]
              [--level 2|3] [--np N] [--node-size S] [--group-size K] [--parity M]
              [--env K=V ...] --workdir W -- PROGRAM ARGS...

8 ranks run as 4 simulated nodes (node_size = 2, ckpt_dir = <trial>/node%n,
see l2common.py).  First a run without checkpointing and a failure-free run
with level-2 checkpoints (PROGRAM ARGS plus --crpm-args, {cfg} replaced by the
configuration file) give the reference.  Then each trial, with a fresh
checkpoint directory, picks one node to lose and:

  launch 0   is SIGKILLed as a whole after a random delay, or, in three of
             every four trials, one rank SIGKILLs itself through
             CRPM_TEST_KILL at l2_sent (owner, data in flight to the partner),
             l2_applied (holder, partner copy written but not committed) or
             l2_committed (holder, committed, before the job's agreement) of a
             random checkpoint; the lost node is then that rank's, its
             partner's or the one before;
  before launch 1 the node's directory is removed (rm -rf), before each later
             launch again with probability 1/2 (always the same node: losing
             a neighbour while a rebuild is unfinished is a double failure);
  launches 1..max-kills are SIGKILLed after random delays (inside
             checkpoints, inside the rebuild at init, anywhere), the last
             one runs to the end.

A trial passes when the last launch exits 0 and
  * its lines matching --result equal the references' (bitwise results);
  * every --progress line of every launch is one the reference printed;
  * no checkpoint is lost: once rank 0 reported checkpoint N as committed
    ("[crpm] checkpoint N (L2)"), every later launch that got past init
    recovered ("[crpm] recovered checkpoint M") with M >= N (ids grow with
    the run in every program driven here), never started afresh (unless
    the launch before had printed the whole result: a kill inside
    crpm_finalize may leave nothing to recover).
The reference run must report level-2 checkpoints.  Random choices come
from --seed (printed); "N passed, M failed" is the last line.

With --level 3 (tests/l3; --np ranks as nodes of --node-size, groups of
--group-size nodes, l3_parity = --parity set in the configuration) the hooks
are l3_sent / l3_applied / l3_committed, and the nodes lost are, in every
group, 1..M random ones (M = --parity); the node of the hooked rank is among
them in half the trials.  Before launch 1 they are wiped; before a later
launch, when the launch before got past init (its rebuild done), a new random
set with probability 1/2, otherwise the same set again with probability 1/2
(more than M nodes of a group lost before their rebuild is a loss beyond the
code).  The reference must report level-3 checkpoints and at least one
relaunch must print "rebuilt from level-3 parity".  --env K=V goes into the
environment of every launch (CRPM_TEST_L3_VERIFY=1).  --hooks replaces the
cycle of kill points (tests/async: drain_start, drain_committed and the level's
points, which fire in the background thread with async = 1; at least one
trial's kill point must be reached); "{dir}" in a
--basic value is the run's directory (glbl_dir = {dir}/global).
"""
import argparse
import os
import random
import re
import shlex
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import l2common as L  # noqa: E402
from l2common import crpmtest  # noqa: E402
from crpmtest import Failure, check, complete_lines, tail  # noqa: E402

HOOKS = {2: ("l2_sent", "l2_applied", "l2_committed", None),
         3: ("l3_sent", "l3_applied", "l3_committed", None)}
REBUILT_L3 = re.compile(r"^\[crpm\] restart: \d+ containers? rebuilt from level-3 parity", re.M)


def parse():
    argv = sys.argv[1:]
    if "--" not in argv:
        sys.exit("l2_crash.py: missing '-- PROGRAM ARGS...'")
    cut = argv.index("--")
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, required=True)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--max-kills", type=int, default=2, help="timer kills after the first launch")
    ap.add_argument("--kill-after", default="30:100", metavar="A:B",
                    help="timer kills at A..B %% of the failure-free run's time")
    ap.add_argument("--hook-max", type=int, default=8, help="CRPM_TEST_KILL at checkpoint 2..N")
    ap.add_argument("--hook-start", type=int, default=0, help="trial t uses kill point t + N of the cycle")
    ap.add_argument("--expect", help="a regex some line of the failure-free run must match (async: the "
                    "levels committed in the background)")
    ap.add_argument("--hooks", help="the cycle of kill points, comma-separated ('none': a timer kill), instead "
                    "of the level's (async: drain_start,l2_sent,...)")
    ap.add_argument("--result", required=True)
    ap.add_argument("--progress")
    ap.add_argument("--crpm-args", default="--crpm {cfg}")
    ap.add_argument("--basic", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--advanced", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--timeout", type=float, default=60, help="seconds per launch")
    ap.add_argument("--level", type=int, choices=(2, 3), default=2)
    ap.add_argument("--np", type=int, default=L.NP, help="ranks")
    ap.add_argument("--node-size", type=int, default=L.NODE_SIZE, help="ranks per simulated node")
    ap.add_argument("--group-size", type=int, default=4, help="level 3: nodes per group")
    ap.add_argument("--parity", type=int, default=1, help="level 3: l3_parity, lose up to this many per group")
    ap.add_argument("--env", action="append", default=[], metavar="KEY=VALUE", help="for every launch")
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    a = ap.parse_args(argv[:cut])
    a.prog = argv[cut + 1:]
    if not a.prog:
        ap.error("no PROGRAM after '--'")
    a.result_re = re.compile(a.result)
    a.progress_re = re.compile(a.progress) if a.progress else None
    a.kill_pct = tuple(float(x) for x in a.kill_after.split(":"))
    a.basic = dict(kv.split("=", 1) for kv in a.basic)
    a.advanced = dict(kv.split("=", 1) for kv in a.advanced)
    a.env = dict(kv.split("=", 1) for kv in a.env)
    if a.hooks:
        HOOKS[a.level] = tuple(None if h == "none" else h for h in a.hooks.split(","))
    L.configure(a.np, a.node_size)
    if a.level == 3:
        if L.NNODES % a.group_size or not 1 <= a.parity <= a.group_size // 2:
            ap.error("level 3: %d nodes, groups of %d, parity %d" % (L.NNODES, a.group_size, a.parity))
        a.basic = dict({"group_size": a.group_size, "l3_parity": a.parity}, **a.basic)
    return a


class Ctx:
    def __init__(self, a):
        self.a = a
        self.workdir = crpmtest.make_workdir(a.workdir)

    def cmd(self, cfg):
        extra = [x.replace("{cfg}", cfg) for x in shlex.split(self.a.crpm_args)] if cfg else []
        return crpmtest.mpiexec(L.NP) + self.a.prog + extra

    def config(self, d, job):
        # "{dir}" in a value: the run's own directory (glbl_dir = {dir}/global)
        basic = {k: str(v).replace("{dir}", d) for k, v in self.a.basic.items()}
        return L.write_config(os.path.join(d, "crpm.ini"), d, job, basic, self.a.advanced)

    def results(self, text):
        return [x for x in complete_lines(text) if self.a.result_re.search(x)]


def reference(c):
    d = crpmtest.make_workdir(os.path.join(c.workdir, "reference"))
    plain = crpmtest.run_job(c.cmd(None), env=L.launch_env(d, c.a.env), timeout=c.a.timeout)
    check(plain.rc == 0, "run without checkpoints: exit %s\n%s" % (plain.rc, tail(plain.out)))
    cfg = c.config(d, "ref")
    ref = crpmtest.run_job(c.cmd(cfg), env=L.launch_env(d, c.a.env), timeout=c.a.timeout)
    check(ref.rc == 0, "failure-free run: exit %s\n%s" % (ref.rc, tail(ref.out)))
    res = c.results(ref.out)
    check(res and res == c.results(plain.out),
          "results with level-%d checkpoints differ from the run without:\n%s\n  without:\n%s" % (
              c.a.level, "\n".join(res), "\n".join(c.results(plain.out))))
    lv = L.levels(ref.out)
    check(c.a.level in lv, "the failure-free run reported no level-%d checkpoint (levels %s)\n%s" % (
        c.a.level, sorted(set(lv)), tail(ref.out)))
    check(L.recovered_id(ref.out) is None, "the failure-free run recovered something")
    check(not c.a.expect or re.search(c.a.expect, ref.out, re.M),
          "no line of the failure-free run matches --expect %r\n%s" % (c.a.expect, tail(ref.out)))
    crpmtest.clean_workdir(d)
    return res, set(complete_lines(ref.out)), ref.elapsed, len(lv)


def run_trial(c, t, ref_res, ref_lines, ref_time, n_ckpt):
    a = c.a
    rng = random.Random(a.seed * 1000003 + t)
    d = crpmtest.make_workdir(os.path.join(c.workdir, "trial-%02d" % t))
    cfg = c.config(d, "l2crash" if a.level == 2 else "l3crash")
    hooks = HOOKS[a.level]
    point = hooks[(t + a.hook_start) % len(hooks)]
    hook = None
    if point:
        r = rng.randrange(L.NP)
        hook = "%d:%s:%d" % (r, point, rng.randint(2, max(2, min(a.hook_max, n_ckpt - 1))))
        if a.level == 2:
            lost = (L.node_of(r) + rng.choice((-1, 0, 1))) % L.NNODES
        else:
            lost = pick_l3(a, rng, L.node_of(r) if rng.random() < 0.5 else None)
    else:
        lost = rng.randrange(L.NNODES) if a.level == 2 else pick_l3(a, rng)
    lo, hi = (x * ref_time / 100 for x in a.kill_pct)
    wiped, sets = [], []
    finalized = set()  # launches that left no checkpoint anywhere: killed in crpm_finalize


    def committed_before(i):
        # A node lost before any checkpoint was reported committed may take
        # the only evidence of a level-1 epoch with it: the library refuses
        # then (pair_error covers that); this test loses nodes that hold data.
        for k in range(i):
            p = os.path.join(d, "launch-%d.out" % k)
            if os.path.exists(p) and L.committed_ids(open(p, errors="replace").read()):
                return True
        return False

    def past_init(k):
        p = os.path.join(d, "launch-%d.out" % k)
        text = open(p, errors="replace").read() if os.path.exists(p) else ""
        return L.recovered_id(text) is not None or bool(L.committed_ids(text)) or bool(
            a.progress_re and any(a.progress_re.search(x) for x in complete_lines(text)))

    def env_for(i):  # called just before launch i, after launch i-1 died: the node loss happens here
        # crpm_finalize removes the checkpoints after the result is printed,
        # but the last lines of a killed job's output may never reach us
        # (Open MPI's forwarding dies with it): no file left on any node is
        # then the sign the run was complete (the library deletes nothing else)
        if i >= 1 and not L.holds_checkpoints(d, range(L.NNODES)):
            finalized.add(i - 1)
        if a.level == 2:
            if (i == 1 or (i > 1 and rng.random() < 0.5)) and committed_before(i):
                L.wipe(d, [lost])
                wiped.append(i)
        elif i >= 1 and committed_before(i):
            if not sets:
                new = lost
            elif past_init(i - 1):  # every rebuild done: any nodes may go
                new = pick_l3(a, rng) if rng.random() < 0.5 else None
            else:
                new = sets[-1] if rng.random() < 0.5 else None
            if new:
                L.wipe(d, new)
                wiped.append(i)
                sets.append(new)
        env = dict(a.env)
        if hook and i == 0:
            env["CRPM_TEST_KILL"] = hook
        return L.launch_env(d, env)

    def delay_for(i):
        if i == 0:
            return None if hook else rng.uniform(lo, hi)
        return rng.uniform(lo, hi) if i <= a.max_kills else None

    status, launches = crpmtest.relaunch_until_done(
        c.cmd(cfg), env_for, delay_for, a.timeout, a.max_kills + 2,
        log_for=lambda i: os.path.join(d, "launch-%d.out" % i), tolerate=lambda i, rc: hook is not None and i == 0)
    if a.level == 2:
        events = ["node %d lost before launch%s %s" % (lost, "es" if len(wiped) > 1 else "",
                                                        ",".join(map(str, wiped)))]
    else:
        events = ["nodes %s lost before launch %d" % (",".join(map(str, s)), i) for s, i in zip(sets, wiped)]
    if hook:
        events.insert(0, "hook %s: launch 0 exit %s" % (hook, launches[0]["rc"]))
    texts = [x["text"] for x in launches]
    for i, x in enumerate(launches):
        if x["killed_after"] is not None:
            events.append("launch %d killed at %.2f s" % (i, x["killed_after"]))
    why = None
    if hook and launches[0]["rc"] not in (0, None) and not re.search(r"signal 9\b|Killed", texts[0]):
        why = "launch 0 failed, but not through the kill hook %s\n%s" % (hook, tail(texts[0], 25))
    elif status != "done":
        last = launches[-1]
        why = "%s (launch %d, exit %s)\n%s" % (status, len(launches) - 1, last["rc"], tail(last["text"], 25))
    elif c.results(texts[-1]) != ref_res:
        why = "result differs from the failure-free run:\n%s\n  reference:\n%s" % (
            "\n".join(c.results(texts[-1])), "\n".join(ref_res))
    # Lose nothing: a relaunch recovers at least the newest committed checkpoint.
    newest, l2_restarts = None, 0
    for i, text in enumerate(texts):
        if why:
            break
        rec = L.recovered_id(text)
        past_init = rec is not None or (a.progress_re and any(a.progress_re.search(x) for x in complete_lines(text))) \
            or L.committed_ids(text) or i == len(texts) - 1
        if newest is not None and past_init:
            if rec is None:
                why = "launch %d started afresh although checkpoint %d was committed\n%s" % (i, newest, tail(text))
            elif rec < newest:
                why = "launch %d recovered checkpoint %d, older than the committed %d\n%s" % (i, rec, newest,
                                                                                          tail(text))
            elif i in wiped and a.level == 2:
                l2_restarts += 1
        if a.level == 3 and REBUILT_L3.search(text):
            l2_restarts += 1
        ids = L.committed_ids(text) + ([rec] if rec is not None else [])
        if ids:
            newest = max(ids + ([newest] if newest is not None else []))
        if c.results(text) == ref_res or i in finalized:
            newest = None  # the run was complete: killed in crpm_finalize, which removes the checkpoints
        if a.progress_re and not why:
            for x in complete_lines(text):
                if a.progress_re.search(x) and x not in ref_lines:
                    why = "launch %d printed a line the failure-free run never did: %r" % (i, x)
                    break
    events.append("%d launches" % len(launches))
    if not why:
        crpmtest.clean_workdir(d, keep=a.keep)
    return why, events, l2_restarts


def pick_l3(a, rng, must=None):
    """1..M random nodes of every group (M = --parity), node `must` among them."""
    out = []
    for g0 in range(0, L.NNODES, a.group_size):
        nodes = rng.sample(range(g0, g0 + a.group_size), rng.randint(1, a.parity))
        if must is not None and g0 <= must < g0 + a.group_size and must not in nodes:
            nodes[0] = must
        out += sorted(nodes)
    return out


def main():
    a = parse()
    if any(HOOKS[a.level][(t + a.hook_start) % len(HOOKS[a.level])] for t in range(a.trials)):
        crpmtest.require_test_hooks("killing ranks at level-%d points (CRPM_TEST_KILL)" % a.level)
    c = Ctx(a)
    print("seed %d, %d ranks as %d nodes, work dir %s" % (a.seed, L.NP, L.NNODES, c.workdir), flush=True)
    try:
        ref_res, ref_lines, ref_time, n_ckpt = reference(c)
    except Failure as e:
        print("reference: FAILED: %s\n0 passed, %d failed" % (e, a.trials))
        return 1
    print("reference: %.1f s, %d checkpoints, result: %s" % (ref_time, n_ckpt, " / ".join(ref_res)), flush=True)
    passed = failed = restarts = fired = 0
    for t in range(a.trials):
        t0 = time.time()
        why, events, n = run_trial(c, t, ref_res, ref_lines, ref_time, n_ckpt)
        restarts += n
        fired += any(e.startswith("hook ") and not e.endswith("exit 0") for e in events)
        if why:
            failed += 1
            print("trial %d: FAILED (%s): %s\n  logs in %s" % (t, ", ".join(events), why,
                                                            os.path.join(c.workdir, "trial-%02d" % t)), flush=True)
        else:
            passed += 1
            print("trial %d: ok (%s; %.1f s)" % (t, ", ".join(events), time.time() - t0), flush=True)
    print("%d relaunches after a node loss recovered a checkpoint%s" % (
        restarts, " (rebuilt from level-3 parity)" if a.level == 3 else ""))
    if failed == 0 and restarts == 0:
        print("FAILED: no relaunch after a node loss recovered anything; the kills came too early to test level %d"
              % a.level)
        failed += 1
    if failed == 0 and a.hooks and any(HOOKS[a.level]) and not fired:
        print("FAILED: no kill point of --hooks %s was reached" % a.hooks)
        failed += 1
    crpmtest.clean_workdir(c.workdir, keep=failed > 0 or a.keep)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
