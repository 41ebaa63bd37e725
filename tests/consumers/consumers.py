#!/usr/bin/python3
"""libcrpm as a newcomer uses it: install, then build outside the tree.

Installs the build tree into a scratch prefix (and, separately, the `apps`
component), then checks:
  * layout: headers, Fortran module in a compiler-specific directory (not in
    include/), CMake package, pkg-config files without ../ in libdir and with
    an rpath, example configs in share/crpm, LICENSE;
  * man pages: crpm-inspect(1), crpm-export(1) (when built), crpm(3) and a
    page for every function declared in crpm.h, each rendered by `man -l`
    and free of groff warnings;
  * the installed tools and the applications installed on request
    (crpm-<name>, nothing under a generic name) start from the install tree
    without LD_LIBRARY_PATH;
  * consumers built outside the tree, each run on 2 ranks once failure-free,
    once killed in the middle of a checkpoint (CRPM_TEST_KILL), then
    relaunched: the relaunch must restart from a checkpoint and print the
    failure-free result bit for bit.  Consumers: a CMake C project, a CMake
    C++-only project, a CMake Fortran-only project, a C program and a
    Fortran program built with mpicc/mpif90 and pkg-config, and the README's
    minimal example, extracted from README.md and compiled with
    -std=c99 -pedantic-errors.
Every program runs with LD_LIBRARY_PATH removed from the environment.

With --static-c-only the script first configures and builds, in the work
directory, the library alone as static libraries with no usable C++ compiler
(CMAKE_CXX_COMPILER=/nonexistent), and checks that build instead (the
applications scenario does not apply).
Prints one line per check and "N passed, M failed" last.
"""
import argparse
import glob
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time

TIMEOUT = 120


class Failed(Exception):
    pass


def clean_env(extra=None):
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "PKG_CONFIG_PATH", "CMAKE_PREFIX_PATH")}
    env.update(extra or {})
    return env


