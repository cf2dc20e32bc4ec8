#!/usr/bin/env python3
"""Checks that the README's bnn-server flag table matches the binary.

Every flag `bnn-server --helpon=main` lists must have one row in the table of
README.md's "Running the server" section, spelled with dashes, whose default
column is the binary's default (an empty default is written `(required)`
for the flags in REQUIRED and `(none)` for the others), and the table must
list no other flag. Usage: readme_flags_test.py REPOSITORY_ROOT BNN_SERVER
"""
import pathlib
import re
import subprocess
import sys

# "--max_predict_rows (Most rows ...); default: 100000;" (help may wrap).
FLAG = re.compile(r"--(\w+) \((.*?)\);\s+default: (.*?);", re.S)
ROW = re.compile(r"^\| `--([a-z0-9-]+)[^`]*` \| ([^|]*) \|", re.M)
# Flags the server cannot start without.
REQUIRED = {"data-dir"}


def binary_flags(binary: str) -> dict:
    result = subprocess.run([binary, "--helpon=main"], capture_output=True,
                            text=True, check=False)
    text = result.stdout + result.stderr
    flags = {}
    for name, _, default in FLAG.findall(text):
        default = default.strip()
        if default.startswith('"') and default.endswith('"'):
            default = default[1:-1]
        flags[name.replace("_", "-")] = default
    return flags


def readme_flags(root: pathlib.Path) -> dict:
    text = (root / "README.md").read_text()
    section = text.split("## Running the server", 1)[1].split("\n## ", 1)[0]
    return {name: default.strip() for name, default in ROW.findall(section)}


def main() -> int:
    root, binary = pathlib.Path(sys.argv[1]), sys.argv[2]
    flags = binary_flags(binary)
    rows = readme_flags(root)
    errors = []
    if not flags:
        errors.append(f"{binary} --helpon=main listed no flags")
    for name, default in sorted(flags.items()):
        if name not in rows:
            errors.append(f"README.md: no row for --{name}")
            continue
        if default == "":
            expected = "(required)" if name in REQUIRED else "(none)"
        else:
            expected = f"`{default}`"
        if rows[name] != expected:
            errors.append(f"README.md: --{name} default is {rows[name]}, "
                          f"the binary's is {expected}")
    for name in sorted(set(rows) - set(flags)):
        errors.append(f"README.md: --{name} is not a bnn-server flag")
    for error in errors:
        print(error)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
