// One server per data directory and per port (issue 10, finding 6): a second
// bnn-server on the same --data-dir refuses to start naming the first one's
// pid, a second one on the same port fails to bind instead of sharing it,
// and the lock goes away with its holder, however it exits.
#include <memory>
#include <string>

#include <absl/strings/str_cat.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/test_util/subprocess.h"
#include "tests/test_util/test_util.h"

namespace bnn::integration {
namespace {

using ::bnn::testing::CommandResult;
using ::bnn::testing::ReadFileOrEmpty;
using ::bnn::testing::RunCommand;
using ::bnn::testing::ScopedTempDir;
using ::bnn::testing::ServerProcess;

using ::testing::HasSubstr;

class SingleWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::make_unique<ScopedTempDir>("bnn_integration");
    ASSERT_FALSE(dir_->path().empty());
  }

  std::unique_ptr<ServerProcess> StartServer(const std::string& data_dir,
                                             const std::string& log) {
    absl::StatusOr<std::unique_ptr<ServerProcess>> server =
        ServerProcess::Start(BNN_SERVER_PATH, data_dir, Path(log));
    EXPECT_TRUE(server.ok()) << server.status();
    return server.ok() ? *std::move(server) : nullptr;
  }

  // Runs a server that must fail to start; returns its output.
  CommandResult RunFailingServer(const std::string& data_dir,
                                 const std::string& listen) {
    absl::StatusOr<CommandResult> run =
        RunCommand({BNN_SERVER_PATH, "--listen", listen, "--data-dir", data_dir,
                    "--metrics-listen", ""},
                   dir_->path(), absl::Seconds(30));
    EXPECT_TRUE(run.ok()) << run.status();
    return run.value_or(CommandResult{});
  }

  std::string Path(const std::string& name) const {
    return absl::StrCat(dir_->path(), "/", name);
  }

  std::unique_ptr<ScopedTempDir> dir_;
};

TEST_F(SingleWriterTest, SecondServerOnTheDataDirRefusesNamingTheHolder) {
  const std::string data = Path("data");
  std::unique_ptr<ServerProcess> first = StartServer(data, "first.log");
  ASSERT_NE(first, nullptr);

  const CommandResult second = RunFailingServer(data, "127.0.0.1:0");
  EXPECT_EQ(second.exit_code, 1) << second.out << second.err;
  EXPECT_THAT(second.err, HasSubstr("in use by another bnn-server"));
  EXPECT_THAT(second.err, HasSubstr(absl::StrCat("(pid ", first->pid(), ")")));
  EXPECT_THAT(second.out, ::testing::Not(HasSubstr("listening on")));
  EXPECT_TRUE(first->IsRunning());
  EXPECT_EQ(ReadFileOrEmpty(data + "/LOCK"), absl::StrCat(first->pid(), "\n"));
}

TEST_F(SingleWriterTest, LockIsReleasedWhenTheHolderIsKilled) {
  const std::string data = Path("data");
  std::unique_ptr<ServerProcess> first = StartServer(data, "first.log");
  ASSERT_NE(first, nullptr);
  first->Kill();  // no chance to clean up: the kernel drops the flock
  std::unique_ptr<ServerProcess> second = StartServer(data, "second.log");
  ASSERT_NE(second, nullptr);
  EXPECT_TRUE(second->IsRunning());
}

TEST_F(SingleWriterTest, SecondServerOnThePortFailsToStart) {
  std::unique_ptr<ServerProcess> first = StartServer(Path("a"), "first.log");
  ASSERT_NE(first, nullptr);
  const CommandResult second = RunFailingServer(Path("b"), first->address());
  EXPECT_EQ(second.exit_code, 1) << second.out << second.err;
  EXPECT_THAT(second.err,
              HasSubstr(absl::StrCat("cannot listen on ", first->address())));
  EXPECT_TRUE(first->IsRunning());
}

}  // namespace
}  // namespace bnn::integration
