// Command-line flags of one bnn-experiment mode. Each mode declares the flags
// it accepts (so a typo fails with the list of valid ones instead of being
// silently ignored); a flag may be declared repeatable (--param k=v ...).
#ifndef BNN_BENCH_ACCURACY_FLAGS_H_
#define BNN_BENCH_ACCURACY_FLAGS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace bnn::experiment {

class FlagSet {
 public:
  // Declares --name. `default_value` is what Get() returns when the flag is
  // absent; repeatable flags collect every occurrence in GetAll().
  FlagSet& Flag(std::string name, std::string help,
                std::string default_value = "", bool repeatable = false);
  FlagSet& RepeatableFlag(std::string name, std::string help) {
    return Flag(std::move(name), std::move(help), "", true);
  }

  // Accepts "--name value" and "--name=value". Fails on an undeclared flag
  // (listing the declared ones), a missing value, a positional argument or a
  // non-repeatable flag given twice.
  absl::Status Parse(const std::vector<std::string>& args);

  bool Has(const std::string& name) const;
  // The value given, or the declared default.
  std::string Get(const std::string& name) const;
  std::vector<std::string> GetAll(const std::string& name) const;
  // Get() parsed as an integer in [lo, hi] / a non-empty string; errors name
  // the flag.
  absl::StatusOr<int64_t> GetInt(const std::string& name, int64_t lo,
                                 int64_t hi) const;
  absl::StatusOr<std::string> GetRequired(const std::string& name) const;

  // One line per flag: name, default and help.
  std::string Usage() const;
  // The flags given, except `ignored`, as "--name=value" in name order
  // (repeated flags in their order): what identifies a run's settings
  // whatever order they were typed in.
  std::string Canonical(const std::vector<std::string>& ignored) const;

 private:
  struct Decl {
    std::string name;
    std::string help;
    std::string default_value;
    bool repeatable = false;
  };
  const Decl* Find(const std::string& name) const;

  std::vector<Decl> decls_;
  std::map<std::string, std::vector<std::string>> values_;
};

}  // namespace bnn::experiment

#endif  // BNN_BENCH_ACCURACY_FLAGS_H_
