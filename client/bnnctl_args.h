// Command-line parsing for bnnctl, kept apart from main() so it can be tested
// without a server. Parsing only checks syntax and local constraints (flag
// names, required flags, number formats); the server validates the rest.
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
  // --server HOST:PORT
  std::string server = "127.0.0.1:50051";
  // --json: machine-readable output on stdout.
  bool json = false;
  // --timeout SECONDS: deadline of each RPC.
  double timeout_seconds = 30.0;
};

struct HelpCommand {};

// upload --name N --task regression|classification --csv FILE --target COL
struct UploadCommand {
  std::string name;
  bool classification = false;
  std::string csv_path;
  std::string target;  // header name or 0-based column index
};

// train --dataset ID --method NAME --hidden 50[,50...]|none
//       [--activation relu[,tanh...]] --epochs E [--seed S]
//       [--param key=value ...]
struct TrainCommand {
  std::string dataset_id;
  std::string method;
  std::vector<int> hidden_sizes;  // empty: no hidden layer
  std::vector<std::string> activations;
  int epochs = 0;
  std::optional<uint64_t> seed;
  std::map<std::string, std::string> params;
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

// predict --snapshot ID --csv FILE --samples S [--seed S] [--target COL]
struct PredictCommand {
  std::string snapshot_id;
  std::string csv_path;
  int num_samples = 0;
  std::optional<uint64_t> seed;
  // A column of the CSV to leave out (e.g. the labels of a test set); empty:
  // every column is a feature.
  std::string target;
};

struct MethodsCommand {};
struct DatasetsCommand {};

// dataset ID
struct DatasetCommand {
  std::string dataset_id;
};

using Command = std::variant<HelpCommand, UploadCommand, TrainCommand,
                             JobCommand, CancelCommand, PredictCommand,
                             MethodsCommand, DatasetsCommand, DatasetCommand>;

struct Invocation {
  GlobalFlags global;
  Command command;
};

// Parses argv[1..] (without the program name). Every error is
// InvalidArgument naming the offending flag or argument; the caller reports
// it as a usage error. `--flag=value` and `--flag value` are both accepted.
absl::StatusOr<Invocation> ParseBnnctlArgs(
    const std::vector<std::string>& args);

// The full usage text, ending in a newline.
const char* BnnctlUsage();

}  // namespace bnn::client

#endif  // BNN_CLIENT_BNNCTL_ARGS_H_
