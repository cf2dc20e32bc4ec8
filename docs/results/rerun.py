#!/usr/bin/env python3
"""Re-runs committed bnn-experiment records from the command line each one
recorded, and compares the new metrics with the committed ones split by
split. The diagnosis runs behind the reports (docs/results/*/diagnosis/,
reruns.md) are reproduced with it:

  docs/results/rerun.py --bin build-test/bench/accuracy/bnn-experiment \\
      --out /tmp/rerun [--data-dir DIR] [--threads N] [--dry-run] JSON...

Per record: the recorded command with the binary replaced by --bin, the
output by OUT/<the record's name>, `--data-dir`/`--csv`/`--train`/`--test`
paths under the recorded datasets root moved under --data-dir (default
$BNN_DATA_DIR), every OLD prefix of a `--replace OLD=NEW` replaced in any
argument (scratch folders such as an HMC reference cache or a snapshot
path; the folder of each replaced path is created), and `--threads` by
--threads if given (results do not depend on it: splits are seeded).
`--missing-build` skips records that already carry a build block (issue
16: rerunning the others gives every record its binary's provenance).
Prints, per metric, the committed and new means and the largest per-split
difference; exits 1 if any record failed to run. A record whose new JSON
exists already is only compared.
"""
import argparse
import json
import os
import shlex
import subprocess
import sys

PATH_FLAGS = ("--data-dir", "--csv", "--train", "--test", "--ood")


def record_name(path):
    """The re-run's file name for a committed record: its path under
    docs/results with "/" replaced by "_" (names repeat across folders)."""
    rel = path.split("docs/results/", 1)[-1]
    return rel.replace("/", "_")


def rewrite(argv, args, out_json, recorded_root):
    cmd = [args.bin] + argv[1:]
    for old, new in (r.split("=", 1) for r in args.replace):
        for j in range(1, len(cmd)):
            if old in cmd[j]:
                cmd[j] = cmd[j].replace(old, new)
                # A file's folder, or the folder itself (no extension).
                path = cmd[j].split("=")[-1]
                has_ext = "." in os.path.basename(path)
                os.makedirs(os.path.dirname(path) if has_ext else path,
                            exist_ok=True)
    i = 1
    while i < len(cmd):
        flag = cmd[i]
        if flag == "--json-out":
            cmd[i + 1] = out_json
        elif flag == "--threads" and args.threads:
            cmd[i + 1] = str(args.threads)
        elif flag in PATH_FLAGS and args.data_dir and i + 1 < len(cmd):
            cmd[i + 1] = cmd[i + 1].replace(recorded_root, args.data_dir, 1)
        i += 1
    return cmd


def compare(old, new):
    lines = []
    for name, committed in old.get("metrics", {}).items():
        fresh = new.get("metrics", {}).get(name)
        if not isinstance(committed, dict) or not isinstance(fresh, dict):
            continue
        a, b = committed.get("per_split", []), fresh.get("per_split", [])
        diff = max((abs(x - y) for x, y in zip(a, b)
                    if x is not None and y is not None), default=float("nan"))
        lines.append(f"  {name}: committed {committed.get('mean'):.6g}, "
                     f"re-run {fresh.get('mean'):.6g}, largest per-split "
                     f"difference {diff:.2g} ({len(b)} splits)")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", required=True, help="bnn-experiment to run")
    ap.add_argument("--out", required=True, help="folder for the new records")
    ap.add_argument("--data-dir", default=os.environ.get("BNN_DATA_DIR", ""),
                    help="datasets root replacing the recorded one")
    ap.add_argument("--recorded-root", default="/work/shared/datasets",
                    help="datasets root in the recorded commands")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--replace", action="append", default=[],
                    metavar="OLD=NEW", help="path prefix to replace")
    ap.add_argument("--missing-build", action="store_true",
                    help="only records without a build block")
    ap.add_argument("--dry-run", action="store_true",
                    help="print the commands only")
    ap.add_argument("records", nargs="+")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    failed = 0
    for path in args.records:
        with open(path) as f:
            old = json.load(f)
        if args.missing_build and "build" in old:
            continue
        argv = shlex.split(old["command_line"])
        out_json = os.path.join(args.out, record_name(path))
        cmd = rewrite(argv, args, out_json, args.recorded_root)
        print(f"== {path}\n  {shlex.join(cmd)}", flush=True)
        if args.dry_run:
            continue
        if not os.path.exists(out_json):
            with open(out_json[:-5] + ".md", "w") as md:
                run = subprocess.run(cmd, stdout=md)
            if run.returncode != 0:
                print(f"  FAILED with exit code {run.returncode}")
                failed += 1
                continue
        with open(out_json) as f:
            new = json.load(f)
        print("\n".join(compare(old, new)), flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
