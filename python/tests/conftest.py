"""Fixtures: a context per backend under test, seeded random generators.

QATTN_PYTEST_REQUIRE (comma list, e.g. "cpu,vulkan" in CI) turns a backend
that cannot open a device from "skipped" into a failure, so CI cannot pass
by skipping."""
import os
import sys

import pytest

try:
    import qattn  # an installed package (PYTHONPATH, site-packages)
except ImportError:  # else the source tree's, beside tests/
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
    import qattn


def pytest_report_header(config):
    return "qattn %s from %s, library %s" % (qattn.__version__, os.path.dirname(qattn.__file__),
                                             qattn.library_version())

REQUIRED = [b for b in os.environ.get("QATTN_PYTEST_REQUIRE", "").split(",") if b]


def open_context(name):
    try:
        return qattn.Context(backend=name, debug_validation=(name == "vulkan"))
    except qattn.QattnError as e:
        if name in REQUIRED:
            pytest.fail("backend %s is required here (QATTN_PYTEST_REQUIRE) but: %s" % (name, e))
        pytest.skip("skipped: backend %s has no device here: %s" % (name, e))


@pytest.fixture(scope="module", params=["cpu", "vulkan"])
def ctx(request):
    c = open_context(request.param)
    yield c
    c.close()


@pytest.fixture(scope="module")
def cpu():
    c = qattn.Context(backend="cpu")
    yield c
    c.close()


def _fresh_backends():
    """cpu and vulkan always (a missing one is reported: skipped, or failed
    where required); hip where its library loads or it is required (the GPU
    machine's step), so CI's log is not a list of hip skips."""
    names = ["cpu", "vulkan"]
    try:
        if "hip" in REQUIRED or qattn._lib.backend("hip"):
            names.append("hip")
    except OSError:
        pass
    return names


@pytest.fixture(params=_fresh_backends())
def fresh_ctx(request):
    """A new context for one test, on each backend that opens a device here
    (hip: the GPU machine's step; numpy operands are staged there)."""
    c = open_context(request.param)
    yield c
    c.close()
