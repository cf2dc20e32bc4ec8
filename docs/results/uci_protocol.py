#!/usr/bin/env python3
"""The papers' UCI protocols as rules on a dataset's size, not its name.

The table scripts (docs/results/*/run_table*.sh) ask this module for the
settings of each dataset folder in the UCI split layout (data.txt,
index_train_K.txt, ...), so that a set the papers did not name gets the
protocol the papers' own rules give it, and print what each set got:

  eval "$(python3 docs/results/uci_protocol.py PROTOCOL DATASET_DIR)"

prints shell assignments on stdout and one line describing them on stderr.
PROTOCOL is one of:

  slang-table2  SLANG §9.4 (reference/slang.md): minibatch 10 and 4 MC
                samples for the "5 smallest" sets, 100 and 2 for the "3
                larger". The paper names the sets; by size they are < 2,000
                rows (the largest, wine, 1,599) and >= 8,192 rows; the cut
                is NNG's stated "< 2,000 points" (below).
  nng-table1    NNG §6.1 (reference/nng.md): "batch size 10 for the 5 small
                datasets (< 2000 points), 500 for Year, 100 for the other
                four"; Year is the one set of >= 500,000 rows.
  bali-table1   BALI Table 4 (reference/bali.md §5.2): B = 1,024 (2,048 for
                protein-size sets, >= 20,000 rows), full batch when the
                training split is no larger than B (the paper's full-batch
                sets: yacht, concrete, energy, whose training splits are
                276-927 rows; redwine's 1,439 gets 1,024); N_eff = N for
                sets under 5,000 rows (redwine, 1,599), N/4 from there
                (kin8nm 8,192, power 9,568, protein); 20,000 iterations
                (30,000, beta 0.1 and sigma_r^2 20 for protein-size sets),
                as epochs of ceil(N/B) steps. MC dropout beside it: 4,000
                epochs for the full-batch-size sets, 400 otherwise (Gal &
                Ghahramani's two budgets, by the same cut).
"""
import math
import os
import sys


def dataset_size(folder):
    """(rows of data.txt, rows of training split 0, splits available)."""
    with open(os.path.join(folder, "data.txt")) as f:
        rows = sum(1 for line in f if line.strip())
    with open(os.path.join(folder, "index_train_0.txt")) as f:
        train = sum(1 for line in f if line.strip())
    splits_file = os.path.join(folder, "n_splits.txt")
    if os.path.exists(splits_file):
        with open(splits_file) as f:
            splits = int(f.read().split()[0])
    else:
        splits = sum(1 for name in os.listdir(folder)
                     if name.startswith("index_train_"))
    return rows, train, splits


SMALL_ROWS = 2000  # NNG §6.1: "the 5 small datasets (< 2000 points)"


def slang_table2(rows, train):
    small = rows < SMALL_ROWS
    settings = {"BATCH": 10 if small else 100, "MC_SAMPLES": 4 if small else 2}
    why = (f"{f'small set (< {SMALL_ROWS} rows)' if small else 'larger set'}: "
           f"minibatch {settings['BATCH']}, "
           f"{settings['MC_SAMPLES']} MC samples, 120 epochs")
    return settings, why


def nng_table1(rows, train):
    if rows < SMALL_ROWS:
        batch, kind = 10, f"small set (< {SMALL_ROWS} rows)"
    elif rows >= 500_000:
        batch, kind = 500, "Year-size set (>= 500,000 rows)"
    else:
        batch, kind = 100, "larger set"
    return {"BATCH": batch}, f"{kind}: minibatch {batch}"


def bali_table1(rows, train):
    protein = rows >= 20_000
    cap = 2048 if protein else 1024
    batch = min(train, cap)
    iterations = 30_000 if protein else 20_000
    n_eff_fraction = 1.0 if rows < 5000 else 0.25
    steps_per_epoch = math.ceil(train / batch)
    settings = {
        "BALI_BATCH": 1_000_000 if batch == train else batch,
        "BALI_EPOCHS": iterations // steps_per_epoch,
        "BALI_N_EFF_FRACTION": n_eff_fraction,
        "BALI_BETA": 0.1 if protein else 0.2,
        "BALI_PRIOR_VARIANCE": 20 if protein else 40,
        "DO_EPOCHS": 4000 if batch == train else 400,
    }
    why = (f"{'full batch' if batch == train else f'B = {batch}'}, "
           f"{iterations} iterations = {settings['BALI_EPOCHS']} epochs of "
           f"{steps_per_epoch} step(s), N_eff = {n_eff_fraction:g} N, "
           f"beta {settings['BALI_BETA']}, sigma_r^2 "
           f"{settings['BALI_PRIOR_VARIANCE']}; MC dropout "
           f"{settings['DO_EPOCHS']} epochs")
    return settings, why


PROTOCOLS = {"slang-table2": slang_table2, "nng-table1": nng_table1,
             "bali-table1": bali_table1}


def main(argv):
    if len(argv) != 3 or argv[1] not in PROTOCOLS:
        sys.exit(f"usage: {argv[0]} {{{'|'.join(PROTOCOLS)}}} DATASET_DIR")
    folder = argv[2].rstrip("/")
    rows, train, splits = dataset_size(folder)
    settings, why = PROTOCOLS[argv[1]](rows, train)
    settings["SPLITS_AVAILABLE"] = splits
    for key, value in settings.items():
        print(f"{key}={value}")
    print(f"== {os.path.basename(folder)} ({rows} rows, {train} in a training "
          f"split, {splits} splits): {why}", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv)
