// A main() for the fuzz targets without libFuzzer (any compiler): the CTest
// smoke run of each target.
//
//   NAME_fuzz [--mutations N] [--seed S] [--max-len L] PATH...
//
// Replays every file of the PATHs (files, or directories read in name
// order), then runs N deterministic mutations (seeded by S) of those inputs:
// bit flips, byte and integer overwrites with boundary values, insertions,
// deletions, duplicated ranges and splices of two inputs. No coverage
// feedback, so it finds only shallow bugs; bench/fuzz/run.sh runs the same
// targets under libFuzzer for the deep ones. A crash (an abort of a failed
// invariant, or a fatal signal) first writes the input to
// ./fuzz-crash-input and prints its path; rerun the binary with that file to
// reproduce it.
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

#include "tests/fuzz/fuzz_util.h"

namespace {

// The input being run, for the crash handler.
const std::string* g_current = nullptr;
constexpr char kCrashFile[] = "fuzz-crash-input";

void OnFatalSignal(int sig) {
  if (g_current != nullptr) {
    const int fd = open(kCrashFile, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      const char* p = g_current->data();
      size_t left = g_current->size();
      while (left > 0) {
        const ssize_t n = write(fd, p, left);
        if (n <= 0) break;
        p += n;
        left -= static_cast<size_t>(n);
      }
      close(fd);
    }
    constexpr char kMessage[] =
        "\n==fuzz== crash; the input is in ./fuzz-crash-input\n";
    (void)!write(STDERR_FILENO, kMessage, sizeof(kMessage) - 1);
  }
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

// The target's verdict: 0, or -1 for an input it rejects as unusable (as
// libFuzzer, which then keeps it out of the corpus).
int Run(const std::string& input) {
  g_current = &input;
  const int result = LLVMFuzzerTestOneInput(
      reinterpret_cast<const uint8_t*>(input.data()), input.size());
  g_current = nullptr;
  return result;
}

// Boundary values that parsers get wrong: zero, one, sign bits, all ones,
// and the bytes that structure text formats.
constexpr uint8_t kInterestingBytes[] = {0,   1,   2,   0x7f, 0x80, 0xff, 0xfe,
                                         '0', '1', '9', '-',  '+',  '.',  'e',
                                         ',', ';', '"', '\n', '\r', ' ',  'n'};
constexpr uint64_t kInterestingInts[] = {0,
                                         1,
                                         0x7f,
                                         0x80,
                                         0xff,
                                         0x7fff,
                                         0x8000,
                                         0xffff,
                                         0x7fffffff,
                                         0x80000000,
                                         0xffffffff,
                                         0x7fffffffffffffff,
                                         0x8000000000000000,
                                         0xffffffffffffffff};

class Mutator {
 public:
  Mutator(uint64_t seed, size_t max_len) : rng_(seed), max_len_(max_len) {}

  size_t Below(size_t n) { return n == 0 ? 0 : rng_() % n; }

  // Applies one random edit to `data`; `other` is another input to splice.
  void Mutate(std::string* data, const std::string& other) {
    std::string& d = *data;
    switch (Below(9)) {
      case 0:  // flip a bit
        if (!d.empty()) d[Below(d.size())] ^= static_cast<char>(1 << Below(8));
        break;
      case 1:  // a random byte
        if (!d.empty()) d[Below(d.size())] = static_cast<char>(rng_());
        break;
      case 2:  // a boundary byte
        if (!d.empty())
          d[Below(d.size())] = static_cast<char>(InterestingByte());
        break;
      case 3: {  // insert 1..8 bytes
        const size_t n = 1 + Below(8);
        std::string bytes;
        for (size_t i = 0; i < n; ++i) {
          bytes.push_back(
              static_cast<char>(Below(2) ? InterestingByte() : rng_()));
        }
        d.insert(Below(d.size() + 1), bytes);
        break;
      }
      case 4: {  // erase a range
        if (d.empty()) break;
        const size_t at = Below(d.size());
        d.erase(at, 1 + Below(std::min<size_t>(16, d.size() - at)));
        break;
      }
      case 5: {  // duplicate a range
        if (d.empty()) break;
        const size_t at = Below(d.size());
        const size_t n = 1 + Below(std::min<size_t>(64, d.size() - at));
        d.insert(Below(d.size() + 1), d.substr(at, n));
        break;
      }
      case 6: {  // splice: a range of the other input
        if (other.empty()) break;
        const size_t at = Below(other.size());
        const size_t n = 1 + Below(std::min<size_t>(256, other.size() - at));
        if (Below(2) != 0 || d.empty()) {
          d.insert(Below(d.size() + 1), other.substr(at, n));
        } else {
          d.replace(Below(d.size()), n, other.substr(at, n));
        }
        break;
      }
      case 7: {  // overwrite 1, 2, 4 or 8 bytes with a boundary integer
        const size_t width = size_t{1} << Below(4);
        if (d.size() < width) break;
        uint64_t v = kInterestingInts[Below(std::size(kInterestingInts))];
        if (Below(2) != 0) v = ~v + 1;  // and its negation
        std::memcpy(&d[Below(d.size() - width + 1)], &v, width);
        break;
      }
      case 8:  // nudge a byte (lengths, counts, digits)
        if (!d.empty()) {
          char& c = d[Below(d.size())];
          c = static_cast<char>(c + (Below(2) != 0 ? 1 : -1));
        }
        break;
    }
    if (d.size() > max_len_) d.resize(max_len_);
  }

 private:
  uint8_t InterestingByte() {
    return kInterestingBytes[Below(std::size(kInterestingBytes))];
  }

  std::mt19937_64 rng_;
  const size_t max_len_;
};

bool ReadFile(const std::filesystem::path& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream bytes;
  bytes << in.rdbuf();
  *out = bytes.str();
  return true;
}

int Usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s [--mutations N] [--seed S] [--max-len L] PATH...\n",
               argv0);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t mutations = 10000;
  uint64_t seed = 1;
  size_t max_len = 8192;
  std::vector<std::filesystem::path> paths;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--mutations" && has_value) {
      mutations = std::strtoll(argv[++i], nullptr, 10);
    } else if (arg == "--seed" && has_value) {
      seed = std::strtoull(argv[++i], nullptr, 10);
    } else if (arg == "--max-len" && has_value) {
      max_len = std::strtoull(argv[++i], nullptr, 10);
    } else if (arg.rfind("--", 0) == 0) {
      return Usage(argv[0]);
    } else {
      paths.emplace_back(arg);
    }
  }
  if (paths.empty()) return Usage(argv[0]);

  std::vector<std::string> corpus;
  for (const std::filesystem::path& path : paths) {
    std::vector<std::filesystem::path> files;
    if (std::filesystem::is_directory(path)) {
      for (const auto& entry : std::filesystem::directory_iterator(path)) {
        if (entry.is_regular_file()) files.push_back(entry.path());
      }
      std::sort(files.begin(), files.end());
    } else {
      files.push_back(path);
    }
    for (const std::filesystem::path& file : files) {
      std::string bytes;
      if (!ReadFile(file, &bytes)) {
        std::fprintf(stderr, "cannot read %s\n", file.c_str());
        return 1;
      }
      corpus.push_back(std::move(bytes));
    }
  }
  if (corpus.empty()) {
    std::fprintf(stderr, "no inputs in the given paths\n");
    return 1;
  }

  for (int sig : {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL}) {
    std::signal(sig, OnFatalSignal);
  }
  const auto start = std::chrono::steady_clock::now();
  for (const std::string& input : corpus) Run(input);

  // A random walk: each mutant starts from a corpus input or, half of the
  // time, from the previous mutant unless the target rejected that one, so
  // edits accumulate.
  Mutator mutator(seed, max_len);
  std::string input;
  bool rejected = true;
  for (int64_t i = 0; i < mutations; ++i) {
    if (rejected || input.empty() || mutator.Below(2) == 0) {
      input = corpus[mutator.Below(corpus.size())];
    }
    const std::string& other = corpus[mutator.Below(corpus.size())];
    const size_t edits = 1 + mutator.Below(4);
    for (size_t e = 0; e < edits; ++e) mutator.Mutate(&input, other);
    rejected = Run(input) != 0;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  std::printf("%zu corpus inputs and %lld mutations (seed %llu) in %.2f s\n",
              corpus.size(), static_cast<long long>(mutations),
              static_cast<unsigned long long>(seed), seconds);
  return 0;
}
