#include "server/admission/memory_budget.h"

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <utility>

#include <absl/synchronization/notification.h>
#include <absl/time/clock.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/server/server_test_util.h"

namespace bnn::server {
namespace {

using ::bnn::server::testutil::StatusIs;
using ::bnn::server::testutil::TempDir;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr int64_t kMiB = int64_t{1} << 20;

TEST(MemoryBudgetTest, ReservesUntilReleased) {
  MemoryBudget budget(100 * kMiB);
  absl::StatusOr<MemoryBudget::Reservation> a =
      budget.TryReserve("Predict on snap-a", 60 * kMiB);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->bytes(), 60 * kMiB);
  EXPECT_EQ(budget.reserved_bytes(), 60 * kMiB);
  {
    absl::StatusOr<MemoryBudget::Reservation> b =
        budget.TryReserve("Predict on snap-b", 40 * kMiB);
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ(budget.reserved_bytes(), 100 * kMiB);
    EXPECT_EQ(budget.num_reservations(), 2);
  }
  // b went out of scope.
  EXPECT_EQ(budget.reserved_bytes(), 60 * kMiB);
  a->Release();
  a->Release();  // idempotent
  EXPECT_EQ(budget.reserved_bytes(), 0);
  EXPECT_EQ(budget.num_reservations(), 0);
}

TEST(MemoryBudgetTest, RefusalNamesEstimateLimitAndHolders) {
  MemoryBudget budget(100 * kMiB);
  absl::StatusOr<MemoryBudget::Reservation> job =
      budget.TryReserve("training job job-1", 70 * kMiB);
  ASSERT_TRUE(job.ok());
  EXPECT_THAT(
      budget.TryReserve("Predict on snap-x", 40 * kMiB, "forward pass 30.0 MiB")
          .status(),
      StatusIs(absl::StatusCode::kResourceExhausted,
               "Predict on snap-x needs an estimated 40.0 MiB "
               "(forward pass 30.0 MiB) but only 30.0 MiB of the "
               "memory budget of 100.0 MiB (--memory-budget-bytes = "
               "104857600) is free; 70.0 MiB is reserved by 1 "
               "computation (training job job-1 70.0 MiB)"));
  // Nothing was reserved by the refused request.
  EXPECT_EQ(budget.reserved_bytes(), 70 * kMiB);
}

TEST(MemoryBudgetTest, RefusesWhatCanNeverFit) {
  MemoryBudget budget(100 * kMiB);
  const auto expected =
      StatusIs(absl::StatusCode::kResourceExhausted,
               "training job needs an estimated 2.0 GiB (U 2.0 GiB), more "
               "than the whole memory budget of 100.0 MiB "
               "(--memory-budget-bytes = 104857600)");
  EXPECT_THAT(budget.CheckFits("training job", 2048 * kMiB, "U 2.0 GiB"),
              expected);
  EXPECT_THAT(
      budget.TryReserve("training job", 2048 * kMiB, "U 2.0 GiB").status(),
      expected);
  EXPECT_THAT(budget
                  .Reserve("training job", 2048 * kMiB, "U 2.0 GiB",
                           [] { return absl::OkStatus(); })
                  .status(),
              expected);
  EXPECT_TRUE(budget.CheckFits("training job", 100 * kMiB).ok());
}

TEST(MemoryBudgetTest, NamesAtMostThreeHolders) {
  MemoryBudget budget(20 * kMiB);
  std::vector<MemoryBudget::Reservation> held;
  for (int i = 1; i <= 5; ++i) {
    held.push_back(*budget.TryReserve("r" + std::to_string(i), i * kMiB));
  }
  EXPECT_THAT(budget.TryReserve("next", 6 * kMiB).status(),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       "reserved by 5 computations (r5 5.0 MiB, r4 4.0 MiB, "
                       "r3 3.0 MiB and 2 more)"));
}

TEST(MemoryBudgetTest, MovedReservationReleasesOnce) {
  MemoryBudget budget(10 * kMiB);
  MemoryBudget::Reservation outer;
  {
    MemoryBudget::Reservation inner = *budget.TryReserve("a", 4 * kMiB);
    outer = std::move(inner);
  }
  EXPECT_EQ(budget.reserved_bytes(), 4 * kMiB);
  MemoryBudget::Reservation other = *budget.TryReserve("b", 2 * kMiB);
  outer = std::move(other);  // releases a's bytes, takes b's
  EXPECT_EQ(budget.reserved_bytes(), 2 * kMiB);
  EXPECT_EQ(outer.bytes(), 2 * kMiB);
}

TEST(MemoryBudgetTest, ReserveWaitsForReleasedBytes) {
  MemoryBudget budget(10 * kMiB);
  absl::StatusOr<MemoryBudget::Reservation> first =
      budget.TryReserve("first", 8 * kMiB);
  ASSERT_TRUE(first.ok());
  absl::Notification waiting;
  std::thread releaser([&] {
    waiting.WaitForNotification();
    absl::SleepFor(absl::Milliseconds(200));
    first->Release();
  });
  const absl::Time start = absl::Now();
  waiting.Notify();
  absl::StatusOr<MemoryBudget::Reservation> second = budget.Reserve(
      "second", 5 * kMiB, "", [] { return absl::OkStatus(); },
      absl::Seconds(10));
  releaser.join();
  ASSERT_TRUE(second.ok()) << second.status();
  // Woken by the release, not by the 10 s poll.
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(150));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_EQ(budget.reserved_bytes(), 5 * kMiB);
}

