"""Shared fixtures for memopt's Python suite.

The build folder comes from $MEMOPT_BUILD_DIR (default <repo>/build). Nothing is skipped: when a
tool is missing, every test that needs it FAILS with a message saying what to build.
Tests put rows (and counters) into REPORTS; at the end of the session they are written as
markdown tables to <build>/import_report.md and <build>/node_tests_report.md and printed in the
terminal summary. Under pytest-xdist (scripts/test.sh runs `-n auto`), each worker writes its part
to <build>/pytest-reports/<worker>.json and the controller merges them (rows concatenated,
counters summed, footers without duplicates) before writing.
"""

import glob
import json
import os
import sys
from dataclasses import dataclass

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "python", "models"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

BUILD_DIR = os.path.abspath(os.environ.get("MEMOPT_BUILD_DIR", os.path.join(REPO, "build")))
# The Python package as the build assembles it (python/CMakeLists.txt): the tests import the
# memopt this build made, ahead of any installed one.
PYTHON_PACKAGES = os.path.join(BUILD_DIR, "python_packages")
sys.path.insert(0, PYTHON_PACKAGES)

# report name -> {"title", "columns", "rows": [dict], "footer": [str]}
REPORTS = {}


def report(name, title, columns):
    """A report table; entry["counts"] holds counters summed over xdist workers."""
    return REPORTS.setdefault(name, {"title": title, "columns": columns, "rows": [],
                                     "footer": [], "counts": {}})


def count(entry, key, amount=1):
    entry["counts"][key] = entry["counts"].get(key, 0) + amount


@dataclass(frozen=True)
class Tools:
    build_dir: str
    translate: str
    opt: str


def _tool(name):
    path = os.path.join(BUILD_DIR, "bin", name)
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        pytest.fail(f"{name} not found at {path}: build it first (cmake --build {BUILD_DIR} "
                    f"--target {name}) or point MEMOPT_BUILD_DIR at a build folder that has "
                    f"bin/{name}", pytrace=False)
    return path


@pytest.fixture(scope="session")
def memopt_package():
    """The memopt package of this build (fails, not skips, when it was not built)."""
    try:
        import memopt
        from memopt import _compiler  # noqa: F401 - the compiler half must be there too
    except ImportError as error:
        pytest.fail(f"the Python package is not built in {PYTHON_PACKAGES} ({error}): build "
                    f"the target memopt_python_package (MEMOPT_ENABLE_PYTHON=ON, nanobind "
                    f"installed by scripts/setup.sh)", pytrace=False)
    return memopt


# The suite's tiers (docs/testing.md): "fast" (scripts/test.sh, CI) runs every test except the
# `sweep` ones, which repeat a check over every model of a zoo; "all" (scripts/test.sh --all,
# MEMOPT_TEST_TIER=all) runs them too. tiers.py picks the members of a sweep the fast tier keeps.
TIER = os.environ.get("MEMOPT_TEST_TIER", "fast")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "gpu: needs a CUDA GPU and PyTorch; not collected unless asked for with "
                   "`-m gpu` or MEMOPT_GPU_TESTS=1 (the GPU machine: python/tests/"
                   "test_python_gpu.py)")
    config.addinivalue_line(
        "markers", "sweep: one more model of a zoo-wide sweep; deselected in the fast tier "
                   "(scripts/test.sh), run by `scripts/test.sh --all` (MEMOPT_TEST_TIER=all)")
    if TIER not in ("fast", "all"):
        raise pytest.UsageError(f"MEMOPT_TEST_TIER={TIER}: expected fast or all")


def _deselect(config, items, marker):
    chosen = [item for item in items if item.get_closest_marker(marker)]
    if chosen:
        config.hook.pytest_deselected(items=chosen)
        items[:] = [item for item in items if not item.get_closest_marker(marker)]


def pytest_collection_modifyitems(config, items):
    """GPU tests run where they are asked for (`-m gpu`, MEMOPT_GPU_TESTS=1: the GPU machine),
    and there they fail without a GPU; elsewhere (CI, scripts/test.sh) they are deselected,
    not skipped. Sweep tests are deselected in the fast tier. An explicit `-m` expression
    decides both."""
    if config.getoption("markexpr"):
        return
    if not os.environ.get("MEMOPT_GPU_TESTS"):
        _deselect(config, items, "gpu")
    if TIER == "fast":
        _deselect(config, items, "sweep")


@pytest.fixture(scope="session")
def tools():
    return Tools(BUILD_DIR, _tool("memopt-translate"), _tool("memopt-opt"))


def _markdown(entry):
    columns = entry["columns"]
    lines = [f"# {entry['title']}", "", "| " + " | ".join(columns) + " |",
             "|" + "|".join(" --- " for _ in columns) + "|"]
    for row in entry["rows"]:
        lines.append("| " + " | ".join(str(row.get(c, "")) for c in columns) + " |")
    lines += [""] + entry["footer"]
    if entry.get("counts"):
        lines.append("Counts: " + ", ".join(f"{key} {value}"
                                            for key, value in sorted(entry["counts"].items())))
    return "\n".join(lines) + "\n"


def _parts_dir():
    return os.path.join(BUILD_DIR, "pytest-reports")


def _merge_worker_parts():
    """Controller side: folds every worker's JSON part into REPORTS."""
    for path in sorted(glob.glob(os.path.join(_parts_dir(), "*.json"))):
        with open(path) as stream:
            part = json.load(stream)
        os.remove(path)
        for name, entry in part.items():
            mine = REPORTS.setdefault(name, {"title": entry["title"],
                                             "columns": entry["columns"], "rows": [],
                                             "footer": [], "counts": {}})
            mine["rows"] += entry["rows"]
            mine["footer"] += [line for line in entry["footer"] if line not in mine["footer"]]
            for key, value in entry.get("counts", {}).items():
                count(mine, key, value)


def pytest_sessionstart(session):
    if not hasattr(session.config, "workerinput") and os.path.isdir(_parts_dir()):
        for path in glob.glob(os.path.join(_parts_dir(), "*.json")):
            os.remove(path)


def pytest_sessionfinish(session, exitstatus):
    if not os.path.isdir(BUILD_DIR):
        return
    worker = getattr(session.config, "workerinput", None)
    if worker is not None:
        if REPORTS:
            os.makedirs(_parts_dir(), exist_ok=True)
            with open(os.path.join(_parts_dir(), worker["workerid"] + ".json"), "w") as stream:
                json.dump(REPORTS, stream)
        return
    _merge_worker_parts()
    for entry in REPORTS.values():
        entry["rows"].sort(key=lambda row: tuple(str(row.get(c, "")) for c in entry["columns"]))
    for name, entry in REPORTS.items():
        if entry["rows"] or entry["footer"]:
            with open(os.path.join(BUILD_DIR, f"{name}.md"), "w") as stream:
                stream.write(_markdown(entry))


def pytest_terminal_summary(terminalreporter):
    for name, entry in REPORTS.items():
        if not (entry["rows"] or entry["footer"]):
            continue
        terminalreporter.section(entry["title"])
        terminalreporter.write(_markdown(entry))
        terminalreporter.write_line(f"(written to {os.path.join(BUILD_DIR, name + '.md')})")
