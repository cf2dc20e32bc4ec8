// Command-line parsing for bnnctl (CLI11), kept apart from main() so it can
// be tested without a server. Parsing only checks syntax and local
// constraints (flag names, required flags, number formats); the server
// validates the rest.
#ifndef BNN_CLIENT_BNNCTL_ARGS_H_
#define BNN_CLIENT_BNNCTL_ARGS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <absl/status/statusor.h>

namespace bnn::client {

// Flags accepted before or after any command.
struct GlobalFlags {
  // --server HOST:PORT, else the environment variable BNN_SERVER.
  std::string server = "127.0.0.1:50051";
  // --json: machine-readable output on stdout.
  bool json = false;
  // --timeout SECONDS: deadline of each RPC.
  double timeout_seconds = 30.0;
  // --token TOKEN, else the environment variable BNN_TOKEN: sent as
  // `authorization: Bearer TOKEN` on every call. Empty: no such header.
  std::string token;
  // --tls-ca FILE: PEM certificates of the authorities that sign the
  // server's certificate; --tls-cert FILE and --tls-key FILE: the client's
  // own certificate chain and private key (PEM), for servers that ask for
  // one. Any of them switches the channel to TLS (with the system's roots
  // when --tls-ca is not given). All empty: a plaintext channel.
  std::string tls_ca_file;
  std::string tls_cert_file;
  std::string tls_key_file;
};

// --help, `help [COMMAND]` and --version: print `text` on stdout, exit 0.
struct TextCommand {
  std::string text;
};

// upload --name N --task regression|classification --csv FILE --target COL
// (every CSV path of every command may be "-": standard input)
struct UploadCommand {
  std::string name;
  bool classification = false;
  std::string csv_path;
  std::string target;  // header name or 0-based column index
};

// train --dataset ID --method NAME --hidden 50[,50...]|none
//       [--activation relu[,tanh...]] --epochs E [--seed S]
//       [--param key=value ...] [--dataset-version V]
//       [--parent SNAPSHOT [--prior-from-parent]]
//       [--model NAME [--publish]] [--wait [--wait-timeout SECONDS]]
// --hidden may be left out with --parent (the parent's architecture is used).
struct TrainCommand {
  std::string dataset_id;
  std::string method;
  std::vector<int> hidden_sizes;  // empty: no hidden layer (or the parent's)
  std::vector<std::string> activations;
  int epochs = 0;
  std::optional<uint64_t> seed;
  std::map<std::string, std::string> params;
  std::optional<int64_t> dataset_version;  // unset: the latest
  std::string parent_snapshot_id;          // empty: train from scratch
  bool prior_from_parent = false;
  // File the job under a model name; with `publish`, publish its snapshot
  // as the model's next version when it succeeds.
  std::string model_name;
  bool publish = false;
  // Watch the job until it ends (as `watch`), then print it as `job` does;
  // fail unless it succeeded.
  bool wait = false;
  double wait_timeout_seconds = 3600.0;
};

// job ID [--wait [--wait-timeout SECONDS]]
struct JobCommand {
  std::string job_id;
  bool wait = false;
  double wait_timeout_seconds = 3600.0;
};

// cancel ID
struct CancelCommand {
  std::string job_id;
};

// jobs [--state S[,S...]] [--dataset ID] [--method NAME] [--model NAME]
//      [--limit N]
struct JobsCommand {
  // Wire state names without their prefix ("running", "interrupted").
  std::vector<std::string> states;
  std::string dataset_id;
  std::string method;
  std::string model_name;
  int limit = 20;
};

// watch ID [--wait-timeout SECONDS]: the job's progress until it ends,
// reconnecting while the server restarts.
struct WatchCommand {
  std::string job_id;
  double wait_timeout_seconds = 3600.0;
};

// predict (--snapshot ID | --model REF) --csv FILE (--samples S |
//         --linearized) [--seed S] [--target COL]
//         [--quantiles 0.05,0.5,0.95] [--per-sample]
// (REF: a model reference NAME, NAME@ALIAS or NAME:VERSION, as for acquire
// and export)
struct PredictCommand {
  // Exactly one of the two.
  std::string snapshot_id;
  std::string model;
  std::string csv_path;
  // 0 (only with --linearized, which draws no samples): the server default.
  int num_samples = 0;
  std::optional<uint64_t> seed;
  // A column of the CSV to leave out (e.g. the labels of a test set); empty:
  // every column is a feature. Its values are the targets of an Evaluate
  // call with the same samples and seed, whose scores are printed below the
  // predictions (Monte Carlo predictions only).
  std::string target;
  bool linearized = false;
  // Predictive quantile levels, each in (0, 1).
  std::vector<double> quantiles;
  bool per_sample = false;
};

// acquire (--snapshot ID | --model REF) (--dataset ID [--version V] |
//         --csv FILE) --k K
//         --heuristic max_variance|entropy|bald|margin|batchbald|random
//         [--samples S]
//         [--seed S] [--diversity-power P]
struct AcquireCommand {
  // Exactly one of the two.
  std::string snapshot_id;
  std::string model;
  // The pool: exactly one of a stored dataset (optionally one version) and a
  // CSV file whose every column is a feature.
  std::string dataset_id;
  std::optional<int64_t> dataset_version;
  std::string csv_path;
  int k = 0;
  std::string heuristic;
  int num_samples = 0;  // 0: the server default
  std::optional<uint64_t> seed;
  double diversity_power = 0.0;  // 0: deterministic top-k
};

// evaluate (--snapshot ID | --model REF) (--dataset ID [--version V] |
//          --csv FILE --target COL) [--ood-dataset ID | --ood-csv FILE]
//          [--samples S] [--seed S] [--ece-bins B]
struct EvaluateCommand {
  // Exactly one of the two.
  std::string snapshot_id;
  std::string model;
  // The labelled rows: a stored dataset (optionally one version), or a CSV
  // file whose `target` column holds the labels (class label values for a
  // classifier) and every other column a feature.
  std::string dataset_id;
  std::optional<int64_t> dataset_version;
  std::string csv_path;
  std::string target;
  // Optional out-of-distribution rows (classifiers): a stored dataset or a
  // CSV file whose every column is a feature.
  std::string ood_dataset_id;
  std::string ood_csv_path;
  int num_samples = 0;  // 0: the server default
  std::optional<uint64_t> seed;
  int ece_bins = 0;  // 0: the server default (15)
};

struct MethodsCommand {};
struct DatasetsCommand {};

// dataset ID [--version V]
struct DatasetCommand {
  std::string dataset_id;
  std::optional<int64_t> version;  // unset: the latest
};

// append --dataset ID --csv FILE --target COL [--expected-version V]
struct AppendCommand {
  std::string dataset_id;
  std::string csv_path;
  std::string target;  // header name or 0-based column index
  std::optional<int64_t> expected_version;
};

// snapshots [--dataset ID]
struct SnapshotsCommand {
  std::string dataset_id;  // empty: every snapshot
};

// snapshot ID
struct SnapshotCommand {
  std::string snapshot_id;
};

// delete-snapshot ID [--force]
struct DeleteSnapshotCommand {
  std::string snapshot_id;
  // Also when model versions point at it (they are removed).
  bool force = false;
};

// export (--snapshot ID | --model REF) --out FILE
struct ExportCommand {
  // Exactly one of the two.
  std::string snapshot_id;
  std::string model;
  std::string out_path;
};

// models [NAME]: every model, or one with its versions.
struct ModelsCommand {
  std::string name;  // empty: list them all
};

// publish SNAPSHOT --model NAME [--alias ALIAS ...]
struct PublishCommand {
  std::string snapshot_id;
  std::string model;
  std::vector<std::string> aliases;
};

// alias NAME ALIAS VERSION, or alias NAME ALIAS --delete
struct AliasCommand {
  std::string model;
  std::string alias;
  int64_t version = 0;  // unset with --delete
  bool remove = false;
};

// delete-model NAME
struct DeleteModelCommand {
  std::string model;
};

// delete-dataset ID|NAME [--force]
struct DeleteDatasetCommand {
  std::string dataset_id;
  // Also while snapshots or queued or running jobs use it.
  bool force = false;
};

// import --in FILE
struct ImportCommand {
  std::string in_path;
};

// health: the grpc.health.v1 status of the server (no token needed).
struct HealthCommand {};

// plot loss JOB_ID | plot bands MODEL --csv FILE [--target COL] |
// plot reliability MODEL --csv FILE --target COL, each [--out FILE]
// [--samples S] [--seed N] [--bins B] [--python PATH]: PNG figures drawn by
// the Python package's plotting (`PYTHON -m bnn_serve.plot`, with the same
// server, token and TLS flags); when PYTHON cannot import bnn_serve and
// matplotlib, says how to install them.
struct PlotCommand {
  // "loss", "bands" or "reliability".
  std::string kind;
  // The job (loss) or the snapshot id or model reference (bands,
  // reliability).
  std::string target;
  // bands: rows whose x range is drawn (and, with `target_column`, the
  // training points); reliability: the labelled rows. "-" is not accepted
  // (the Python program reads the file itself).
  std::string csv_path;
  std::string target_column;
  // The PNG file written; empty: the program's default (KIND.png).
  std::string out_path;
  // Monte Carlo samples (0: the server's default) and seed.
  int num_samples = 0;
  std::optional<uint64_t> seed;
  // reliability: confidence bins (0: the server's default, 15).
  int bins = 0;
  // --python PATH, else the environment variable BNN_PYTHON, else Debian's
  // interpreter, which the package's install instructions use.
  std::string python = "/usr/bin/python3";
};

// token create --scopes predict[,train,admin] [--name NAME]: a new token for
// the server's --token-file, made locally (no server is contacted).
struct TokenCreateCommand {
  // Checked when parsed by the token file's own parser (server/auth/).
  std::string scopes;
  // Empty: named after its hash.
  std::string name;
};

using Command = std::variant<
    TextCommand, UploadCommand, TrainCommand, JobCommand, CancelCommand,
    JobsCommand, WatchCommand, PredictCommand, AcquireCommand, MethodsCommand,
    DatasetsCommand, DatasetCommand, AppendCommand, SnapshotsCommand,
    SnapshotCommand, DeleteSnapshotCommand, ExportCommand, ImportCommand,
    HealthCommand, TokenCreateCommand, ModelsCommand, PublishCommand,
    AliasCommand, DeleteModelCommand, DeleteDatasetCommand, EvaluateCommand,
    PlotCommand>;

struct Invocation {
  GlobalFlags global;
  Command command;
};

// Parses argv[1..] (without the program name), reading BNN_SERVER and
// BNN_TOKEN from the environment for flags that are not given. Every error
// is InvalidArgument naming the offending flag, argument or command; the
// caller reports it as a usage error. `--flag=value` and `--flag value` are
// both accepted.
absl::StatusOr<Invocation> ParseBnnctlArgs(
    const std::vector<std::string>& args);

// "bnnctl VERSION (commit COMMIT)": the library version (bnn/version.h) and
// the git commit bnnctl was built from ("unknown" outside a git checkout,
// "-dirty" appended for uncommitted changes).
std::string BnnctlVersion();

}  // namespace bnn::client

#endif  // BNN_CLIENT_BNNCTL_ARGS_H_
