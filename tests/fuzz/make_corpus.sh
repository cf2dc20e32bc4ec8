#!/usr/bin/env bash
# Writes the seed corpora of the fuzz targets into tests/fuzz/corpus/<name>/:
# small valid inputs of each format plus a few near-misses, so that the
# smoke runs and libFuzzer start from inputs that reach deep into the code.
# Run from anywhere; needs python3.
# The files are committed; rerun this after changing a seed or a format.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
out=$here/corpus

# ------------------------------------------------------------------ csv
# One option byte (bit 0 classification, bits 1-2 delimiter , ; TAB |,
# bits 3-5 target: none, "y", "0", "1", "2", "label"), then the text.
rm -rf "$out/csv" && mkdir -p "$out/csv"
csv() { printf "$2" > "$out/csv/$1"; }
csv regression_named     '\x08a,b,y\n1,2,3\n4,5,6\n'
csv classification_named '\x09x1,x2,y\n0.5,1,0\n1.5,-2,1\n2,3e2,1\n'
csv no_target            '\x00a,b\n1,2\n-0.25,1e-300\n'
csv target_index_semicolon '\x12y;b\n1;2\n3;4\n'
csv quoted_crlf          '\x08"price, in $","a ""q"" name",y\r\n"1",2,3\r\n\r\n4,"5",6\r\n'
csv multiline_field      '\x08"two\nlines",y\n1,2\n'
csv bom_tab              '\x0c\xef\xbb\xbfa\tb\ty\n1\t2\t3\n  4 \t 5\t6\n'
csv multiclass_pipe      '\x0fa|y\n1|2\n2|4\n3|7\n'
csv target_index_1       '\x18a,b,c\n1,2,3\n4,5,6\n'
csv label_column         '\x29f,label\n0.1,-1\n0.2,1\n'
csv not_a_number         '\x08a,y\n1,nan\n'
csv unclosed_quote       '\x08a,y\n"1,2\n'
csv ragged_rows          '\x08a,b,y\n1,2\n1,2,3,4\n'
# Regression inputs of fixed crashes (docs/results/fuzz.md).
csv tab_after_quoted     '\x0c"a"\t"b c"\ty\n1\t 2 \t3\n'
csv tab_empty_name       '\x0ca\t\ty\n1\t2\t3\n'

# ------------------------------------------------------------------ idx
# A 16-bit little-endian length n, n bytes of IDX images, then IDX labels.
rm -rf "$out/idx" && mkdir -p "$out/idx"
python3 - "$out/idx" <<'PY'
import os, struct, sys
out = sys.argv[1]

def idx(dims, payload):
    return bytes([0, 0, 8, len(dims)]) + b"".join(
        struct.pack(">I", d) for d in dims) + bytes(payload)

def write(name, images, labels=b""):
    with open(os.path.join(out, name), "wb") as f:
        f.write(struct.pack("<H", len(images)) + images + labels)

write("images_labels", idx([3, 2, 2], range(0, 240, 20)), idx([3], [0, 1, 2]))
write("binary_labels", idx([2, 1, 3], [0, 128, 255, 7, 8, 9]), idx([2], [1, 0]))
write("no_labels", idx([2, 3], [1, 2, 3, 4, 5, 6]))
write("rank4", idx([2, 2, 1, 2], range(8)), idx([2], [9, 3]))
write("label_count_mismatch", idx([2, 2], [1, 2, 3, 4]), idx([3], [0, 1, 1]))
write("truncated_payload", idx([2, 2], [1, 2, 3]))
write("rank1_images", idx([3], [1, 2, 3]))
# Regression inputs of fixed crashes (docs/results/fuzz.md).
write("zero_rows", idx([0, 2], []))
write("overflowing_dims", idx([65536, 65536, 65536, 65536], [1, 2]))
write("int_element_type", bytes([0, 0, 0x0c, 2]) + struct.pack(">II", 1, 1)
      + b"\0\0\0\1")
PY
