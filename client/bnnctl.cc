// bnnctl: command-line client of bnn-server. See `bnnctl --help` and
// `bnnctl COMMAND --help`.
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <spawn.h>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <utility>
#include <variant>
#include <vector>

#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <absl/strings/ascii.h>
#include <absl/strings/match.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_format.h>
#include <absl/time/time.h>

#include "bnn/status.h"

#include "client/bnn_client.h"
#include "client/bnnctl_args.h"
#include "client/bnnctl_output.h"
#include "client/csv_input.h"
#include "server/auth/scope.h"
#include "server/auth/token_file.h"

namespace bnn::client {
namespace {

constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

// Runs `argv` (argv[0] a path or a name looked up in PATH) with this
// process's environment plus `extra_env` ("NAME=VALUE", overriding), its
// standard output and error sent to /dev/null when `quiet`, and returns its
// exit status (128 + N when killed by signal N). posix_spawn, not fork:
// gRPC's threads are running.
absl::StatusOr<int> RunProgram(const std::vector<std::string>& argv,
                               const std::vector<std::string>& extra_env,
                               bool quiet) {
  std::vector<std::string> env = extra_env;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const absl::string_view line = *entry;
    const absl::string_view name = line.substr(0, line.find('='));
    bool replaced = false;
    for (const std::string& extra : extra_env) {
      replaced = replaced || absl::StartsWith(extra, absl::StrCat(name, "="));
    }
    if (!replaced) env.emplace_back(line);
  }
  std::vector<char*> c_argv, c_env;
  for (const std::string& arg : argv) {
    c_argv.push_back(const_cast<char*>(arg.c_str()));
  }
  c_argv.push_back(nullptr);
  for (const std::string& entry : env) {
    c_env.push_back(const_cast<char*>(entry.c_str()));
  }
  c_env.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (quiet) {
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null",
                                     O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null",
                                     O_WRONLY, 0);
  }
  pid_t pid = 0;
  const int error = posix_spawnp(&pid, c_argv[0], &actions, nullptr,
                                 c_argv.data(), c_env.data());
  posix_spawn_file_actions_destroy(&actions);
  if (error != 0) {
    return absl::NotFoundError(
        absl::StrCat("cannot run ", argv[0], ": ", std::strerror(error)));
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      return absl::InternalError(
          absl::StrCat("waitpid: ", std::strerror(errno)));
    }
  }
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

// What `bnnctl plot` says when `python` cannot import the plotting.
std::string PlotInstallHint(const std::string& python, absl::string_view why) {
  return absl::StrCat(
      "bnnctl plot runs the Python package bnn_serve's plotting (", python,
      " -m bnn_serve.plot), but ", why,
      ". Install it: `sudo apt-get install python3-grpcio python3-protobuf "
      "python3-numpy python3-matplotlib` (deploy/install-deps.sh), then "
      "`pip install --no-build-isolation client/python` (README, \"Using "
      "Python\"), or put client/python and BUILD/client/python on "
      "PYTHONPATH; --python PATH (or BNN_PYTHON) picks another interpreter");
}

// Runs one parsed command against the server and writes its output.
class Runner {
 public:
  Runner(const GlobalFlags& global, BnnClient* client)
      : global_(global), client_(client) {}

  // Watches the job until it ends (reconnecting while the server restarts)
  // and returns it. With `show`, writes its progress to `out`: on a
  // `terminal` one line redrawn in place, otherwise one line per event.
  absl::StatusOr<v1::Job> Follow(const std::string& job_id,
                                 double timeout_seconds, std::ostream& out,
                                 bool terminal, bool show) {
    bool drawn = false;
    absl::StatusOr<v1::Job> job = client_->WatchJobUntilDone(
        job_id, absl::Seconds(timeout_seconds), [&](const v1::JobEvent& event) {
          if (!show) return;
          if (terminal) {
            // Carriage return, the bar, then erase the rest of the line.
            out << "\r" << FormatProgressBar(event) << "\x1b[K" << std::flush;
            drawn = true;
          } else {
            out << FormatJobEventLine(event) << std::endl;
          }
        });
    if (drawn) out << "\n" << std::flush;
    return job;
  }

