#include "server/admission/memory_budget.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include <absl/strings/ascii.h>
#include <absl/strings/match.h>
#include <absl/strings/numbers.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_split.h>
#include <absl/strings/strip.h>

#include "bnn/check.h"
#include "bnn/memory.h"
#include "bnn/status.h"

namespace bnn::server {
namespace {

// The first line of a file, trimmed; empty if it cannot be read.
std::string ReadLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return std::string(absl::StripAsciiWhitespace(line));
}

// A cgroup limit file's value; 0 for "max", an absent file or a value so
// large that it means "no limit" (cgroup v1 writes the largest page-aligned
// int64).
int64_t ReadLimit(const std::string& path) {
  const std::string text = ReadLine(path);
  int64_t value = 0;
  if (text.empty() || text == "max" || !absl::SimpleAtoi(text, &value) ||
      value <= 0 || value >= (int64_t{1} << 62)) {
    return 0;
  }
  return value;
}

// The smallest positive limit in `file` of `dir` and each of its ancestors
// up to `mount` (a cgroup's limit binds its descendants); 0 for none.
int64_t TightestLimit(const std::string& mount, std::string dir,
                      const std::string& file) {
  int64_t tightest = 0;
  while (true) {
    const int64_t limit = ReadLimit(mount + dir + "/" + file);
    if (limit > 0 && (tightest == 0 || limit < tightest)) tightest = limit;
    if (dir.empty() || dir == "/") break;
    const size_t slash = dir.rfind('/');
    dir = slash == std::string::npos ? "" : dir.substr(0, slash);
  }
  return tightest;
}

}  // namespace

int64_t MachineMemory::usable_bytes() const {
  if (cgroup_limit_bytes > 0 && cgroup_limit_bytes < physical_bytes) {
    return cgroup_limit_bytes;
  }
  return physical_bytes;
}

absl::StatusOr<MachineMemory> ReadMachineMemory(const std::string& root) {
  const std::string base = root == "/" ? "" : root;
  MachineMemory machine;
  {
    std::ifstream meminfo(base + "/proc/meminfo");
    std::string line;
    while (std::getline(meminfo, line)) {
      // "MemTotal:       24683620 kB"
      absl::string_view rest = line;
      if (!absl::ConsumePrefix(&rest, "MemTotal:")) continue;
      const std::vector<absl::string_view> words =
          absl::StrSplit(rest, ' ', absl::SkipEmpty());
      int64_t kib = 0;
      if (!words.empty() && absl::SimpleAtoi(words[0], &kib)) {
        machine.physical_bytes = kib * 1024;
      }
      break;
    }
  }
  if (machine.physical_bytes <= 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot read MemTotal from ", base, "/proc/meminfo"));
  }
  // /proc/self/cgroup: "0::/path" (v2) and "N:memory:/path" (v1). The path
  // may not exist in this mount namespace (a container sees its own cgroup
  // as the root), so the mount's root is checked too.
  const std::string cgroup_root = base + "/sys/fs/cgroup";
  std::ifstream cgroups(base + "/proc/self/cgroup");
  std::string line;
  int64_t tightest = 0;
  auto consider = [&tightest](int64_t limit) {
    if (limit > 0 && (tightest == 0 || limit < tightest)) tightest = limit;
  };
  while (std::getline(cgroups, line)) {
    const std::vector<std::string> fields = absl::StrSplit(line, ':');
    if (fields.size() != 3) continue;
    const std::string& path = fields[2] == "/" ? std::string() : fields[2];
    if (fields[0] == "0" && fields[1].empty()) {
      consider(TightestLimit(cgroup_root, path, "memory.max"));
    } else if (absl::StrContains(fields[1], "memory")) {
      consider(TightestLimit(cgroup_root + "/memory", path,
                             "memory.limit_in_bytes"));
    }
  }
  consider(ReadLimit(cgroup_root + "/memory.max"));
  consider(ReadLimit(cgroup_root + "/memory/memory.limit_in_bytes"));
  machine.cgroup_limit_bytes = tightest;
  return machine;
}

int64_t DefaultMemoryBudgetBytes(const MachineMemory& machine) {
  return std::max<int64_t>(
      1, static_cast<int64_t>(static_cast<double>(machine.usable_bytes()) *
                              kDefaultMemoryBudgetFraction));
}

MemoryBudget::Reservation::Reservation(Reservation&& other) noexcept
    : budget_(std::exchange(other.budget_, nullptr)),
      id_(std::exchange(other.id_, 0)),
      bytes_(std::exchange(other.bytes_, 0)) {}

