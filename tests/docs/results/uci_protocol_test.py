#!/usr/bin/env python3
"""docs/results/uci_protocol.py and the table scripts that use it.

1. The rules give the paper's named sets exactly the settings the committed
   runs used (so the committed tables stay reproducible), and sets the papers
   did not name the settings the papers' rules give them.
2. The scripts run on any folder in the UCI split layout: each is run with a
   fake bnn-experiment that records its arguments, on generated folders of
   the sizes of a small, a larger and a protein-size set.

Usage: uci_protocol_test.py REPO_DIR
"""
import json
import os
import stat
import subprocess
import sys
import tempfile

REPO = sys.argv[1]
PROTOCOL = os.path.join(REPO, "docs/results/uci_protocol.py")


def make_dataset(root, name, rows, train, splits=3):
    folder = os.path.join(root, name)
    os.makedirs(folder)
    with open(os.path.join(folder, "data.txt"), "w") as f:
        for i in range(rows):
            f.write(f"{i % 7} {i % 5} {(i * 0.37) % 3:.3f}\n")
    with open(os.path.join(folder, "index_features.txt"), "w") as f:
        f.write("0\n1\n")
    with open(os.path.join(folder, "index_target.txt"), "w") as f:
        f.write("2\n")
    with open(os.path.join(folder, "n_splits.txt"), "w") as f:
        f.write(f"{splits}\n")
    for k in range(splits):
        with open(os.path.join(folder, f"index_train_{k}.txt"), "w") as f:
            f.write("".join(f"{i}\n" for i in range(train)))
        with open(os.path.join(folder, f"index_test_{k}.txt"), "w") as f:
            f.write("".join(f"{i}\n" for i in range(train, rows)))
    return folder


def settings(protocol, folder):
    out = subprocess.run([sys.executable, PROTOCOL, protocol, folder],
                         capture_output=True, text=True, check=True)
    assert out.stderr.startswith("== "), out.stderr
    return dict(line.split("=", 1) for line in out.stdout.split()), out.stderr


