#!/usr/bin/env python3
"""A full file system during checkpoints and restarts (issue 38, item 5).

Each scenario mounts a small tmpfs of its own (ckpt_dir = <mnt>/node%n, 4
ranks as 2 nodes), runs nospace_app, which fills the file system after a
checkpoint so that the next one runs out of space, and checks:

* the job ends by itself (no signal, no hang) and every rank got
  CRPM_ERR_IO or CRPM_ERR_REMOTE saying "No space left on device", naming a
  file on the full file system and the checkpoint (nospace_app checks);
* once the space is freed, a relaunch recovers the last committed checkpoint
  bit for bit and its next checkpoint succeeds;
* where the failed checkpoint left a level's redundancy as it was, a lost
  node is rebuilt from it (the committed checkpoint intact at that level).

Mounting needs root or CAP_SYS_ADMIN; where a probe mount fails the driver
skips (77) with the reason.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import crpmtest as ct  # noqa: E402

NP = 4
SIZE = "32m"


def mount(mnt):
    os.makedirs(mnt, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=" + SIZE, "tmpfs", mnt], capture_output=True, text=True)
    return r.returncode == 0, (r.stderr or r.stdout).strip()


def umount(mnt):
    subprocess.run(["umount", "-l", mnt], capture_output=True)
    shutil.rmtree(mnt, ignore_errors=True)


def write_cfg(mnt, extra, advanced=""):
    path = os.path.join(mnt + ".ini")
    with open(path, "w") as f:
        f.write("[basic]\nckpt_dir = %s/node%%n\njob_name = ns\nkeep_last_ckpt = 1\nnode_size = 2\n"
                "group_size = 2\nverbosity = 1\n%s\n[advanced]\nsegment_size = 64K\n%s\n" % (mnt, extra, advanced))
    return path


def launch(ctx, args, what, timeout=90):
    res = ct.run_job(ct.mpiexec(NP) + [ctx.app] + args, env=ct.job_env(), timeout=timeout)
    out = res.out
    ct.check(res.rc is not None, "%s hung (killed after %d s):\n%s" % (what, timeout, ct.tail(out)))
    ct.check(not re.search(r"signal|Bus error|SIGBUS", out), "%s: a rank died of a signal:\n%s" % (what, ct.tail(out)))
    ct.check(res.rc == 0, "%s exited with %s:\n%s" % (what, res.rc, ct.tail(out)))
    return out


def lose(mnt, node):
    shutil.rmtree(os.path.join(mnt, "node%d" % node), ignore_errors=True)


def free(mnt):
    try:
        os.unlink(os.path.join(mnt, "filler"))
    except FileNotFoundError:
        pass


def fill(mnt, leave=0):
    """Takes every free block of the file system (as nospace_app does) but
    about `leave` bytes."""
    path = os.path.join(mnt, "filler")
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        have = os.lseek(fd, 0, os.SEEK_END)
        st = os.statvfs(mnt)
        step = max(st.f_bavail * st.f_frsize - leave, 0)
        while step >= 4096:
            try:
                os.posix_fallocate(fd, have, step)
                have += step
            except OSError:
                step //= 2
            if leave:
                break
    finally:
        os.close(fd)


def scenario(name, levels, fill_after, extra="", args=(), then_lose=None, expect_status=None, lose_after=None,
             expect=None, then_free=False, advanced=""):
    """The common shape: run until the full file system stops a checkpoint,
    free the space, optionally lose nodes (then_lose: a level's redundancy
    must rebuild them), relaunch: recover bit for bit and checkpoint again;
    lose_after: lose a node once more and recover that new checkpoint;
    expect: the checkpoint the relaunch returns when not the run's last
    committed one (level 4 after every node was lost); then_free: the run
    frees the space itself and takes the failed checkpoint again."""
    def run(ctx):
        mnt = os.path.join(ctx.workdir, name)
        ok, why = mount(mnt)
        if not ok:
            umount(mnt)
            ct.skip("cannot mount a tmpfs at %s (needs root or CAP_SYS_ADMIN): %s" % (mnt, why))
        try:
            cfg = write_cfg(mnt, extra.replace("@MNT@", mnt), advanced)
            base = ["--crpm", cfg, "--levels", levels] + list(args)
            out = launch(ctx, base + ["--fill", mnt, "--fill-after", str(fill_after)] +
                         (["--then-free"] if then_free else []), "the run")
            if then_free:
                ct.check("after space was freed in the same run: ok" in out, "no checkpoint after freeing:\n%s"
                         % ct.tail(out))
            ct.check("failed for want of space on every rank" in out, "no checkpoint failed:\n%s" % ct.tail(out))
            committed = ct.number_after(out, r"^committed (\d+)")
            if expect is not None:
                committed = expect
            free(mnt)
            for node in then_lose or ():
                lose(mnt, node)
            out = launch(ctx, base + ["--recover", "--expect", str(committed)], "the relaunch")
            ct.check("recovered checkpoint %d bit for bit" % committed in out, "no recovery:\n%s" % ct.tail(out))
            if expect_status is not None:
                ct.check("(status %d)" % expect_status in out,
                         "the relaunch did not restart from level %d:\n%s" % (expect_status, ct.tail(out)))
            if lose_after is not None:
                lose(mnt, lose_after)
                out = launch(ctx, base + ["--recover", "--expect", str(committed + 1)], "the relaunch after a loss")
                ct.check("recovered checkpoint %d" % (committed + 1) in out, "no recovery:\n%s" % ct.tail(out))
        finally:
            umount(mnt)
    run.__name__ = "scenario_" + name
    return run


def restart_scenario(level):
    """A restart whose rebuild (node 0's containers from their partner
    copies, or from the parity) needs space the file system does not have:
    crpm_init fails on every rank naming the cause and the checkpoint; once
    freed, the relaunch rebuilds."""
    def run(ctx):
        mnt = os.path.join(ctx.workdir, "restart_l%d" % level)
        ok, why = mount(mnt)
        if not ok:
            umount(mnt)
            ct.skip("cannot mount a tmpfs at %s (needs root or CAP_SYS_ADMIN): %s" % (mnt, why))
        try:
            cfg = write_cfg(mnt, "")
            base = ["--crpm", cfg, "--levels", "%d,%d" % (level, level)]
            out = launch(ctx, base, "the first run")
            committed = ct.number_after(out, r"^committed (\d+)")
            lose(mnt, 0)
            fill(mnt, leave=64 << 10)  # room for the directories and locks, not for the containers
            out = launch(ctx, base + ["--recover", "--expect-init-fail", "--where", mnt, "--expect", "0"],
                         "the relaunch on a full file system")
            ct.check("init failed as expected" in out, "crpm_init did not fail:\n%s" % ct.tail(out))
            ct.check(re.search(r"restart at the checkpoint of epoch %d\b" % committed, out),
                     "the error does not name the checkpoint (epoch %d):\n%s" % (committed, ct.tail(out)))
            free(mnt)
            out = launch(ctx, base + ["--recover", "--expect", str(committed)], "the relaunch after freeing space")
            ct.check("(status %d)" % level in out, "not rebuilt from level %d:\n%s" % (level, ct.tail(out)))
        finally:
            umount(mnt)
    run.__name__ = "scenario_restart_l%d" % level
    return run


class Ctx:
    pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--app", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--l4", type=int, default=1)
    ap.add_argument("--only")
    a = ap.parse_args()
    ctx = Ctx()
    ctx.app = a.app
    ctx.workdir = ct.make_workdir(a.workdir)
    probe = os.path.join(ctx.workdir, "probe")
    ok, why = mount(probe)
    umount(probe)
    if not ok:
        ct.clean_workdir(ctx.workdir)
        ct.skip("cannot mount a tmpfs (needs root or CAP_SYS_ADMIN; uid %d): %s" % (os.geteuid(), why))
    scenarios = [
        # level 1: the container grows (an array 4 times larger)
        scenario("l1_grow", "1,1,1", 2, args=["--grow-at", "3"]),
        # an array ending inside a segment grows: that segment's copies get longer
        scenario("l1_grow_partial", "1,1,1", 2, args=["--n", "33001", "--grow-at", "3"]),
        scenario("l2_grow_partial", "2,2,2", 2, args=["--n", "33001", "--grow-at", "3"], then_lose=[1],
                 expect_status=2),
        # the heap's extent grows (a large crpm_malloc block)
        scenario("heap_grow", "1,1,1", 2, extra="heap_size = 64M", args=["--heap", "--grow-at", "3"]),
        # level 2: the first copies (whole-file syncs), synchronously and in the background
        scenario("l2_sync", "1,1,2", 2, lose_after=0),
        scenario("l2_async", "1,1,2", 2, extra="async = 1", lose_after=1),
        # level 2: a copy one epoch behind replays the owner's ranges (stages)
        scenario("l2_stages", "2,1,2", 2),
        # the run goes on once space is freed: the failed checkpoint taken again, then a node lost
        scenario("l2_resume", "1,1,2", 2, then_free=True, lose_after=0),
        scenario("l2_resume_async", "1,1,2", 2, extra="async = 1", then_free=True),
        scenario("l1_resume", "1,1,1", 2, args=["--grow-at", "3"], then_free=True),
        # method = full: a new file per checkpoint, written with write(2)
        scenario("full", "1,1,1", 2, advanced="method = full", then_free=True),
        # the partner copies of checkpoint 2 survive a failed checkpoint 3: node 0 rebuilt from them
        scenario("l2_intact", "2,2,2", 2, args=["--grow-at", "3"], then_lose=[0], expect_status=2),
        # level 3: new parity containers, and parity updated in place
        scenario("l3_new", "1,1,3", 2, lose_after=0),
        scenario("l3_update", "3,1,3", 2),
        scenario("l3_resume", "3,1,3", 2, then_free=True, lose_after=1),
        scenario("l3_intact", "3,3,3", 2, args=["--grow-at", "3"], then_lose=[1], expect_status=3),
    ]
    # part of what the next checkpoint needs is there: it fails in the middle
    for leave in (12288, 200000):
        scenarios += [
            scenario("l1_grow_leave%d" % leave, "1,1,1", 2, args=["--grow-at", "3", "--leave", str(leave)]),
            scenario("heap_grow_leave%d" % leave, "1,1,1", 2, extra="heap_size = 64M",
                     args=["--heap", "--grow-at", "3", "--leave", str(leave)]),
            scenario("l2_sync_leave%d" % leave, "1,1,2", 2, args=["--leave", str(leave)], then_free=True),
            scenario("l2_async_leave%d" % leave, "1,1,2", 2, extra="async = 1", args=["--leave", str(leave)]),
            scenario("l3_new_leave%d" % leave, "1,1,3", 2, args=["--leave", str(leave)], then_free=True),
            scenario("l3_update_leave%d" % leave, "3,1,3", 2, args=["--n", "98304", "--leave", str(leave)]),
            scenario("l2_stages_leave%d" % leave, "2,1,2", 2, args=["--n", "98304", "--leave", str(leave)]),
        ]
    if a.l4:
        # level 4 with glbl_dir on the full file system: the file of checkpoint 2 stays the job's
        # level-4 checkpoint (every node lost: the relaunch reads it)
        scenarios.append(scenario("l4", "1,4,1,4", 3, extra="glbl_dir = @MNT@/glbl", then_lose=[0, 1],
                                  expect_status=4, expect=2))
        scenarios.append(scenario("l4_async", "1,4,1,4", 3, extra="glbl_dir = @MNT@/glbl\nasync = 1",
                                  then_lose=[0, 1], expect_status=4, expect=2))
    scenarios += [restart_scenario(2), restart_scenario(3)]
    return ct.run_scenarios(scenarios, ctx, ctx.workdir, only=a.only)


if __name__ == "__main__":
    sys.exit(main())
