"""Shared pytest fixtures for tests/py (others may add theirs here).

- kvbench_bin: path of the built binary ($KVBENCH_BIN); skips when absent.
- model_file: the default model ($KVBENCH_MODEL_FILE); skips when absent.
- run_kvbench: run_kvbench(*args, check=False, timeout=120) -> CompletedProcess
  with bytes stdout/stderr (decode as needed).
- tiny_llama: tiny_llama(**kwargs) -> path of a tiny random llama GGUF written
  by tinymodel.write_tiny_llama with those keyword arguments; cached per
  session, so tests asking for the same model share one file.
"""
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)


@pytest.fixture(scope="session")
def kvbench_bin():
    path = os.environ.get("KVBENCH_BIN", "")
    if not path or not os.access(path, os.X_OK):
        pytest.skip("KVBENCH_BIN not set or not built")
    return path


@pytest.fixture(scope="session")
def model_file():
    path = os.environ.get("KVBENCH_MODEL_FILE", "")
    if not path or not os.path.exists(path):
        pytest.skip("KVBENCH_MODEL_FILE missing (make model)")
    return path


@pytest.fixture(scope="session")
def run_kvbench(kvbench_bin):
    def run(*args, check=False, timeout=120):
        p = subprocess.run([kvbench_bin, *map(str, args)], capture_output=True, timeout=timeout)
        if check and p.returncode != 0:
            raise AssertionError(f"kvbench {' '.join(map(str, args))} exited {p.returncode}: "
                                 f"{p.stderr.decode(errors='replace')}")
        return p
    return run


@pytest.fixture(scope="session")
def tiny_llama(tmp_path_factory):
    import tinymodel
    cache = {}

    def make(**kwargs):
        key = repr(sorted(kwargs.items()))
        if key not in cache:
            path = tmp_path_factory.mktemp("tiny") / "tiny.gguf"
            tinymodel.write_tiny_llama(path, **kwargs)
            cache[key] = str(path)
        return cache[key]
    return make