  // OK for a SUCCEEDED job; otherwise the failure bnnctl exits 1 with.
  static absl::Status UnlessSucceeded(const v1::Job& job) {
    if (job.state() == v1::JOB_STATE_SUCCEEDED) return absl::OkStatus();
    return absl::AbortedError(absl::StrCat(
        "job ", job.job_id(), " ", JobStateName(job.state()),
        job.error().empty() ? "" : absl::StrCat(": ", job.error())));
  }

  absl::Status operator()(const TextCommand& command) {
    std::cout << command.text;
    return absl::OkStatus();
  }

  absl::Status operator()(const UploadCommand& command) {
    CsvOptions csv;
    csv.target_column = command.target;
    csv.classification = command.classification;
    absl::StatusOr<Dataset> data = ReadCsvInput(command.csv_path, csv);
    if (!data.ok()) return data.status();

    v1::DatasetHeader header;
    header.set_name(command.name);
    header.set_task(command.classification ? v1::TASK_CLASSIFICATION
                                           : v1::TASK_REGRESSION);
    header.set_num_features(static_cast<int32_t>(data->num_features));
    for (const std::string& name : data->feature_names) {
      header.add_feature_names(name);
    }
    header.set_target_name(data->target_name);
    // The CSV reader validated the labels locally by encoding them as class
    // indices; the wire carries the original label values.
    std::vector<double> targets = data->targets;
    if (command.classification) {
      for (double& y : targets) y = data->class_values[static_cast<int>(y)];
    }
    absl::StatusOr<v1::DatasetInfo> info =
        client_->UploadDataset(header, data->features, targets);
    if (!info.ok()) return info.status();
    Print(*info, DatasetJson, FormatDataset);
    return absl::OkStatus();
  }

