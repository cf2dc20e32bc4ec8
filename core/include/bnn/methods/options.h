// String parameters for typed Options structs. A method declares each field
// once (name, member, help); the declaration then parses `--param k=v` and
// wire parameters, rejects unknown keys listing the known ones, and prints
// options back for snapshots. Names are the same everywhere.
#ifndef BNN_METHODS_OPTIONS_H_
#define BNN_METHODS_OPTIONS_H_

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"

#include "bnn/format.h"

namespace bnn {

// key -> value, as given by a user.
using ParamMap = std::map<std::string, std::string>;

// Parses "k=v" into `params`; fails on a missing '=' or an empty key.
absl::Status ParseParamAssignment(absl::string_view assignment,
                                  ParamMap* params);

// Bound checks for Options::Validate(); messages name the field, the value and
// the bound, e.g. "rank = 0 must be in [1, 1024]".
absl::Status CheckIntRange(absl::string_view field, int64_t value, int64_t lo,
                           int64_t hi);
// value in (lo, hi] (or [lo, hi] when lo_inclusive), and finite.
absl::Status CheckRange(absl::string_view field, double value, double lo,
                        double hi, bool lo_inclusive = false);
// value > 0 and finite.
absl::Status CheckPositive(absl::string_view field, double value);
absl::Status CheckOneOf(absl::string_view field, absl::string_view value,
                        const std::vector<std::string>& allowed);

struct ParamInfo {
  std::string name;
  std::string type;           // "int", "double", "bool", "string"
  std::string default_value;  // printed default
  std::string help;
};

template <typename Options>
class OptionsSchema {
 public:
  template <typename V>
  OptionsSchema& Field(std::string name, V Options::*member, std::string help) {
    fields_.push_back({std::move(name), member, std::move(help)});
    return *this;
  }

  // Sets the fields named in `params`. Keys in `ignored` are skipped (they
  // belong to another consumer, e.g. the trainer). Any other unknown key is
  // InvalidArgument naming the key and listing the known ones.
  absl::Status Apply(const ParamMap& params, Options* options,
                     const std::vector<std::string>& ignored = {}) const {
    // Not a structured binding: C++17 lambdas cannot capture one (clang
    // refuses; the fuzz build uses clang).
    for (const auto& entry : params) {
      const std::string& key = entry.first;
      const std::string& value = entry.second;
      const FieldDecl* field = Find(key);
      if (field == nullptr) {
        bool skip = false;
        for (const auto& name : ignored) skip |= (name == key);
        if (skip) continue;
        std::vector<std::string> known;
        for (const auto& f : fields_) known.push_back(f.name);
        for (const auto& name : ignored) known.push_back(name);
        return absl::InvalidArgumentError(
            absl::StrCat("unknown parameter '", key,
                         "'; known parameters: ", absl::StrJoin(known, ", ")));
      }
      absl::Status status = std::visit(
          [&](auto member) {
            return ParseInto(key, value, &(options->*member));
          },
          field->member);
      if (!status.ok()) return status;
    }
    return absl::OkStatus();
  }

  // Every field, printed (the canonical snapshot form).
  ParamMap ToParams(const Options& options) const {
    ParamMap out;
    for (const auto& f : fields_) {
      out[f.name] = std::visit(
          [&](auto member) { return Print(options.*member); }, f.member);
    }
    return out;
  }

  std::vector<ParamInfo> Describe() const {
    const Options defaults{};
    std::vector<ParamInfo> out;
    for (const auto& f : fields_) {
      std::visit(
          [&](auto member) {
            out.push_back({f.name, TypeName(defaults.*member),
                           Print(defaults.*member), f.help});
          },
          f.member);
    }
    return out;
  }

 private:
  using Member =
      std::variant<int Options::*, int64_t Options::*, double Options::*,
                   bool Options::*, std::string Options::*>;
  struct FieldDecl {
    std::string name;
    Member member;
    std::string help;
  };

  const FieldDecl* Find(absl::string_view name) const {
    for (const auto& f : fields_) {
      if (f.name == name) return &f;
    }
    return nullptr;
  }

  static absl::Status Bad(absl::string_view key, absl::string_view value,
                          absl::string_view type) {
    return absl::InvalidArgumentError(absl::StrCat(
        "parameter '", key, "': '", value, "' is not a valid ", type));
  }
  static absl::Status ParseInto(absl::string_view key, absl::string_view v,
                                int* out) {
    return absl::SimpleAtoi(v, out) ? absl::OkStatus() : Bad(key, v, "int");
  }
  static absl::Status ParseInto(absl::string_view key, absl::string_view v,
                                int64_t* out) {
    return absl::SimpleAtoi(v, out) ? absl::OkStatus() : Bad(key, v, "int");
  }
  static absl::Status ParseInto(absl::string_view key, absl::string_view v,
                                double* out) {
    return absl::SimpleAtod(v, out) ? absl::OkStatus() : Bad(key, v, "number");
  }
  static absl::Status ParseInto(absl::string_view key, absl::string_view v,
                                bool* out) {
    return absl::SimpleAtob(v, out) ? absl::OkStatus() : Bad(key, v, "bool");
  }
  static absl::Status ParseInto(absl::string_view, absl::string_view v,
                                std::string* out) {
    *out = std::string(v);
    return absl::OkStatus();
  }
  static std::string Print(int v) { return absl::StrCat(v); }
  static std::string Print(int64_t v) { return absl::StrCat(v); }
  static std::string Print(double v) { return ShortestDouble(v); }
  static std::string Print(bool v) { return v ? "true" : "false"; }
  static std::string Print(const std::string& v) { return v; }
  static std::string TypeName(int) { return "int"; }
  static std::string TypeName(int64_t) { return "int"; }
  static std::string TypeName(double) { return "double"; }
  static std::string TypeName(bool) { return "bool"; }
  static std::string TypeName(const std::string&) { return "string"; }

  std::vector<FieldDecl> fields_;
};

}  // namespace bnn

#endif  // BNN_METHODS_OPTIONS_H_
