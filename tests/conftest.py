"""Test-wide setup: every run is offline and hermetic.

The Hugging Face variables must be set before `datasets` or `huggingface_hub` is first
imported, so they are set here, when pytest loads this file, to folders of a fresh temp dir.
"""

import gc
import os
import tempfile
import threading
import time
from pathlib import Path

_TMP = Path(tempfile.mkdtemp(prefix="kbv3-tests-"))
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["HF_HOME"] = str(_TMP / "hf_home")
os.environ["HF_DATASETS_CACHE"] = str(_TMP / "hf_datasets")
os.environ["KBV3_MODULE_DIR"] = str(_TMP / "modules")
os.environ["KBV3_CACHE_DIR"] = str(_TMP / "cache")
os.environ["TRITON_CACHE_DIR"] = str(_TMP / "triton")
os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(_TMP / "inductor")
os.environ["MPLCONFIGDIR"] = str(_TMP / "matplotlib")
os.environ["TRITON_INTERPRET"] = "1"
# No warm zygote server outliving a test (`solution.zygote_server`); its own tests turn it on.
os.environ["KBV3_ZYGOTE_SERVER"] = "0"
os.environ.setdefault("OMP_NUM_THREADS", "2")

import pytest  # noqa: E402

from tests.paths import PROBLEMS  # noqa: E402

# The test process holds torch, pandas, pyarrow and datasets: hundreds of thousands of objects
# that live as long as it does. CPython's default thresholds (700, 10, 10) walk all of them again
# and again, first while pytest imports the test modules, then as the tests allocate: about 3 s
# of a 30 s fast loop went to the collector. A larger young generation collects as much, less
# often; what is still reachable once the tests are collected (modules, mostly) lives to the end
# of the session anyway, so `gc.freeze` takes it out of every later walk. Nothing in the package
# reads these settings; a child the tests exec starts with the defaults.
gc.set_threshold(5000, 20, 10)


def pytest_collection_finish(session: pytest.Session) -> None:
    gc.collect()  # no garbage is frozen with the rest
    gc.freeze()


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    # The first cleanup registered runs last: after pytest's own last collections (which look for
    # unraisable exceptions among what the tests left, none of it frozen), so those stay short.
    # Unfrozen, the interpreter's exit collects everything again (nanobind counts leaks there).
    config.add_cleanup(gc.unfreeze)


@pytest.fixture(scope="session")
def problems_dir() -> Path:
    return PROBLEMS


@pytest.fixture(autouse=True)
def _sigint_as_python_leaves_it():
    """Each test starts with Python's own SIGINT handler. A test that runs `kbv3`'s main in this
    process through an interrupt leaves SIGINT ignored (`cli.args.ignore_further_interrupts`,
    right for a CLI about to exit); a later test's Ctrl-C would then do nothing, in this process
    and in every child it starts (an ignored signal stays ignored across exec)."""
    import signal

    signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, signal.default_int_handler)


LONG_LIVED_THREADS = ("tqdm_monitor",)  # tqdm's own monitor, started once and kept by design
THREAD_GRACE_S = 5.0


@pytest.fixture(autouse=True)
def _no_thread_outlives_its_test():
    """A thread a test started must have ended when it ends. One left spinning holds the GIL for
    every later test: a stand-in device thread once made the rest of the suite thirty times slower
    (tests that take 0.3 s alone took 10 s), and timing-sensitive tests flaky."""
    before = set(threading.enumerate())
    yield
    deadline = time.monotonic() + THREAD_GRACE_S
    left = []
    for thread in set(threading.enumerate()) - before:
        if thread.name in LONG_LIVED_THREADS:
            continue
        thread.join(max(0.0, deadline - time.monotonic()))
        if thread.is_alive():
            left.append(thread.name)
    assert not left, f"threads left running by this test: {sorted(left)}"