  absl::Status operator()(const AppendCommand& command) {
    // Read as regression so that labels keep their values: the server
    // checks them against the dataset's classes.
    CsvOptions csv;
    csv.target_column = command.target;
    absl::StatusOr<Dataset> data = ReadCsvInput(command.csv_path, csv);
    if (!data.ok()) return data.status();
    absl::StatusOr<v1::DatasetInfo> stored =
        client_->GetDataset(command.dataset_id);
    if (!stored.ok()) return stored.status();
    if (absl::Status status = CheckSameFeatures(
            data->feature_names,
            {stored->feature_names().begin(), stored->feature_names().end()},
            stored->num_features());
        !status.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(command.csv_path, ": ", status.message()));
    }
    absl::StatusOr<v1::DatasetInfo> info = client_->AppendRows(
        command.dataset_id, data->features, data->num_features, data->targets,
        command.expected_version);
    if (!info.ok()) return info.status();
    Print(*info, DatasetJson, FormatDataset);
    return absl::OkStatus();
  }

  absl::Status operator()(const TrainCommand& command) {
    v1::StartTrainingRequest request;
    request.set_dataset_id(command.dataset_id);
    request.set_method(command.method);
    for (int width : command.hidden_sizes) {
      request.mutable_model()->add_hidden_sizes(width);
    }
    for (const std::string& activation : command.activations) {
      request.mutable_model()->add_activations(activation);
    }
    request.set_epochs(command.epochs);
    if (command.seed.has_value()) request.set_seed(*command.seed);
    std::map<std::string, std::string> params = command.params;
    if (!command.parent_snapshot_id.empty()) {
      // A warm start keeps the parent's method parameters unless --param
      // overrides them (the server would reset them to the defaults).
      absl::StatusOr<v1::SnapshotInfo> parent =
          client_->GetSnapshot(command.parent_snapshot_id);
      if (absl::IsPermissionDenied(parent.status())) {
        // GetSnapshot needs the predict scope, which a train-only token
        // lacks: train as before, with --param alone.
        std::cerr << "cannot read parent " << command.parent_snapshot_id
                  << "'s parameters (GetSnapshot needs the predict scope): "
                     "only --param is sent, the method's defaults apply to "
                     "the rest\n";
      } else if (!parent.ok()) {
        return parent.status();
      } else {
        InheritedParams inherited =
            InheritParentParams(*parent, command.method, command.params);
        std::cerr << FormatInheritedParams(*parent, command.method, inherited)
                  << "\n";
        params = std::move(inherited.params);
      }
    }
    for (const auto& [key, value] : params) {
      (*request.mutable_params())[key] = value;
    }
    if (command.dataset_version.has_value()) {
      request.set_dataset_version(*command.dataset_version);
    }
    request.set_parent_snapshot_id(command.parent_snapshot_id);
    request.set_prior_from_parent(command.prior_from_parent);
    request.set_model_name(command.model_name);
    request.set_publish(command.publish);
    absl::StatusOr<std::string> job_id = client_->StartTraining(request);
    if (!job_id.ok()) return job_id.status();
    if (command.wait) {
      // As `job ID --wait`: progress on stderr (a terminal only), the
      // finished job on stdout.
      if (!global_.json) std::cerr << "queued job " << *job_id << "\n";
      const bool terminal = isatty(STDERR_FILENO);
      absl::StatusOr<v1::Job> job =
          Follow(*job_id, command.wait_timeout_seconds, std::cerr, terminal,
                 /*show=*/!global_.json && terminal);
      if (!job.ok()) return job.status();
      Print(*job, JobJson, FormatJob);
      return UnlessSucceeded(*job);
    }
    if (global_.json) {
      PrintJson({{"job_id", *job_id}});
    } else {
      std::cout << "queued job " << *job_id << "; follow it with: bnnctl job "
                << *job_id << " --wait\n";
    }
    return absl::OkStatus();
  }

  absl::Status operator()(const JobCommand& command) {
    absl::StatusOr<v1::Job> job;
    if (command.wait) {
      // Progress goes to stderr and only to a terminal, so that stdout stays
      // the job alone and logs stay clean.
      const bool show_progress = !global_.json && isatty(STDERR_FILENO);
      job = client_->WaitForJob(
          command.job_id, absl::Seconds(command.wait_timeout_seconds),
          [&](const v1::Job& polled) {
            if (!show_progress) return;
            std::cerr << absl::StrFormat("\r%s %5.1f%%  epoch %d  loss %.6g ",
                                         JobStateName(polled.state()),
                                         100 * polled.progress(),
                                         polled.epoch(), polled.last_loss())
                      << std::flush;
          });
      if (show_progress) std::cerr << "\n";
    } else {
      job = client_->GetJob(command.job_id);
    }
    if (!job.ok()) return job.status();
    Print(*job, JobJson, FormatJob);
    return command.wait ? UnlessSucceeded(*job) : absl::OkStatus();
  }

  absl::Status operator()(const CancelCommand& command) {
    absl::StatusOr<v1::Job> job = client_->CancelJob(command.job_id);
    if (!job.ok()) return job.status();
    Print(*job, JobJson, FormatJob);
    return absl::OkStatus();
  }

  absl::Status operator()(const JobsCommand& command) {
    v1::ListJobsRequest request;
    for (const std::string& state : command.states) {
      v1::JobState wire = v1::JOB_STATE_UNSPECIFIED;
      v1::JobState_Parse(
          absl::StrCat("JOB_STATE_", absl::AsciiStrToUpper(state)), &wire);
      request.add_states(wire);
    }
    request.set_dataset_id(command.dataset_id);
    request.set_method(command.method);
    request.set_model_name(command.model_name);
    absl::StatusOr<std::vector<v1::Job>> jobs =
        client_->ListAllJobs(request, command.limit);
    if (!jobs.ok()) return jobs.status();
    if (global_.json) {
      Json list = Json::array();
      for (const v1::Job& job : *jobs) list.push_back(JobJson(job));
      PrintJson({{"jobs", std::move(list)}});
    } else {
      std::cout << FormatJobList(*jobs);
    }
    return absl::OkStatus();
  }

  absl::Status operator()(const WatchCommand& command) {
    absl::StatusOr<v1::Job> job =
        Follow(command.job_id, command.wait_timeout_seconds, std::cout,
               isatty(STDOUT_FILENO), /*show=*/!global_.json);
    if (!job.ok()) return job.status();
    if (global_.json) PrintJson(JobJson(*job));
    return UnlessSucceeded(*job);
  }

  absl::Status operator()(const PredictCommand& command) {
    absl::StatusOr<FeatureTable> inputs =
        ReadFeatureCsv(command.csv_path, command.target);
    if (!inputs.ok()) return inputs.status();
    v1::PredictRequest request;
    if (command.model.empty()) {
      request.set_snapshot_id(command.snapshot_id);
    } else {
      request.set_model(command.model);
    }
    request.set_num_samples(command.num_samples);
    if (command.seed.has_value()) request.set_seed(*command.seed);
    request.set_linearized(command.linearized);
    request.mutable_quantiles()->Add(command.quantiles.begin(),
                                     command.quantiles.end());
    request.set_per_sample(command.per_sample);
    if (absl::Status status = AddFeatureRows(
            inputs->features, inputs->num_features, request.mutable_rows());
        !status.ok()) {
      return status;
    }
    absl::StatusOr<v1::PredictResponse> response = client_->Predict(request);
    if (!response.ok()) return response.status();
    if (response->predictions_size() != inputs->num_rows()) {
      return absl::InternalError(
          absl::StrCat("the server returned ", response->predictions_size(),
                       " predictions for ", inputs->num_rows(), " rows"));
    }
    // With --target: the scores of the same samples (the response's seed
    // and count) against the target column, by the Evaluate RPC.
    std::optional<v1::EvaluateResponse> scores;
    if (!command.target.empty() && !command.linearized) {
      v1::EvaluateRequest evaluate;
      evaluate.set_snapshot_id(response->snapshot_id());
      evaluate.set_num_samples(response->num_samples());
      evaluate.set_seed(response->seed());
      BNN_RETURN_IF_ERROR(
          SetPackedRows(inputs->features, inputs->num_features,
                        evaluate.mutable_rows()->mutable_features()));
      v1::Tensor* targets = evaluate.mutable_rows()->mutable_targets();
      targets->add_shape(static_cast<int64_t>(inputs->targets.size()));
      targets->mutable_f64()->Add(inputs->targets.begin(),
                                  inputs->targets.end());
      absl::StatusOr<v1::EvaluateResponse> evaluated =
          client_->Evaluate(evaluate);
      if (!evaluated.ok()) return evaluated.status();
      scores = *std::move(evaluated);
      // Named as the predictions were.
      scores->set_model_name(response->model_name());
      scores->set_model_version(response->model_version());
    }
    if (global_.json) {
      Json out = PredictionsJson(*inputs, request, *response);
      if (scores.has_value()) out["metrics"] = EvaluationJson(*scores);
      PrintJson(out);
    } else {
      std::cout << FormatPredictions(*inputs, request, *response);
      if (scores.has_value()) {
        std::cout << "\nmetrics against column '" << command.target << "':\n"
                  << FormatEvaluation(*scores);
      } else if (!command.target.empty()) {
        std::cout << "\nno metrics: they need Monte Carlo samples, not "
                     "--linearized\n";
      }
    }
    return absl::OkStatus();
  }

  absl::Status operator()(const EvaluateCommand& command) {
    v1::EvaluateRequest request;
    if (command.model.empty()) {
      request.set_snapshot_id(command.snapshot_id);
    } else {
      request.set_model(command.model);
    }
    if (command.csv_path.empty()) {
      request.set_dataset_id(command.dataset_id);
      if (command.dataset_version.has_value()) {
        request.set_dataset_version(*command.dataset_version);
      }
    } else {
      absl::StatusOr<FeatureTable> rows =
          ReadFeatureCsv(command.csv_path, command.target);
      if (!rows.ok()) return rows.status();
      BNN_RETURN_IF_ERROR(
          SetPackedRows(rows->features, rows->num_features,
                        request.mutable_rows()->mutable_features()));
      v1::Tensor* targets = request.mutable_rows()->mutable_targets();
      targets->add_shape(static_cast<int64_t>(rows->targets.size()));
      targets->mutable_f64()->Add(rows->targets.begin(), rows->targets.end());
    }
    if (!command.ood_dataset_id.empty()) {
      request.set_ood_dataset_id(command.ood_dataset_id);
    } else if (!command.ood_csv_path.empty()) {
      absl::StatusOr<FeatureTable> ood =
          ReadFeatureCsv(command.ood_csv_path, /*target_column=*/"");
      if (!ood.ok()) return ood.status();
      BNN_RETURN_IF_ERROR(
          SetPackedRows(ood->features, ood->num_features,
                        request.mutable_ood_rows()->mutable_features()));
    }
    request.set_num_samples(command.num_samples);
    if (command.seed.has_value()) request.set_seed(*command.seed);
    request.set_ece_bins(command.ece_bins);
    absl::StatusOr<v1::EvaluateResponse> response = client_->Evaluate(request);
    if (!response.ok()) return response.status();
    if (global_.json) {
      PrintJson(EvaluationJson(*response));
    } else {
      std::cout << FormatEvaluation(*response);
      if (!response->model_name().empty()) {
        std::cout << "scored by snapshot " << response->snapshot_id()
                  << " (model " << response->model_name() << " version "
                  << response->model_version() << ")\n";
      }
    }
    return absl::OkStatus();
  }

  absl::Status operator()(const AcquireCommand& command) {
    v1::AcquireRequest request;
    if (command.model.empty()) {
      request.set_snapshot_id(command.snapshot_id);
    } else {
      request.set_model(command.model);
    }
    // Kept for the output, which shows the features of chosen CSV rows.
    std::optional<FeatureTable> pool;
    if (command.csv_path.empty()) {
      request.set_dataset_id(command.dataset_id);
      if (command.dataset_version.has_value()) {
        request.set_dataset_version(*command.dataset_version);
      }
    } else {
      absl::StatusOr<FeatureTable> rows =
          ReadFeatureCsv(command.csv_path, /*target_column=*/"");
      if (!rows.ok()) return rows.status();
      pool = *std::move(rows);
      if (absl::Status status =
              AddFeatureRows(pool->features, pool->num_features,
                             request.mutable_rows()->mutable_rows());
          !status.ok()) {
        return status;
      }
    }
    request.set_k(command.k);
    request.set_heuristic(command.heuristic);
    request.set_num_samples(command.num_samples);
    if (command.seed.has_value()) request.set_seed(*command.seed);
    request.set_diversity_power(command.diversity_power);
    absl::StatusOr<v1::AcquireResponse> response = client_->Acquire(request);
    if (!response.ok()) return response.status();
    const FeatureTable* pool_rows = pool.has_value() ? &*pool : nullptr;
    if (global_.json) {
      PrintJson(AcquisitionJson(request, *response, pool_rows));
    } else {
      std::cout << FormatAcquisition(*response, pool_rows);
    }
    return absl::OkStatus();
  }

  absl::Status operator()(const MethodsCommand&) {
    absl::StatusOr<std::vector<v1::MethodInfo>> methods =
        client_->ListMethods();
    if (!methods.ok()) return methods.status();
    PrintList("methods", *methods, MethodJson, FormatMethods);
    return absl::OkStatus();
  }

  absl::Status operator()(const DatasetsCommand&) {
    absl::StatusOr<std::vector<v1::DatasetInfo>> datasets =
        client_->ListDatasets();
    if (!datasets.ok()) return datasets.status();
    PrintList("datasets", *datasets, DatasetJson, FormatDatasetList);
    return absl::OkStatus();
  }

  absl::Status operator()(const DatasetCommand& command) {
    absl::StatusOr<v1::DatasetInfo> info =
        client_->GetDataset(command.dataset_id, command.version);
    if (!info.ok()) return info.status();
    Print(*info, DatasetJson, FormatDataset);
    return absl::OkStatus();
  }

  absl::Status operator()(const SnapshotsCommand& command) {
    absl::StatusOr<std::vector<v1::SnapshotInfo>> snapshots =
        client_->ListSnapshots(command.dataset_id);
    if (!snapshots.ok()) return snapshots.status();
    PrintList("snapshots", *snapshots, SnapshotJson, FormatSnapshotList);
    return absl::OkStatus();
  }

  absl::Status operator()(const SnapshotCommand& command) {
    absl::StatusOr<v1::SnapshotInfo> info =
        client_->GetSnapshot(command.snapshot_id);
    if (!info.ok()) return info.status();
    Print(*info, SnapshotJson, FormatSnapshot);
    return absl::OkStatus();
  }

  absl::Status operator()(const DeleteSnapshotCommand& command) {
    if (absl::Status status =
            client_->DeleteSnapshot(command.snapshot_id, command.force);
        !status.ok()) {
      return status;
    }
    if (global_.json) {
      PrintJson({{"snapshot_id", command.snapshot_id}, {"deleted", true}});
    } else {
      std::cout << "deleted snapshot " << command.snapshot_id << "\n";
    }
    return absl::OkStatus();
  }

  absl::Status operator()(const ExportCommand& command) {
    v1::ExportSnapshotRequest request;
    if (command.model.empty()) {
      request.set_snapshot_id(command.snapshot_id);
    } else {
      request.set_model(command.model);
    }
    v1::SnapshotChunk sent;
    absl::StatusOr<int64_t> bytes =
        client_->ExportSnapshotToFile(request, command.out_path, &sent);
    if (!bytes.ok()) return bytes.status();
    const std::string snapshot_id =
        sent.snapshot_id().empty() ? command.snapshot_id : sent.snapshot_id();
    if (global_.json) {
      Json out = {{"snapshot_id", snapshot_id}};
      if (!sent.model_name().empty()) {
        out["model_name"] = sent.model_name();
        out["model_version"] = sent.model_version();
      }
      out["path"] = command.out_path;
      out["size_bytes"] = *bytes;
      PrintJson(out);
    } else {
      std::cout << "wrote snapshot " << snapshot_id;
      if (!sent.model_name().empty()) {
        std::cout << " (model " << sent.model_name() << " version "
                  << sent.model_version() << ")";
      }
      std::cout << " to " << command.out_path << " (" << *bytes << " bytes)\n";
    }
    return absl::OkStatus();
  }

  absl::Status operator()(const ModelsCommand& command) {
    if (!command.name.empty()) {
      absl::StatusOr<v1::ModelInfo> model = client_->GetModel(command.name);
      if (!model.ok()) return model.status();
      Print(*model, ModelJson, FormatModel);
      return absl::OkStatus();
    }
    absl::StatusOr<std::vector<v1::ModelInfo>> models = client_->ListModels();
    if (!models.ok()) return models.status();
    PrintList("models", *models, ModelJson, FormatModelList);
    return absl::OkStatus();
  }

  absl::Status operator()(const PublishCommand& command) {
    absl::StatusOr<v1::ModelVersion> version = client_->PublishModel(
        command.model, command.snapshot_id, command.aliases);
    if (!version.ok()) return version.status();
    Print(*version, ModelVersionJson, FormatModelVersion);
    return absl::OkStatus();
  }

  absl::Status operator()(const AliasCommand& command) {
    absl::StatusOr<v1::ModelInfo> model =
        command.remove
            ? client_->DeleteAlias(command.model, command.alias)
            : client_->SetAlias(command.model, command.alias, command.version);
    if (!model.ok()) return model.status();
    Print(*model, ModelJson, FormatModel);
    return absl::OkStatus();
  }

  absl::Status operator()(const DeleteModelCommand& command) {
    if (absl::Status status = client_->DeleteModel(command.model);
        !status.ok()) {
      return status;
    }
    if (global_.json) {
      PrintJson({{"name", command.model}, {"deleted", true}});
    } else {
      std::cout << "deleted model " << command.model << "\n";
    }
    return absl::OkStatus();
  }

  absl::Status operator()(const DeleteDatasetCommand& command) {
    absl::StatusOr<std::string> deleted =
        client_->DeleteDataset(command.dataset_id, command.force);
    if (!deleted.ok()) return deleted.status();
    if (global_.json) {
      PrintJson({{"dataset_id", *deleted}, {"deleted", true}});
    } else {
      std::cout << "deleted dataset " << *deleted << "\n";
    }
    return absl::OkStatus();
  }

  absl::Status operator()(const HealthCommand&) {
    absl::StatusOr<std::string> health = client_->CheckHealth();
    if (!health.ok()) return health.status();
    if (global_.json) {
      PrintJson({{"status", *health}});
    } else {
      std::cout << *health << "\n";
    }
    if (*health != "SERVING") {
      return absl::UnavailableError(absl::StrCat("the server is ", *health));
    }
    return absl::OkStatus();
  }

  absl::Status operator()(const TokenCreateCommand& command) {
    // The parser checked the scopes and the name.
    absl::StatusOr<server::NewToken> created = server::CreateToken(
        *server::ScopeSet::Parse(command.scopes), command.name);
    if (!created.ok()) return created.status();
    const std::string line = server::FormatTokenLine(created->entry);
    if (global_.json) {
      PrintJson({{"token", created->token},
                 {"name", created->entry.name},
                 {"scopes", created->entry.scopes.ToString()},
                 {"line", line}});
    } else {
      std::cout << "token  " << created->token << "\nline   " << line << "\n";
    }
    std::cerr << "The token is shown only now. Add the line to the server's "
                 "--token-file and send the server SIGHUP.\n";
    return absl::OkStatus();
  }

  absl::Status operator()(const PlotCommand& command) {
    // First whether the interpreter has the package and matplotlib, quietly,
    // so that their absence gets instructions rather than a traceback.
    absl::StatusOr<int> found = RunProgram(
        {command.python, "-c", "import bnn_serve.plot, bnn_serve.client"}, {},
        /*quiet=*/true);
    if (!found.ok()) {
      return absl::FailedPreconditionError(
          PlotInstallHint(command.python, found.status().message()));
    }
    if (*found != 0) {
      return absl::FailedPreconditionError(PlotInstallHint(
          command.python,
          "it cannot import bnn_serve.plot (the package, its generated "
          "stubs or matplotlib is missing)"));
    }
    std::vector<std::string> argv = {command.python,
                                     "-m",
                                     "bnn_serve.plot",
                                     "--server",
                                     global_.server,
                                     "--timeout",
                                     absl::StrCat(global_.timeout_seconds)};
    if (!global_.tls_ca_file.empty()) {
      argv.insert(argv.end(), {"--tls-ca", global_.tls_ca_file});
    }
    if (!global_.tls_cert_file.empty()) {
      argv.insert(argv.end(), {"--tls-cert", global_.tls_cert_file});
    }
    if (!global_.tls_key_file.empty()) {
      argv.insert(argv.end(), {"--tls-key", global_.tls_key_file});
    }
    if (global_.json) argv.push_back("--json");
    argv.insert(argv.end(), {command.kind, command.target});
    if (!command.csv_path.empty()) {
      argv.insert(argv.end(), {"--csv", command.csv_path});
    }
    if (!command.target_column.empty()) {
      argv.insert(argv.end(), {"--target", command.target_column});
    }
    if (!command.out_path.empty()) {
      argv.insert(argv.end(), {"--out", command.out_path});
    }
    if (command.num_samples > 0) {
      argv.insert(argv.end(), {"--samples", absl::StrCat(command.num_samples)});
    }
    if (command.seed.has_value()) {
      argv.insert(argv.end(), {"--seed", absl::StrCat(*command.seed)});
    }
    if (command.bins > 0) {
      argv.insert(argv.end(), {"--bins", absl::StrCat(command.bins)});
    }
    // The token travels in the environment, not in arguments other users
    // can read.
    std::cout << std::flush;
    absl::StatusOr<int> exit_code =
        RunProgram(argv, {absl::StrCat("BNN_TOKEN=", global_.token)},
                   /*quiet=*/false);
    if (!exit_code.ok()) return exit_code.status();
    if (*exit_code != 0) {
      // The program has printed its error.
      return absl::UnknownError(
          absl::StrCat("python3 -m bnn_serve.plot ", command.kind,
                       " exited with status ", *exit_code));
    }
    return absl::OkStatus();
  }

  absl::Status operator()(const ImportCommand& command) {
    absl::StatusOr<v1::SnapshotInfo> info =
        client_->ImportSnapshotFromFile(command.in_path);
    if (!info.ok()) return info.status();
    Print(*info, SnapshotJson, FormatSnapshot);
    return absl::OkStatus();
  }

 private:
  static void PrintJson(const Json& json) {
    std::cout << JsonText(json) << "\n";
  }

  // One response: as JSON with --json, else as text.
  template <typename T>
  void Print(const T& value, Json (*to_json)(const T&),
             std::string (*format)(const T&)) {
    if (global_.json) {
      PrintJson(to_json(value));
    } else {
      std::cout << format(value);
    }
  }

  // A list: {"<key>": [...]} with --json, else format(values).
  template <typename T>
  void PrintList(absl::string_view key, const std::vector<T>& values,
                 Json (*to_json)(const T&),
                 std::string (*format)(const std::vector<T>&)) {
    if (global_.json) {
      Json list = Json::array();
      for (const T& value : values) list.push_back(to_json(value));
      PrintJson({{std::string(key), std::move(list)}});
    } else {
      std::cout << format(values);
    }
  }

  const GlobalFlags& global_;
  BnnClient* client_;  // not owned
};