def check_rules(root):
    # (rows, training rows) of the shared sets and two the papers name but
    # ../shared does not hold.
    sizes = {"yacht": (308, 277), "energy": (768, 691), "concrete": (1030, 927),
             "wine-red": (1599, 1439), "kin8nm": (8192, 7373),
             "protein": (45730, 41157), "year": (515345, 463810)}
    folders = {name: make_dataset(root, name, *size) for name, size in sizes.items()}
    # Committed runs: docs/results/bali/table1/*.json, nng/table1, slang/table2.
    bali = {name: settings("bali-table1", f)[0] for name, f in folders.items()}
    for name in ("yacht", "energy", "concrete"):
        assert bali[name]["BALI_BATCH"] == "1000000", (name, bali[name])
        assert bali[name]["BALI_EPOCHS"] == "20000", (name, bali[name])
        assert bali[name]["BALI_N_EFF_FRACTION"] == "1.0"
        assert bali[name]["DO_EPOCHS"] == "4000"
    assert (bali["wine-red"]["BALI_BATCH"], bali["wine-red"]["BALI_EPOCHS"],
            bali["wine-red"]["BALI_N_EFF_FRACTION"], bali["wine-red"]["DO_EPOCHS"]) == (
        "1024", "10000", "1.0", "400"), bali["wine-red"]
    assert (bali["kin8nm"]["BALI_BATCH"], bali["kin8nm"]["BALI_EPOCHS"],
            bali["kin8nm"]["BALI_N_EFF_FRACTION"]) == ("1024", "2500", "0.25")
    # Table 4's protein row: B 2048, beta 0.1, sigma_r^2 20, 30000 iterations.
    assert (bali["protein"]["BALI_BATCH"], bali["protein"]["BALI_BETA"],
            bali["protein"]["BALI_PRIOR_VARIANCE"], bali["protein"]["BALI_EPOCHS"]) == (
        "2048", "0.1", "20", str(30000 // -(-41157 // 2048))), bali["protein"]
    nng = {name: settings("nng-table1", f)[0]["BATCH"] for name, f in folders.items()}
    assert nng == {"yacht": "10", "energy": "10", "concrete": "10", "wine-red": "10",
                   "kin8nm": "100", "protein": "100", "year": "500"}, nng
    slang = {name: settings("slang-table2", f)[0] for name, f in folders.items()}
    assert slang["wine-red"]["BATCH"] == "10" and slang["wine-red"]["MC_SAMPLES"] == "4"
    assert slang["kin8nm"]["BATCH"] == "100" and slang["kin8nm"]["MC_SAMPLES"] == "2"
    assert settings("slang-table2", folders["yacht"])[0]["SPLITS_AVAILABLE"] == "3"
    bad = subprocess.run([sys.executable, PROTOCOL, "no-such-table", folders["yacht"]],
                         capture_output=True, text=True)
    assert bad.returncode != 0 and "usage" in bad.stderr, bad.stderr


FAKE = """#!/bin/sh
# Records its arguments; writes the JSON the scripts read back.
echo "$@" >> "$FAKE_LOG"
while [ $# -gt 0 ]; do
  if [ "$1" = --json-out ]; then
    echo '{"splits": [{"chosen": {"noise_precision": 4}}]}' > "$2"
  fi
  shift
done
"""


def check_scripts(root):
    uci = os.path.join(root, "uci")
    os.makedirs(uci)
    make_dataset(uci, "tiny", 120, 100, splits=2)
    make_dataset(uci, "mid", 3000, 2700, splits=2)
    fake = os.path.join(root, "fake-experiment")
    with open(fake, "w") as f:
        f.write(FAKE)
    os.chmod(fake, os.stat(fake).st_mode | stat.S_IEXEC)
    log = os.path.join(root, "calls.txt")
    env = dict(os.environ, FAKE_LOG=log)
    for script in ("bali/run_table1.sh", "nng/run_table1.sh", "slang/run_table2.sh"):
        open(log, "w").close()
        out = os.path.join(root, "out", script.replace("/", "_"))
        run = subprocess.run(
            ["bash", os.path.join(REPO, "docs/results", script), fake, uci, out,
             "tiny", "mid"], capture_output=True, text=True, env=env, timeout=60)
        assert run.returncode == 0, (script, run.stderr)
        # Each set's settings are printed.
        assert "== tiny (120 rows" in run.stderr and "== mid (3000 rows" in run.stderr, run.stderr
        calls = open(log).read().splitlines()
        tiny = [c for c in calls if "--dataset tiny" in c]
        mid = [c for c in calls if "--dataset mid" in c]
        assert tiny and mid, calls
        # Every split of the folder (--splits 0) unless SPLITS says otherwise.
        assert all("--splits 0" in c or "--splits 1" in c for c in calls), calls
        if script.startswith("bali"):
            assert "batch_size=1000000" in tiny[0] and "epochs=20000" in tiny[0], tiny
            assert "batch_size=1024" in mid[0] and "n_eff_fraction=1.0" in mid[0], mid
            assert "epochs=4000" in tiny[1] and "epochs=400 " in mid[1], (tiny, mid)
        elif script.startswith("nng"):
            assert all("batch_size=10 " in c for c in tiny), tiny
            assert all("batch_size=100 " in c for c in mid), mid
        else:
            assert all("batch_size=10 " in c and "mc_samples=4" in c for c in tiny), tiny
            assert all("batch_size=100 " in c and "mc_samples=2" in c for c in mid), mid


def main():
    with tempfile.TemporaryDirectory() as root:
        check_rules(os.path.join(root, "rules"))
        check_scripts(os.path.join(root, "scripts"))
    print("uci_protocol_test: OK")


if __name__ == "__main__":
    main()
