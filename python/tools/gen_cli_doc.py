#!/usr/bin/env python3
"""Writes docs/cli.md's flag reference from the option table (include/memopt/Conversion/
CompileOptions.def), as `memopt-compile --print-options-markdown` prints it.

    python3 python/tools/gen_cli_doc.py [--build build] [--check]

The reference is the part of docs/cli.md between the BEGIN / END markers below; the rest of the
page is written by hand. --check changes nothing and exits 1 when the page differs from what the
table gives (python/tests/test_cli_options.py checks the same).
"""

import argparse
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PAGE = os.path.join(REPO, "docs", "cli.md")
BEGIN = "<!-- BEGIN GENERATED: memopt-compile --print-options-markdown -->"
END = "<!-- END GENERATED -->"


def reference(build_dir):
    """The reference as the build's memopt-compile prints it."""
    tool = os.path.join(build_dir, "bin", "memopt-compile")
    return subprocess.run([tool, "--print-options-markdown"], check=True, capture_output=True,
                          text=True).stdout


def splice(page, text):
    """The page with the text between the markers replaced."""
    start, end = page.find(BEGIN), page.find(END)
    if start < 0 or end < start:
        raise SystemExit(f"{PAGE}: the markers {BEGIN!r} ... {END!r} are missing")
    return page[:start + len(BEGIN)] + "\n\n" + text.rstrip("\n") + "\n\n" + page[end:]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.environ.get("MEMOPT_BUILD_DIR",
                                                          os.path.join(REPO, "build")))
    parser.add_argument("--check", action="store_true",
                        help="exit 1 when docs/cli.md differs; write nothing")
    args = parser.parse_args()
    with open(PAGE) as stream:
        page = stream.read()
    updated = splice(page, reference(args.build))
    if args.check:
        if updated != page:
            print(f"{PAGE} differs from the option table: run python3 python/tools/"
                  f"gen_cli_doc.py", file=sys.stderr)
            return 1
        return 0
    if updated != page:
        with open(PAGE, "w") as stream:
            stream.write(updated)
        print(f"wrote {PAGE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