int Main(int argc, char** argv) {
  absl::StatusOr<Invocation> invocation =
      ParseBnnctlArgs(std::vector<std::string>(argv + 1, argv + argc));
  if (!invocation.ok()) {
    std::cerr << "bnnctl: " << invocation.status().message()
              << "\nRun 'bnnctl --help' or 'bnnctl COMMAND --help' for "
                 "usage.\n";
    return kExitUsage;
  }
  const GlobalFlags& global = invocation->global;

  BnnClient::Options options;
  options.target = global.server;
  options.rpc_timeout = absl::Seconds(global.timeout_seconds);
  options.token = global.token;
  options.tls_ca_file = global.tls_ca_file;
  options.tls_cert_file = global.tls_cert_file;
  options.tls_key_file = global.tls_key_file;
  absl::StatusOr<std::unique_ptr<BnnClient>> client =
      BnnClient::Create(options);
  if (!client.ok()) {
    std::cerr << "bnnctl: " << client.status().message() << "\n";
    return kExitUsage;
  }

  Runner runner(global, client->get());
  const absl::Status status = std::visit(runner, invocation->command);
  if (status.ok()) return 0;
  std::cerr << "bnnctl: " << absl::StatusCodeToString(status.code()) << ": "
            << status.message();
  if (status.code() == absl::StatusCode::kUnavailable ||
      status.code() == absl::StatusCode::kDeadlineExceeded) {
    std::cerr << " (server " << global.server << ")";
  }
  std::cerr << "\n";
  return kExitFailure;
}

}  // namespace
}  // namespace bnn::client

int main(int argc, char** argv) { return bnn::client::Main(argc, argv); }