MemoryBudget::Reservation& MemoryBudget::Reservation::operator=(
    Reservation&& other) noexcept {
  if (this != &other) {
    Release();
    budget_ = std::exchange(other.budget_, nullptr);
    id_ = std::exchange(other.id_, 0);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void MemoryBudget::Reservation::Release() {
  if (budget_ == nullptr) return;
  budget_->Release(id_);
  budget_ = nullptr;
  bytes_ = 0;
}

MemoryBudget::MemoryBudget(int64_t limit_bytes, std::string flag)
    : limit_bytes_(limit_bytes), flag_(std::move(flag)) {
  BNN_CHECK(limit_bytes_ >= 1);
}

MemoryBudget::~MemoryBudget() {
  absl::MutexLock lock(&mu_);
  BNN_CHECK(holders_.empty());
}

int64_t MemoryBudget::reserved_bytes() const {
  absl::MutexLock lock(&mu_);
  return reserved_;
}

int64_t MemoryBudget::num_reservations() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(holders_.size());
}

absl::Status MemoryBudget::CheckFits(absl::string_view what, int64_t bytes,
                                     absl::string_view detail) const {
  if (bytes <= limit_bytes_) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      what, " needs an estimated ", FormatBytes(bytes),
      detail.empty() ? "" : absl::StrCat(" (", detail, ")"),
      ", more than the whole memory budget of ", FormatBytes(limit_bytes_),
      " (", flag_, " = ", limit_bytes_, ")"));
}

absl::Status MemoryBudget::Refusal(absl::string_view what, int64_t bytes,
                                   absl::string_view detail) const {
  // The largest holders first: they are what an operator would look at.
  std::vector<const Holder*> holders;
  for (const auto& [id, holder] : holders_) holders.push_back(&holder);
  std::sort(
      holders.begin(), holders.end(),
      [](const Holder* a, const Holder* b) { return a->bytes > b->bytes; });
  std::string held;
  constexpr size_t kNamed = 3;
  for (size_t i = 0; i < std::min(holders.size(), kNamed); ++i) {
    absl::StrAppend(&held, i == 0 ? "" : ", ", holders[i]->what, " ",
                    FormatBytes(holders[i]->bytes));
  }
  if (holders.size() > kNamed) {
    absl::StrAppend(&held, " and ", holders.size() - kNamed, " more");
  }
  return absl::ResourceExhaustedError(absl::StrCat(
      what, " needs an estimated ", FormatBytes(bytes),
      detail.empty() ? "" : absl::StrCat(" (", detail, ")"), " but only ",
      FormatBytes(limit_bytes_ - reserved_),
      " of the memory "
      "budget of ",
      FormatBytes(limit_bytes_), " (", flag_, " = ", limit_bytes_,
      ") is free; ", FormatBytes(reserved_), " is reserved by ", holders.size(),
      holders.size() == 1 ? " computation (" : " computations (", held,
      "); retry later"));
}

MemoryBudget::Reservation MemoryBudget::Add(absl::string_view what,
                                            int64_t bytes) {
  const uint64_t id = next_id_++;
  holders_[id] = Holder{std::string(what), bytes};
  reserved_ += bytes;
  return Reservation(this, id, bytes);
}

absl::StatusOr<MemoryBudget::Reservation> MemoryBudget::TryReserve(
    absl::string_view what, int64_t bytes, absl::string_view detail) {
  BNN_RETURN_IF_ERROR(CheckFits(what, bytes, detail));
  bytes = std::max<int64_t>(bytes, 0);
  absl::MutexLock lock(&mu_);
  if (bytes > limit_bytes_ - reserved_) return Refusal(what, bytes, detail);
  return Add(what, bytes);
}

absl::StatusOr<MemoryBudget::Reservation> MemoryBudget::Reserve(
    absl::string_view what, int64_t bytes, absl::string_view detail,
    absl::FunctionRef<absl::Status()> stop, absl::Duration poll) {
  BNN_RETURN_IF_ERROR(CheckFits(what, bytes, detail));
  bytes = std::max<int64_t>(bytes, 0);
  absl::MutexLock lock(&mu_);
  while (bytes > limit_bytes_ - reserved_) {
    // Released bytes wake the wait; `stop` is checked at least every poll.
    struct Args {
      const MemoryBudget* budget;
      int64_t bytes;
    } args{this, bytes};
    mu_.AwaitWithTimeout(absl::Condition(
                             +[](Args* a) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                               return a->bytes <= a->budget->limit_bytes_ -
                                                      a->budget->reserved_;
                             },
                             &args),
                         poll);
    if (bytes <= limit_bytes_ - reserved_) break;
    mu_.Unlock();
    const absl::Status stopped = stop();
    mu_.Lock();
    BNN_RETURN_IF_ERROR(stopped);
  }
  return Add(what, bytes);
}

void MemoryBudget::Release(uint64_t id) {
  absl::MutexLock lock(&mu_);
  const auto it = holders_.find(id);
  BNN_CHECK(it != holders_.end());
  reserved_ -= it->second.bytes;
  holders_.erase(it);
}

}  // namespace bnn::server
