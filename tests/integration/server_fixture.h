// A gtest fixture owning one real bnn-server per test suite (on a free
// loopback port, with a temporary data directory), with helpers that run the
// real bnnctl against it and build the usual first steps: a cubic dataset
// and a trained SLANG snapshot.
#ifndef BNN_TESTS_INTEGRATION_SERVER_FIXTURE_H_
#define BNN_TESTS_INTEGRATION_SERVER_FIXTURE_H_

#include <memory>
#include <string>
#include <vector>

#include <absl/status/statusor.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "client/bnn_client.h"
#include "tests/test_util/subprocess.h"
#include "tests/test_util/test_util.h"

namespace bnn::integration {

// Starts `request` through `client` and waits up to `timeout` for the job;
// the snapshot id of a SUCCEEDED job, an error naming the final state
// otherwise.
absl::StatusOr<std::string> TrainThroughClient(
    client::BnnClient& client, const v1::StartTrainingRequest& request,
    absl::Duration timeout);

// `bnnctl train` flags for a small SLANG run (method, epochs, seed, params;
// no --hidden) that finishes in well under a second even in a debug build.
std::vector<std::string> QuickSlangArgs();

class ServerTest : public ::testing::Test {
 protected:
  // Starts the server; a failure is reported by every test's SetUp.
  static void SetUpTestSuite();
  static void TearDownTestSuite();
  void SetUp() override;
  // Prints the server log if the test failed.
  void TearDown() override;

  // Runs bnnctl against the server with `args`.
  static absl::StatusOr<::bnn::testing::CommandResult> Bnnctl(
      std::vector<std::string> args);
  // Runs `bnnctl --json args...`, which must exit 0, and parses its stdout.
  static absl::StatusOr<nlohmann::json> BnnctlJson(
      std::vector<std::string> args);

  // Uploads `num_points` rows of the cubic set (tests/integration/
  // cubic_data.h) through bnnctl; returns the dataset id.
  static absl::StatusOr<std::string> UploadCubic(int num_points, uint64_t seed);
  // `bnnctl train --dataset ID args...`, then waits for the job; returns
  // the snapshot id.
  static absl::StatusOr<std::string> TrainSnapshot(
      const std::string& dataset_id, const std::vector<std::string>& args);

  // A path in the suite's temporary directory.
  static std::string Path(const std::string& name);
  static const std::string& address() { return server_->address(); }

 private:
  static std::string* setup_error_;
  static std::unique_ptr<::bnn::testing::ScopedTempDir> dir_;
  static std::unique_ptr<::bnn::testing::ServerProcess> server_;
};

}  // namespace bnn::integration

#endif  // BNN_TESTS_INTEGRATION_SERVER_FIXTURE_H_
