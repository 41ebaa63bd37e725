#!/usr/bin/python3
"""crpm-export and crpm-inspect on the files of levels 2 and 3.

Two jobs of 4 ranks as 4 simulated nodes (node_size = 1, ckpt_dir =
<dir>/node%n), run by the level-2 test program (tests/l2/l2_app.c) with
keep_last_ckpt = 1: job "j2" checkpoints at level 2 (each node also holds the
partner copy of the previous node's rank), job "j3" at level 3 (each node
also holds its rank's parity container).

  export_parity   a parity container is refused as rank data, alone, among
                  containers and with -f, with a message naming the file and
                  no output file, also under a container's name (by its
                  layout record, which crpm-inspect prints and checks); a directory mixing containers with parity
                  (and partner copies) exports only the containers it holds
                  ("1 of 4", with -f too), naming what it left out, and the
                  four node directories export "4 of 4" of rank data
  export_partner  a partner copy is refused without -p; with -p it stands for
                  its owner, by name or from a directory for the rank no
                  container covers, the report names it ("1 of them from
                  level-2 partner copies", "rank 0: from its partner copy"),
                  and the file holds the same data as the export of rank 0's
                  own container (crpm-inspect's crc32 of every dataset); a
                  container and its copy together are refused; a copy under
                  another owner's name is refused
  inspect_labels  crpm-inspect labels a parity container with the job epoch
                  its parity describes and "not rank data", a partner copy
                  with its owner, and lists a node directory by kind

Prints one line per scenario and "N passed, M failed" last.
"""
import argparse
import os
import re
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import crpmtest  # noqa: E402
from crpmtest import check, tail  # noqa: E402

NP = 4
TIMEOUT = 60
ARGS = ["--n", "4096", "--window", "256", "--iters", "6", "--ckpt-every", "2"]


class Ctx:
    def __init__(self, a, workdir):
        self.app, self.export, self.inspect, self.workdir = a.app, a.export, a.inspect, workdir
        self.made = False

    def tool(self, cmd, expect):
        r = crpmtest.run_job(cmd, timeout=TIMEOUT, separate_stderr=True)
        check(not r.timed_out, "hung: " + crpmtest.format_cmd(cmd))
        check(r.rc == expect, "%s: exit code %s, expected %d\n--- stdout\n%s--- stderr\n%s" % (
            crpmtest.format_cmd(cmd), r.rc, expect, r.out[-3000:], r.err[-3000:]))
        return r

    def node(self, job, k, name=None):
        d = os.path.join(self.workdir, "node%d" % k, job)
        return os.path.join(d, name) if name else d

    def jobs(self):
        """Runs the two jobs once, for every scenario."""
        if self.made:
            return
        for job, level in (("j2", 2), ("j3", 3)):
            cfg = os.path.join(self.workdir, job + ".ini")
            with open(cfg, "w") as f:
                f.write("[basic]\nckpt_dir = %s\njob_name = %s\nnode_size = 1\nkeep_last_ckpt = 1\n"
                        "group_size = 4\nl3_parity = 1\n" % (os.path.join(self.workdir, "node%n"), job))
            env = crpmtest.job_env(shm_dir=self.workdir, clear=crpmtest.CRPM_ENV_OVERRIDES)
            r = crpmtest.run_job(crpmtest.mpiexec(NP) + [self.app, "--crpm", cfg, "--level", str(level)] + ARGS,
                                 env=env, timeout=TIMEOUT)
            check(r.rc == 0, "level-%d job: exit code %s\n%s" % (level, r.rc, tail(r.out, 20)))
        for k in range(NP):
            check(os.path.exists(self.node("j3", k, "parity-%d.crpm" % k)), "no parity container on node %d" % k)
            check(os.path.exists(self.node("j2", k, "partner-%d.crpm" % ((k + NP - 1) % NP))),
                  "no partner copy on node %d" % k)
        self.made = True


