"""Shared fixtures for memopt's Python suite.

The build folder comes from $MEMOPT_BUILD_DIR (default <repo>/build). Nothing is skipped: when a
tool is missing, every test that needs it FAILS with a message saying what to build.
Tests put rows into REPORTS; at the end of the session they are written as markdown tables to
<build>/import_report.md and <build>/node_tests_report.md and printed in the terminal summary.
"""

import os
import sys
from dataclasses import dataclass

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "python", "models"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

BUILD_DIR = os.path.abspath(os.environ.get("MEMOPT_BUILD_DIR", os.path.join(REPO, "build")))

# report name -> {"title", "columns", "rows": [dict], "footer": [str]}
REPORTS = {}


def report(name, title, columns):
    return REPORTS.setdefault(name, {"title": title, "columns": columns, "rows": [],
                                     "footer": []})


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
def tools():
    return Tools(BUILD_DIR, _tool("memopt-translate"), _tool("memopt-opt"))


def _markdown(entry):
    columns = entry["columns"]
    lines = [f"# {entry['title']}", "", "| " + " | ".join(columns) + " |",
             "|" + "|".join(" --- " for _ in columns) + "|"]
    for row in entry["rows"]:
        lines.append("| " + " | ".join(str(row.get(c, "")) for c in columns) + " |")
    lines += [""] + entry["footer"]
    return "\n".join(lines) + "\n"


def pytest_sessionfinish(session, exitstatus):
    if not REPORTS or not os.path.isdir(BUILD_DIR):
        return
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
