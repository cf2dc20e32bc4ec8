#!/usr/bin/env bash
# Writes the seed corpora of the fuzz targets into tests/fuzz/corpus/<name>/:
# small valid inputs of each format plus a few near-misses, so that the
# smoke runs and libFuzzer start from inputs that reach deep into the code.
# Run from anywhere; needs python3 and protoc (both build dependencies).
# The files are committed; rerun this after changing a seed or a format.
# Files named crash-* are inputs of fixed crashes as libFuzzer found them
# (docs/results/fuzz.md); they are kept, not written here.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
out=$here/corpus

# Empties corpus/$1 of the seeds written here, keeping crash-* inputs.
fresh() {
  mkdir -p "$out/$1"
  find "$out/$1" -type f ! -name 'crash-*' -delete
}

# ------------------------------------------------------------------ csv
# One option byte (bit 0 classification, bits 1-2 delimiter , ; TAB |,
# bits 3-5 target: none, "y", "0", "1", "2", "label"), then the text.
fresh csv
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
fresh idx
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

# ------------------------------------------------------------- snapshot
# A flag byte (bit 0: repair the record frame), then a snapshot file: the
# golden snapshots of every posterior family (tests/core/io/golden).
fresh snapshot
for f in "$repo"/tests/core/io/golden/*.bnnsnap; do
  { printf '\x01'; cat "$f"; } > "$out/snapshot/$(basename "$f" .bnnsnap)"
done
{ printf '\x00'; cat "$repo/tests/core/io/golden/low_rank.bnnsnap"; } \
  > "$out/snapshot/low_rank_unrepaired"

# ---------------------------------------------------------------- store
# A selector byte (bits 0-6: which file of tests/server/store/golden_data,
# in store_fuzz.cc's order; bit 7: repair the record frame), then that
# file's contents: each golden file as it is.
fresh store
golden=$repo/tests/server/store/golden_data
i=0
for f in datasets/ds-d2f12dccf5712957.dataset \
         datasets/ds-d2f12dccf5712957.v2.dataset \
         jobs/job-c5c7ec00269a648e.job \
         snapshots/snap-d50c100cac863123.info \
         snapshots/snap-d50c100cac863123.snap; do
  name=$(basename "$f" | tr . _)
  { printf "\\x$(printf %02x $((0x80 + i)))"; cat "$golden/$f"; } \
    > "$out/store/$name"
  i=$((i + 1))
done
{ printf '\x02'; cat "$golden/jobs/job-c5c7ec00269a648e.job"; } \
  > "$out/store/job_unrepaired"

# -------------------------------------------------------------- request
# bnn.fuzz.RpcCall (rpc_call.proto) messages, written in text form here.
fresh request
request() {
  protoc --encode=bnn.fuzz.RpcCall -I "$here" -I "$repo/proto" \
    "$here/rpc_call.proto" > "$out/request/$1"
}
request upload_regression <<'PB'
upload_dataset {
  messages { header { name: "cubic" task: TASK_REGRESSION num_features: 2
                      feature_names: "a" feature_names: "b" target_name: "y" } }
  messages { chunk { rows { x: 1 x: 2 y: 3 } rows { x: -1 x: 0.5 y: 1e3 } } }
  messages { chunk { rows { x: 0 x: 0 y: 0 } } }
}
PB
request upload_classification <<'PB'
upload_dataset {
  messages { header { name: "labels" task: TASK_CLASSIFICATION num_features: 1 } }
  messages { chunk { rows { x: 1 y: -1 } rows { x: 2 y: 1 } rows { x: 3 y: 5 } } }
}
PB
request upload_chunk_first <<'PB'
upload_dataset {
  messages { chunk { rows { x: 1 y: 1 } } }
  messages { header { name: "late" task: TASK_REGRESSION num_features: 1 } }
}
PB
request append_regression <<'PB'
append_rows {
  messages { header { dataset_id: "ds-1" expected_version: 1 } }
  messages { chunk { rows { x: 1 x: 2 y: 3 } rows { x: 4 x: 5 y: 6 } } }
}
PB
request append_binary <<'PB'
fixture: BINARY
append_rows {
  messages { header { dataset_id: "ds-1" } }
  messages { chunk { rows { x: 1 x: 2 y: 1 } rows { x: 4 x: 5 y: -1 } } }
}
PB
request start_training_slang <<'PB'
start_training {
  dataset_id: "ds-1" method: "slang" epochs: 3 seed: 7
  model { hidden_sizes: 8 hidden_sizes: 4 activations: "tanh" }
  slang { rank: 2 mc_samples: 3 learning_rate: 0.05 precision: "float32" }
  params { key: "batch_size" value: "16" }
}
PB
request start_training_warm <<'PB'
fixture: MULTICLASS
start_training {
  dataset_id: "ds-1" method: "vogn_diag" dataset_version: 1
  parent_snapshot_id: "snap-1" prior_from_parent: true
  params { key: "mc_samples" value: "2" }
}
PB
request start_training_bad_param <<'PB'
start_training { dataset_id: "ds-1" method: "bbb" params { key: "rank" value: "x" } }
PB
request predict_regression <<'PB'
predict {
  snapshot_id: "snap-1" num_samples: 8 seed: 3
  rows { x: 0.5 x: -1 } rows { x: 2 x: 0 }
  quantiles: 0.05 quantiles: 0.5 quantiles: 0.95 per_sample: true
}
PB
request predict_linearized <<'PB'
predict { snapshot_id: "snap-1" rows { x: 1e6 x: -1e6 } linearized: true quantiles: 0.25 }
PB
request predict_multiclass <<'PB'
fixture: MULTICLASS
predict { snapshot_id: "snap-1" num_samples: 4 seed: 1 rows { x: 1 x: 2 } per_sample: true }
PB
request acquire_rows <<'PB'
acquire {
  snapshot_id: "snap-1" k: 2 heuristic: "max_variance" num_samples: 4 seed: 9
  rows { rows { x: 0 x: 0 } rows { x: 1 x: 1 } rows { x: 5 x: -5 } }
}
PB
request acquire_dataset_bald <<'PB'
fixture: BINARY
acquire {
  snapshot_id: "snap-1" dataset_id: "ds-1" dataset_version: 1 k: 3
  heuristic: "bald" num_samples: 4 seed: 2 diversity_power: 1.5
}
PB
request predict_packed <<'PB'
predict {
  snapshot_id: "snap-1" num_samples: 4 seed: 3 packed_response: true
  features { shape: 2 shape: 2 f64: 0.5 f64: -1 f64: 2 f64: 0 }
}
PB
request predict_packed_f32 <<'PB'
fixture: MULTICLASS
predict { snapshot_id: "snap-1" num_samples: 4 features { shape: 1 shape: 2 f32: 1 f32: 2 } }
PB
request acquire_batchbald <<'PB'
fixture: MULTICLASS
acquire {
  snapshot_id: "snap-1" k: 2 heuristic: "batchbald" num_samples: 4 seed: 9
  rows { features { shape: 3 shape: 2 f64: 0 f64: 0 f64: 1 f64: 1 f64: 5 f64: -5 } }
}
PB
request evaluate_rows <<'PB'
evaluate {
  snapshot_id: "snap-1" num_samples: 4 seed: 1
  rows { rows { x: 0.5 x: -1 y: 2 } rows { x: 2 x: 0 y: -1 } }
}
PB
request evaluate_packed_ood <<'PB'
fixture: BINARY
evaluate {
  snapshot_id: "snap-1" num_samples: 4 seed: 1 ece_bins: 4
  rows { features { shape: 2 shape: 2 f64: 0 f64: 1 f64: 2 f64: 3 }
         targets { shape: 2 f64: 1 f64: -1 } }
  ood_rows { rows { x: 9 x: 9 } }
}
PB
request evaluate_dataset <<'PB'
fixture: MULTICLASS
evaluate { snapshot_id: "snap-1" dataset_id: "ds-1" num_samples: 4 }
PB
request get_dataset <<'PB'
get_dataset { dataset_id: "ds-1" version: 0 }
PB
request get_job <<'PB'
get_job { job_id: "job-1" }
PB
request cancel_job <<'PB'
cancel_job { job_id: "" }
PB
request get_snapshot <<'PB'
get_snapshot { snapshot_id: "snap-1" }
PB
request delete_snapshot <<'PB'
delete_snapshot { snapshot_id: "snap-1" }
PB
request export_snapshot <<'PB'
export_snapshot { snapshot_id: "snap-1" }
PB
request predict_model_alias <<'PB'
predict { model: "fraud.v2@stable" num_samples: 4 seed: 2 rows { x: 0.5 x: 1 } }
PB
request acquire_model_version <<'PB'
acquire { model: "m:3" dataset_id: "ds-1" k: 1 heuristic: "max_variance" num_samples: 4 seed: 1 }
PB
request export_model <<'PB'
export_snapshot { model: "m" }
PB
request delete_snapshot_force <<'PB'
delete_snapshot { snapshot_id: "snap-1" force: true }
PB
request publish_model <<'PB'
publish_model { name: "fraud.v2" snapshot_id: "snap-1" aliases: "stable" aliases: "canary-1" }
PB
request set_alias <<'PB'
set_alias { name: "m" alias: "stable" version: 2 }
PB
request list_models <<'PB'
list_models { page_size: 10 page_token: "m" }
PB
request delete_dataset <<'PB'
delete_dataset { dataset_id: "cubic" force: true }
PB
request import_snapshot <<'PB'
import_snapshot { chunks { data: "BNNSNAP1" } chunks { data: "\001\000\000\000" } }
PB
