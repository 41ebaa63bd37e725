"""pip install of the crpm package: the modules in crpm/ plus the two that
gen_build_info.py writes at build time, the C API's constants (from the
headers: ../include, or CRPM_INCLUDE_DIR) and where libcrpm.so is
(CRPM_LIBRARY if set now, else the dynamic loader's search at import)."""
import os
import sys

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gen_build_info  # noqa: E402


class BuildPy(build_py):
    def run(self):
        super().run()
        inc = os.environ.get("CRPM_INCLUDE_DIR") or os.path.join(HERE, "..", "include")
        headers = [os.path.join(inc, h) for h in ("crpm_types.h", "crpm.h")]
        missing = [h for h in headers if not os.path.exists(h)]
        if missing:
            sys.exit("crpm: libcrpm's headers not found (%s): set CRPM_INCLUDE_DIR to their directory"
                     % ", ".join(missing))
        out = os.path.join(self.build_lib, "crpm")
        gen_build_info.write_consts(headers, os.path.join(out, "_consts.py"))
        gen_build_info.write_paths(os.path.join(out, "_paths.py"), os.environ.get("CRPM_LIBRARY"))


setup(cmdclass={"build_py": BuildPy})
