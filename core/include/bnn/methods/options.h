// String parameters for typed Options structs. A method declares each field
// once (name, member, help; enum fields with their accepted strings; shared
// option structs such as PriorOptions embedded with their own declarations);
// the declaration then parses `--param k=v` and wire parameters, rejects
// unknown keys listing the known ones, and prints options back for
// snapshots. Names are the same everywhere.
#ifndef BNN_METHODS_OPTIONS_H_
#define BNN_METHODS_OPTIONS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
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
  // A field of type int, int64_t, double, bool or std::string.
  template <typename V>
  OptionsSchema& Field(std::string name, V Options::*member, std::string help) {
    fields_.push_back(
        {std::move(name), TypeName(V{}), std::move(help),
         [member](absl::string_view key, absl::string_view v, Options* o) {
           return ParseInto(key, v, &(o->*member));
         },
         [member](const Options& o) { return Print(o.*member); }});
    return *this;
  }

  // A string-valued option held as an enum class: `names` lists every
  // accepted string with its value (the first name of a value is the one
  // printed). The string is resolved here, once, so code reading the
  // options compares no strings; any other string is InvalidArgument
  // "name = 'v' must be one of: ...".
  template <typename E>
  OptionsSchema& Enum(std::string name, E Options::*member,
                      std::vector<std::pair<std::string, E>> names,
                      std::string help) {
    fields_.push_back({std::move(name), "string", std::move(help),
                       [member, names](absl::string_view key,
                                       absl::string_view v, Options* o) {
                         for (const auto& [text, value] : names) {
                           if (text == v) {
                             o->*member = value;
                             return absl::OkStatus();
                           }
                         }
                         std::vector<std::string> known;
                         for (const auto& entry : names)
                           known.push_back(entry.first);
                         return CheckOneOf(key, v, known);
                       },
                       [member, names](const Options& o) {
                         for (const auto& [text, value] : names) {
                           if (value == o.*member) return text;
                         }
                         return std::string("?");
                       }});
    return *this;
  }

  // The fields of `schema` (those in `names`, in that order, or all when
  // empty) for the options struct `member` embedded in Options: declared
  // once, shared by every method that embeds it. `help` replaces the help
  // of the named fields where a method gives them a narrower meaning.
  template <typename Sub>
  OptionsSchema& Embed(Sub Options::*member, const OptionsSchema<Sub>& schema,
                       const std::vector<std::string>& names = {},
                       const std::map<std::string, std::string>& help = {}) {
    auto add = [&](const typename OptionsSchema<Sub>::FieldDecl& f) {
      auto it = help.find(f.name);
      fields_.push_back(
          {f.name, f.type, it != help.end() ? it->second : f.help,
           [member, parse = f.parse](absl::string_view key, absl::string_view v,
                                     Options* o) {
             return parse(key, v, &(o->*member));
           },
           [member, print = f.print](const Options& o) {
             return print(o.*member);
           }});
    };
    if (names.empty()) {
      for (const auto& f : schema.fields_) add(f);
    } else {
      for (const auto& name : names) {
        const auto* f = schema.Find(name);
        if (f != nullptr) add(*f);  // a misspelt name would show in Describe
      }
    }
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
      absl::Status status = field->parse(key, value, options);
      if (!status.ok()) return status;
    }
    return absl::OkStatus();
  }

  // Every field, printed (the canonical snapshot form).
  ParamMap ToParams(const Options& options) const {
    ParamMap out;
    for (const auto& f : fields_) out[f.name] = f.print(options);
    return out;
  }

  // Every field with its type, help and value in `defaults` (a method
  // registered with non-default options describes those).
  std::vector<ParamInfo> Describe(const Options& defaults = Options{}) const {
    std::vector<ParamInfo> out;
    for (const auto& f : fields_) {
      out.push_back({f.name, f.type, f.print(defaults), f.help});
    }
    return out;
  }

 private:
  template <typename>
  friend class OptionsSchema;

  struct FieldDecl {
    std::string name;
    std::string type;  // as listed by Describe: int, double, bool, string
    std::string help;
    std::function<absl::Status(absl::string_view key, absl::string_view value,
                               Options* options)>
        parse;
    std::function<std::string(const Options& options)> print;
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