TEST(MemoryBudgetTest, ReserveStopsWhenAsked) {
  MemoryBudget budget(10 * kMiB);
  MemoryBudget::Reservation held = *budget.TryReserve("held", 8 * kMiB);
  int checks = 0;
  EXPECT_THAT(budget
                  .Reserve(
                      "waiting", 5 * kMiB, "",
                      [&checks] {
                        return ++checks < 3 ? absl::OkStatus()
                                            : absl::CancelledError("stopped");
                      },
                      absl::Milliseconds(10))
                  .status(),
              StatusIs(absl::StatusCode::kCancelled, "stopped"));
  EXPECT_EQ(checks, 3);
  EXPECT_EQ(budget.reserved_bytes(), 8 * kMiB);
}

void WriteFile(const std::string& path, const std::string& contents) {
  std::filesystem::create_directories(
      std::filesystem::path(path).parent_path());
  std::ofstream(path) << contents;
}

TEST(ReadMachineMemoryTest, PhysicalMemoryWithoutCgroupLimit) {
  TempDir root;
  WriteFile(root.path() + "/proc/meminfo",
            "MemTotal:       24683620 kB\nMemFree:  100 kB\n");
  WriteFile(root.path() + "/proc/self/cgroup", "0::/\n");
  WriteFile(root.path() + "/sys/fs/cgroup/memory.max", "max\n");
  absl::StatusOr<MachineMemory> machine = ReadMachineMemory(root.path());
  ASSERT_TRUE(machine.ok()) << machine.status();
  EXPECT_EQ(machine->physical_bytes, int64_t{24683620} * 1024);
  EXPECT_EQ(machine->cgroup_limit_bytes, 0);
  EXPECT_EQ(machine->usable_bytes(), int64_t{24683620} * 1024);
  EXPECT_EQ(DefaultMemoryBudgetBytes(*machine), int64_t{24683620} * 512);
}

TEST(ReadMachineMemoryTest, TightestCgroupV2LimitOfTheProcessAndAncestors) {
  TempDir root;
  WriteFile(root.path() + "/proc/meminfo", "MemTotal: 16777216 kB\n");
  WriteFile(root.path() + "/proc/self/cgroup", "0::/a/b\n");
  WriteFile(root.path() + "/sys/fs/cgroup/a/b/memory.max", "max\n");
  WriteFile(root.path() + "/sys/fs/cgroup/a/memory.max", "2147483648\n");
  absl::StatusOr<MachineMemory> machine = ReadMachineMemory(root.path());
  ASSERT_TRUE(machine.ok()) << machine.status();
  EXPECT_EQ(machine->cgroup_limit_bytes, int64_t{2} << 30);
  EXPECT_EQ(machine->usable_bytes(), int64_t{2} << 30);
  EXPECT_EQ(DefaultMemoryBudgetBytes(*machine), int64_t{1} << 30);
}

TEST(ReadMachineMemoryTest, CgroupV1LimitAndItsNoLimitValue) {
  TempDir root;
  WriteFile(root.path() + "/proc/meminfo", "MemTotal: 16777216 kB\n");
  WriteFile(root.path() + "/proc/self/cgroup",
            "5:cpu:/x\n4:memory:/job\n0::/\n");
  WriteFile(root.path() + "/sys/fs/cgroup/memory/job/memory.limit_in_bytes",
            "1073741824\n");
  // What v1 writes for "no limit".
  WriteFile(root.path() + "/sys/fs/cgroup/memory/memory.limit_in_bytes",
            "9223372036854771712\n");
  absl::StatusOr<MachineMemory> machine = ReadMachineMemory(root.path());
  ASSERT_TRUE(machine.ok()) << machine.status();
  EXPECT_EQ(machine->cgroup_limit_bytes, int64_t{1} << 30);
}

TEST(ReadMachineMemoryTest, ContainerSeesItsCgroupAtTheMountRoot) {
  // /proc/self/cgroup names a host path that is not mounted here.
  TempDir root;
  WriteFile(root.path() + "/proc/meminfo", "MemTotal: 16777216 kB\n");
  WriteFile(root.path() + "/proc/self/cgroup", "0::/kubepods/pod1/c1\n");
  WriteFile(root.path() + "/sys/fs/cgroup/memory.max", "536870912\n");
  absl::StatusOr<MachineMemory> machine = ReadMachineMemory(root.path());
  ASSERT_TRUE(machine.ok()) << machine.status();
  EXPECT_EQ(machine->cgroup_limit_bytes, int64_t{512} << 20);
}

TEST(ReadMachineMemoryTest, WithoutMeminfoIsUnavailable) {
  TempDir root;
  EXPECT_THAT(ReadMachineMemory(root.path()).status(),
              StatusIs(absl::StatusCode::kUnavailable, "MemTotal"));
}

TEST(ReadMachineMemoryTest, ThisMachine) {
  absl::StatusOr<MachineMemory> machine = ReadMachineMemory();
  ASSERT_TRUE(machine.ok()) << machine.status();
  EXPECT_GT(machine->physical_bytes, 64 * kMiB);
  EXPECT_GT(DefaultMemoryBudgetBytes(*machine), 0);
  EXPECT_LE(DefaultMemoryBudgetBytes(*machine), machine->usable_bytes());
}

}  // namespace
}  // namespace bnn::server