def run(cmd, env=None, cwd=None, timeout=TIMEOUT, check=True):
    """Runs cmd in a session of its own (a timeout kills every process of it,
    MPI ranks included); returns (rc, output)."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env or clean_env(), cwd=cwd,
                         start_new_session=True, text=True)
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, _ = p.communicate()
        raise Failed("hung for %d s: %s\n%s" % (timeout, " ".join(cmd), indent(out)))
    if check and p.returncode != 0:
        raise Failed("exit %d: %s\n%s" % (p.returncode, " ".join(map(str, cmd)), indent(out)))
    return p.returncode, out


def indent(text, last=30):
    lines = text.rstrip("\n").split("\n")[-last:]
    return "\n".join("    | " + l for l in lines)


def mpirun(np):
    exe = os.environ.get("CRPM_MPIEXEC") or "mpirun"
    flags = os.environ.get("CRPM_MPIEXEC_FLAGS")
    if flags is None:
        flags = "--oversubscribe --allow-run-as-root"
    return [exe, "-n", str(np)] + shlex.split(flags)


class Ctx:
    def __init__(self, a):
        self.a = a
        self.work = a.workdir
        self.prefix = os.path.join(a.workdir, "prefix")
        self.libdir = None
        self.static = False


def scenario_build_static_c_only(c):
    b = os.path.join(c.work, "build-static")
    run([c.a.cmake, "-S", c.a.source, "-B", b, "-DCMAKE_BUILD_TYPE=Release", "-DBUILD_SHARED_LIBS=OFF",
         "-DCRPM_BUILD_TESTS=OFF", "-DCRPM_TEST_HOOKS=ON", "-DCRPM_BUILD_APPS=OFF", "-DCRPM_BUILD_BENCH=OFF",
         "-DCMAKE_CXX_COMPILER=/nonexistent/c++"], timeout=300)
    run([c.a.cmake, "--build", b, "-j2"], timeout=900)
    c.a.build = b


def scenario_install(c):
    run([c.a.cmake, "--install", c.a.build, "--prefix", c.prefix])
    for f in ("include/crpm.h", "share/crpm/crpm.ini", "share/crpm/pmem.ini", "share/crpm/level4.ini",
              "share/crpm/level2.ini", "share/crpm/level3.ini"):
        if not os.path.isfile(os.path.join(c.prefix, f)):
            raise Failed("%s not installed" % f)
    if not glob.glob(os.path.join(c.prefix, "share/doc/*/LICENSE")):
        raise Failed("LICENSE not installed")
    libs = glob.glob(os.path.join(c.prefix, "lib*/libcrpm.so")) + glob.glob(os.path.join(c.prefix, "lib*/libcrpm.a"))
    if len(libs) != 1:
        raise Failed("expected one libcrpm, found %s" % libs)
    if c.a.static_c_only and not libs[0].endswith(".a"):
        raise Failed("BUILD_SHARED_LIBS=OFF installed %s" % libs[0])
    c.libdir = os.path.dirname(libs[0])
    c.static = libs[0].endswith(".a")
    for name in ("crpmConfig.cmake", "crpmConfigVersion.cmake", "crpmTargets.cmake"):
        if not os.path.isfile(os.path.join(c.libdir, "cmake", "crpm", name)):
            raise Failed("CMake package file %s missing" % name)
    check_versions(c, libs[0])


def check_versions(c, lib):
    """The soname and the CMake package's version file follow the project's
    major version: an older major (an incompatible ABI) is refused."""
    major = int(c.a.version.split(".")[0])
    if not c.static:
        _, dyn = run(["readelf", "-d", lib])
        m = re.search(r"\(SONAME\)\s+Library soname: \[(\S+)\]", dyn)
        if not m or m.group(1) != "libcrpm.so.%d" % major:
            raise Failed("libcrpm soname %s, expected libcrpm.so.%d" % (m.group(1) if m else None, major))
    vfile = os.path.join(c.libdir, "cmake", "crpm", "crpmConfigVersion.cmake")
    for want, ok in (("%d.0" % major, True), ("%d.0" % (major - 1), False), ("%d.0" % (major + 1), False)):
        script = os.path.join(c.work, "version-check.cmake")
        with open(script, "w") as f:
            f.write('set(PACKAGE_FIND_VERSION "%s")\n' % want +
                    'string(REPLACE "." ";" _v "%s")\n' % want +
                    'list(GET _v 0 PACKAGE_FIND_VERSION_MAJOR)\nlist(GET _v 1 PACKAGE_FIND_VERSION_MINOR)\n'
                    'set(PACKAGE_FIND_VERSION_PATCH 0)\nset(PACKAGE_FIND_VERSION_COUNT 2)\n'
                    'include("%s")\n' % vfile +
                    'message("compatible=${PACKAGE_VERSION_COMPATIBLE} version=${PACKAGE_VERSION}")\n')
        _, out = run([c.a.cmake, "-P", script])
        m = re.search(r"compatible=(\S*) version=(\S+)", out)
        if not m or m.group(2) != c.a.version or (m.group(1) in ("TRUE", "1")) != ok:
            raise Failed("crpmConfigVersion.cmake asked for %s: %s (version %s)" % (want, out.strip(), c.a.version))
    if glob.glob(os.path.join(c.prefix, "include", "*.mod")):
        raise Failed("a Fortran module was installed in the shared include directory")
    if c.a.fortran:
        mods = glob.glob(os.path.join(c.prefix, "include", "crpm", "*", "crpm.mod"))
        if len(mods) != 1:
            raise Failed("expected include/crpm/<compiler>/crpm.mod, found %s" % mods)
    generic = [b for b in ("crpm_heat", "heat_f90", "hpccg", "comd", "lulesh", "crpm-heat", "crpm-hpccg")
               if os.path.exists(os.path.join(c.prefix, "bin", b))]
    if generic:
        raise Failed("applications installed without being asked for: %s" % generic)


def pkgconfig(c, *args):
    env = clean_env({"PKG_CONFIG_PATH": os.path.join(c.libdir, "pkgconfig")})
    return run(["pkg-config"] + list(args), env=env)[1].strip()


def scenario_pkgconfig_files(c):
    names = ["crpm"] + (["crpmf"] if c.a.fortran else [])
    for name in names:
        libdir = pkgconfig(c, "--variable=libdir", name)
        if os.path.realpath(libdir) != os.path.realpath(c.libdir) or "/../" in libdir or "//" in libdir:
            raise Failed("%s.pc: libdir %r, expected %s" % (name, libdir, c.libdir))
        libs = pkgconfig(c, "--libs", name)
        if "-Wl,-rpath," + libdir not in libs:
            raise Failed("%s.pc: no rpath hint in %r" % (name, libs))
        if pkgconfig(c, "--modversion", name) != c.a.version:
            raise Failed("%s.pc: version is not %s" % (name, c.a.version))
    if c.a.fortran:
        cflags = pkgconfig(c, "--cflags", "crpmf")
        incs = [f[2:] for f in shlex.split(cflags) if f.startswith("-I")]
        if not any(os.path.isfile(os.path.join(d, "crpm.mod")) for d in incs):
            raise Failed("crpmf.pc: --cflags %r does not point at crpm.mod" % cflags)


def scenario_man(c):
    mandir = os.path.join(c.prefix, "share", "man")
    header = ""
    for h in ("crpm.h", "crpm_types.h"):
        with open(os.path.join(c.a.source, "include", h)) as f:
            header += f.read()
    funcs = sorted(set(re.findall(r"^(?:CRPM_API )?[a-z][\w \*]*?\b(crpm_\w+)\(", header, re.M)))
    if len(funcs) < 8:
        raise Failed("found only %s in crpm.h" % funcs)
    pages = [("man3", "crpm.3", "crpm")] + [("man3", fn + ".3", fn) for fn in funcs]
    pages += [("man1", "crpm-inspect.1", "crpm-inspect")]
    if c.a.export:
        pages += [("man1", "crpm-export.1", "crpm-export")]
    for sec, page, word in pages:
        path = os.path.join(mandir, sec, page)
        if not os.path.isfile(path):
            raise Failed("man page %s/%s not installed" % (sec, page))
        # .so links resolve relative to the manual's top directory
        _, out = run(["man", "-l", os.path.join(sec, page)], cwd=mandir,
                     env=clean_env({"MANWIDTH": "80", "PAGER": "cat"}))
        if "NAME" not in out or word not in out or len(out.splitlines()) < 8:
            raise Failed("man -l %s rendered badly:\n%s" % (page, indent(out)))
        _, warn = run(["groff", "-man", "-Tutf8", "-ww", "-z", os.path.join(sec, page)], cwd=mandir)
        if warn.strip():
            raise Failed("groff warnings for %s:\n%s" % (page, indent(warn)))


def scenario_tools(c):
    for tool in ["crpm-inspect"] + (["crpm-export"] if c.a.export else []):
        rc, out = run([os.path.join(c.prefix, "bin", tool), "--help"], check=False)
        if rc != 0 or "usage" not in out.lower():
            raise Failed("installed %s --help: exit %d\n%s" % (tool, rc, indent(out)))


def scenario_apps(c):
    """The applications, installed on request, start from the install tree."""
    appdir = os.path.join(c.work, "apps-prefix")
    run([c.a.cmake, "--install", c.a.build, "--prefix", appdir, "--component", "apps"])
    bins = sorted(os.listdir(os.path.join(appdir, "bin")))
    want = ["crpm-heat"] + (["crpm-heat-f90"] if c.a.fortran else [])
    if any(not b.startswith("crpm-") for b in bins) or any(w not in bins for w in want):
        raise Failed("installed applications %s, expected crpm-* names including %s" % (bins, want))
    run([c.a.cmake, "--install", c.a.build, "--prefix", appdir])  # the library beside them
    cfg = write_cfg(c, "heat", keep=0)
    for b in bins:
        exe = os.path.join(appdir, "bin", b)
        _, dyn = run(["readelf", "-d", exe])
        if not re.search(r"\(RUNPATH\).*\$ORIGIN", dyn):
            raise Failed("%s has no $ORIGIN RUNPATH:\n%s" % (b, indent(dyn)))
        _, ldd = run(["ldd", exe])
        if "not found" in ldd:
            raise Failed("%s does not find its libraries:\n%s" % (b, indent(ldd)))
    for b in [w for w in want]:
        args = ["--iters", "40", "--ckpt-every", "10", "--crpm", cfg] if b == "crpm-heat" else \
               ["--nx", "64", "--ny", "64", "--iters", "40", "--ckpt-every", "10", "--crpm", cfg]
        rc, out = run(mpirun(2) + [os.path.join(appdir, "bin", b)] + args, check=False)
        if rc != 0:
            raise Failed("installed %s failed to run (exit %d)\n%s" % (b, rc, indent(out)))


def write_cfg(c, job, keep=0):
    path = os.path.join(c.work, job + ".ini")
    with open(path, "w") as f:
        f.write("[basic]\nckpt_dir = %s\njob_name = %s\nkeep_last_ckpt = %d\nverbosity = 1\n"
                % (os.path.join(c.work, "ckpt"), job, keep))
    return path


def kill_restart(c, job, cmd, period=5, word="step"):
    """Failure-free run, a run killed inside a checkpoint, the relaunch."""
    shutil.rmtree(os.path.join(c.work, "ckpt", job), ignore_errors=True)
    cfg = write_cfg(c, job)
    _, ref = run(mpirun(2) + cmd + [cfg])
    want = re.findall(r"^result \S+$", ref, re.M)
    if len(want) != 1 or "restarted" in ref:
        raise Failed("failure-free run of %s:\n%s" % (job, indent(ref)))
    # rank 1 dies right after committing its 12th checkpoint; rank 0 may or
    # may not have committed it
    rc, out = run(mpirun(2) + cmd + [cfg], env=clean_env({"CRPM_TEST_KILL": "1:after_commit:12"}), check=False)
    if rc == 0 or re.search(r"^result ", out, re.M):
        raise Failed("the killed run of %s completed (exit %d): is libcrpm built with -DCRPM_TEST_HOOKS=ON?\n%s"
                     % (job, rc, indent(out)))
    _, out = run(mpirun(2) + cmd + [cfg])
    m = re.search(r"^restarted at %s (\d+)$" % word, out, re.M)
    if not m or int(m.group(1)) not in (11 * period, 12 * period):
        raise Failed("the relaunch of %s did not restart at %s %d or %d\n%s" % (job, word, 11 * period, 12 * period,
                                                                              indent(out)))
    got = re.findall(r"^result \S+$", out, re.M)
    if got != want:
        raise Failed("%s after a restart: %s, failure-free: %s" % (job, got, want))
    if os.path.exists(os.path.join(c.work, "ckpt", job)):
        raise Failed("%s: crpm_finalize left the checkpoints (keep_last_ckpt = 0)" % job)
    return "restarted at %s %s, %s" % (word, m.group(1), want[0])


def copy_project(c, name, src_files):
    d = os.path.join(c.work, name)
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(os.path.join(c.a.source, "tests", "consumers", name), d)
    for s, dst in src_files:
        shutil.copy(os.path.join(c.a.source, "tests", "consumers", "src", s), os.path.join(d, dst))
    return d


def cmake_project(c, name, src_files):
    d = copy_project(c, name, src_files)
    b = d + "-build"
    run([c.a.cmake, "-S", d, "-B", b, "-DCMAKE_PREFIX_PATH=" + c.prefix])
    run([c.a.cmake, "--build", b])
    return os.path.join(b, "app")


def scenario_cmake_c(c):
    return kill_restart(c, "cmake_c", [cmake_project(c, "c_project", [("app.c", "app.c")])])


def scenario_cmake_cxx(c):
    return kill_restart(c, "cmake_cxx", [cmake_project(c, "cxx_project", [("app.c", "app.cpp")])])


def scenario_cmake_fortran(c):
    if not c.a.fortran:
        return "skipped: no Fortran bindings"
    return kill_restart(c, "cmake_fortran", [cmake_project(c, "fortran_project", [("app.f90", "app.f90")])])


def scenario_pkgconfig_c(c):
    exe = os.path.join(c.work, "pc_c")
    flags = shlex.split(pkgconfig(c, "--cflags", "--libs", "crpm", *(["--static"] if c.static else [])))
    run([c.a.mpicc, "-o", exe, os.path.join(c.a.source, "tests/consumers/src/app.c")] + flags)
    return kill_restart(c, "pkgconfig_c", [exe])


def scenario_pkgconfig_fortran(c):
    if not c.a.fortran:
        return "skipped: no Fortran bindings"
    exe = os.path.join(c.work, "pc_f")
    flags = shlex.split(pkgconfig(c, "--cflags", "--libs", "crpmf", *(["--static"] if c.static else [])))
    run([c.a.mpif90, "-o", exe, os.path.join(c.a.source, "tests/consumers/src/app.f90")] + flags,
        cwd=c.work)
    return kill_restart(c, "pkgconfig_fortran", [exe])


def readme_example(c):
    """The C block under '## Minimal example' of README.md, as is."""
    with open(os.path.join(c.a.source, "README.md")) as f:
        text = f.read()
    m = re.search(r"^## Minimal example\n(.*?)^## ", text, re.M | re.S)
    blocks = re.findall(r"^```c\n(.*?)^```", m.group(1) if m else "", re.M | re.S)
    if len(blocks) != 1:
        raise Failed("README.md: expected one ```c block under '## Minimal example'")
    return blocks[0]


def scenario_readme_example(c):
    src = os.path.join(c.work, "readme_example.c")
    with open(src, "w") as f:
        f.write(readme_example(c))
    exe = os.path.join(c.work, "readme_example")
    flags = shlex.split(pkgconfig(c, "--cflags", "--libs", "crpm", *(["--static"] if c.static else [])))
    run([c.a.mpicc, "-std=c99", "-pedantic-errors", "-Wall", "-Wextra", "-Werror", "-o", exe, src] + flags)
    return kill_restart(c, "readme", [exe], period=10, word="iteration")


SCENARIOS = [scenario_build_static_c_only, scenario_install, scenario_pkgconfig_files, scenario_man, scenario_tools, scenario_apps,
             scenario_cmake_c, scenario_cmake_cxx, scenario_cmake_fortran, scenario_pkgconfig_c,
             scenario_pkgconfig_fortran, scenario_readme_example]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", required=True, help="configured and built libcrpm build tree")
    p.add_argument("--source", required=True)
    p.add_argument("--workdir", required=True)
    p.add_argument("--cmake", default="cmake")
    p.add_argument("--mpicc", default="mpicc")
    p.add_argument("--mpif90", default="mpif90")
    p.add_argument("--version", required=True)
    p.add_argument("--fortran", type=int, default=1)
    p.add_argument("--export", type=int, default=1, help="crpm-export is built")
    p.add_argument("--keep", action="store_true")
    p.add_argument("--static-c-only", action="store_true", help="check a static, C-only library build (see above)")
    p.add_argument("only", nargs="*", help="scenario names (default: all)")
    a = p.parse_args()
    # The kills inside a checkpoint use the test hook: the build tree must
    # have it (the static build below is configured with it).
    if not a.static_c_only and os.environ.get("CRPM_TEST_HOOKS", "ON").upper() == "OFF":
        print("SKIPPED: the consumers are killed through CRPM_TEST_KILL, which needs a libcrpm configured with "
              "-DCRPM_TEST_HOOKS=ON (this build has no test hooks)")
        return 77
    a.source, a.build, a.workdir = (os.path.abspath(x) for x in (a.source, a.build, a.workdir))
    shutil.rmtree(a.workdir, ignore_errors=True)
    os.makedirs(a.workdir)
    c = Ctx(a)
    passed = failed = 0
    for s in SCENARIOS:
        name = s.__name__[len("scenario_"):]
        if name == "build_static_c_only" and not a.static_c_only or name == "apps" and a.static_c_only:
            continue
        if a.only and name not in a.only and name not in ("install", "build_static_c_only"):
            continue
        t0 = time.time()
        try:
            note = s(c)
            passed += 1
            print("%s: ok (%.1f s)%s" % (name, time.time() - t0, ": " + note if note else ""), flush=True)
        except Failed as e:
            failed += 1
            print("%s: FAILED: %s" % (name, e), flush=True)
            if name in ("install", "build_static_c_only"):
                break
    if failed == 0 and not a.keep:
        shutil.rmtree(a.workdir, ignore_errors=True)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