def out_file(c, name):
    p = os.path.join(c.workdir, name)
    if os.path.exists(p):
        os.unlink(p)
    return p


def dataset_crcs(c, h5, rank):
    """crpm-inspect's crc32 of every dataset of /rank_<rank> in h5."""
    out = c.tool([c.inspect, h5], 0).out
    m = re.search(r"^  rank %d: .*\n((?:    .*\n)+)" % rank, out, re.M)
    check(m, "no rank %d in the report of %s\n%s" % (rank, h5, out))
    return re.findall(r"^    (id_\S+) .* crc32 ([0-9a-f]+)  ok$", m.group(1), re.M)


def scenario_export_parity(c):
    c.jobs()
    h5 = out_file(c, "p.h5")
    par = c.node("j3", 1, "parity-1.crpm")
    for args in ([par], ["-f", par], ["-f", c.node("j3", 0, "rank-0.crpm"), c.node("j3", 2, "rank-2.crpm"),
                                      c.node("j3", 3, "rank-3.crpm"), par]):
        r = c.tool([c.export, "-o", h5] + args, 1)
        check(par + " is a level-3 parity container" in r.err and "not rank data" in r.err,
              "parity refusal (%s): no clear message\n%s" % (" ".join(args), r.err))
        check(not os.path.exists(h5) and not os.path.exists(h5 + ".tmp"), "an output file was written")
    # a node directory: one container, its parity container and a partner-copy lock: 1 of 4
    for force in ([], ["-f"]):
        r = c.tool([c.export, "-o", h5] + force + [c.node("j3", 1)], 0)
        check(re.search(r"^exported 1 of 4 rank\(s\) of job 'j3' .*to %s$" % re.escape(h5), r.out, re.M),
              "node directory export: expected 1 of 4 ranks\n" + r.out + r.err)
        check("left out 1 level-3 parity container(s)" in r.err, "left-out parity not named\n" + r.err)
        os.unlink(h5)
    # a parity container under a container's name: refused by what its layout record says
    renamed = os.path.join(c.workdir, "renamed")
    os.makedirs(renamed, exist_ok=True)
    shutil.copy(c.node("j3", 3, "parity-3.crpm"), os.path.join(renamed, "rank-3.crpm"))
    r = c.tool([c.export, "-f", "-o", h5, os.path.join(renamed, "rank-3.crpm")], 1)
    check("rank-3.crpm is a level-3 parity container (its layout record says so" in r.err and
          not os.path.exists(h5), "renamed parity container exported\n" + r.out + r.err)
    r = c.tool([c.inspect, os.path.join(renamed, "rank-3.crpm")], 1)
    check("named as a rank's container but its layout record says it is a level-3 parity container" in r.err and
          re.search(r"^layout:\s+level-3 parity container of rank 3; node 3 of 4 \(node_size 1\), group_size 4, "
                    r"l3_parity 1$", r.out, re.M), "renamed parity container inspected\n" + r.out + r.err)
    r = c.tool([c.export, "-f", "-o", h5] + [c.node("j3", k) for k in range(NP)], 0)
    check(re.search(r"^exported 4 of 4 rank\(s\) of job 'j3' \(checkpoint id 6, epoch 3, ", r.out, re.M) and
          "partner" not in r.out, "four node directories\n" + r.out + r.err)
    check(r.err.count("left out 1 level-3 parity container(s)") == NP, "left-out parity per directory\n" + r.err)


