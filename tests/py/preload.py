"""preload_env(tmp_path, name, source): build a C shim from source into
tmp_path/name.so and return an environment (os.environ's, plus LD_PRELOAD) that
loads it into kvbench and the processes it starts; the test is skipped when no
C compiler is there. The sanitizer runtime is told not to insist on coming first
in the library list (verify_asan_link_order=0), so the tests run under
`make sanitize` too."""
import os
import shutil
import subprocess

import pytest


def preload_env(tmp_path, name, source):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip(f"no C compiler for the {name} shim")
    src, shim = tmp_path / f"{name}.c", tmp_path / f"{name}.so"
    src.write_text(source)
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(shim), str(src)], check=True)
    env = dict(os.environ, LD_PRELOAD=str(shim))
    env["ASAN_OPTIONS"] = ":".join(filter(None, [os.environ.get("ASAN_OPTIONS"), "verify_asan_link_order=0"]))
    return env
