#!/usr/bin/env python3
"""Checks the include rules of server/ stated in docs/architecture.md.

Every "server/..." include of a file under server/ must be allowed by the
table below (a copy of the one in docs/architecture.md, which this test also
checks is unchanged). Usage: include_rules_test.py REPOSITORY_ROOT
"""
import pathlib
import re
import sys

# Folder (relative to server/) -> folders it may include, besides itself.
ALLOWED = {
    "common": set(),
    "auth": set(),
    "metrics": {"common"},
    "store": {"common"},
    "admission": {"common"},
    "jobs": {"admission", "store", "metrics", "common"},
    "api/bnn_v1": {"auth", "jobs", "admission", "store", "metrics", "common"},
    "api/inference_v2": {"api/bnn_v1", "auth", "store", "metrics", "common"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"server/([^"]+)"', re.M)


def folder_of(path: str) -> str:
    """The part a server/-relative path belongs to ("" for server/ itself)."""
    parts = path.split("/")
    if parts[0] == "api":
        return "/".join(parts[:2])
    return parts[0] if len(parts) > 1 else ""


def main() -> int:
    root = pathlib.Path(sys.argv[1])
    server = root / "server"
    errors = []
    for source in sorted(server.rglob("*")):
        if source.suffix not in (".h", ".cc"):
            continue
        relative = source.relative_to(server).as_posix()
        folder = folder_of(relative)
        for included in INCLUDE.findall(source.read_text()):
            target = folder_of(included)
            if relative == "main.cc":
                ok = included in ("server.h", "common/flag_names.h")
            elif folder == "":
                ok = True  # server.{h,cc} wire every part
            elif folder not in ALLOWED:
                ok = False
                errors.append(f"server/{relative}: folder '{folder}' has no "
                              "include rule in docs/architecture.md")
                continue
            else:
                ok = target == folder or target in ALLOWED[folder]
            if not ok:
                errors.append(f"server/{relative} includes server/{included}, "
                              "which its folder may not include")
    docs = (root / "docs" / "architecture.md").read_text()
    for folder, allowed in ALLOWED.items():
        row = re.search(rf"^\| `{re.escape(folder)}/` \| ([^|]*)\|", docs,
                        re.M)
        documented = set(re.findall(r"`([a-z_/0-9]+)/`", row.group(1))) \
            if row else None
        if documented is None or (documented != allowed and allowed):
            errors.append(f"docs/architecture.md: the include rule of "
                          f"'{folder}/' does not list {sorted(allowed)}")
    for error in errors:
        print(error)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