def scenario_export_partner(c):
    c.jobs()
    own = out_file(c, "own.h5")
    c.tool([c.export, "-o", own] + [c.node("j2", k) for k in range(NP)], 0)
    h5 = out_file(c, "pc.h5")
    pc = c.node("j2", 1, "partner-0.crpm")
    rest = [c.node("j2", k, "rank-%d.crpm" % k) for k in range(1, NP)]
    r = c.tool([c.export, "-o", h5, pc] + rest, 1)
    check(pc + " is a level-2 partner copy of rank 0's container" in r.err and "-p" in r.err,
          "partner copy without -p: no clear refusal\n" + r.err)
    check(not os.path.exists(h5), "an output file was written")
    r = c.tool([c.export, "-o", h5, c.node("j2", 1)], 0)  # without -p: the copy is left out, not taken for rank 0
    check(re.search(r"^exported 1 of 4 rank", r.out, re.M) and "left out 1 level-2 partner copy file(s)" in r.err,
          "directory without -p\n" + r.out + r.err)
    for args in ([pc] + rest, [c.node("j2", k) for k in range(1, NP)]):
        os.path.exists(h5) and os.unlink(h5)
        r = c.tool([c.export, "-p", "-o", h5] + args, 0)
        what = "export with -p (%s)" % " ".join(args)
        check(re.search(r"^exported 4 of 4 rank\(s\) of job 'j2' .*; 1 of them from level-2 partner copies$",
                        r.out, re.M), what + ": report\n" + r.out + r.err)
        check(re.search(r"^rank 0: from its partner copy %s " % re.escape(pc), r.out, re.M),
              what + ": rank 0's source not named\n" + r.out)
        check(dataset_crcs(c, h5, 0) == dataset_crcs(c, own, 0) and dataset_crcs(c, h5, 0),
              what + ": rank 0's data differs from its container's")
    # with every node directory, rank 0's own container wins over its copy
    os.unlink(h5)
    r = c.tool([c.export, "-p", "-o", h5] + [c.node("j2", k) for k in range(NP)], 0)
    check("partner" not in r.out, "a partner copy was used although rank 0's container was given\n" + r.out)
    r = c.tool([c.export, "-p", "-o", out_file(c, "x.h5"), pc, c.node("j2", 0, "rank-0.crpm")], 1)
    check("are both rank 0's data" in r.err, "a container and its copy together\n" + r.err)
    wrong = c.node("j2", 1, "partner-2.crpm")
    shutil.copy(pc, wrong)
    try:
        r = c.tool([c.export, "-p", "-o", out_file(c, "x.h5"), wrong], 1)
        check("named as the partner copy of rank 2, but it mirrors rank 0's container" in r.err,
              "copy under another owner's name\n" + r.err)
    finally:
        os.unlink(wrong)


def scenario_inspect_labels(c):
    c.jobs()
    out = c.tool([c.inspect, c.node("j3", 2, "parity-2.crpm")], 0).out
    check(re.search(r"^kind:\s+level-3 parity container of rank 2 \(codewords: [0-9, ]+; job j3, rank 2 of 4\): "
                    r"parity of the job's epoch 3 \(the checkpoint id below\), not rank data$", out, re.M) and
          re.search(r"^committed:\s+epoch \d+, checkpoint id 3,", out, re.M), "parity label\n" + out)
    out = c.tool([c.inspect, c.node("j2", 2, "partner-1.crpm")], 0).out
    check(re.search(r"^kind:\s+partner copy of rank 1's container \(job j2, owner rank 1 of 4, epoch 3\)$", out, re.M),
          "partner label\n" + out)
    out = c.tool([c.inspect, c.node("j3", 2)], 0).out
    check(re.search(r"^containers:\s+1 \(ranks 2\)\n", out, re.M) and
          re.search(r"^parity:\s+1 \(level-3 parity containers of ranks 2\)$", out, re.M),
          "directory listing\n" + out)


SCENARIOS = [scenario_export_parity, scenario_export_partner, scenario_inspect_labels]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--app", required=True, help="the level-2 test program (tests/l2/l2_app.c)")
    ap.add_argument("--export", required=True)
    ap.add_argument("--inspect", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--only")
    a = ap.parse_args()
    c = Ctx(a, crpmtest.make_workdir(a.workdir))
    return crpmtest.run_scenarios(SCENARIOS, c, c.workdir, only=a.only)


if __name__ == "__main__":
    sys.exit(main())
