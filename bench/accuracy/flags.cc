#include "bench/accuracy/flags.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace bnn::experiment {

FlagSet& FlagSet::Flag(std::string name, std::string help,
                       std::string default_value, bool repeatable) {
  decls_.push_back(
      {std::move(name), std::move(help), std::move(default_value), repeatable});
  return *this;
}

const FlagSet::Decl* FlagSet::Find(const std::string& name) const {
  for (const Decl& d : decls_) {
    if (d.name == name) return &d;
  }
  return nullptr;
}

absl::Status FlagSet::Parse(const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (!absl::StartsWith(arg, "--") || arg.size() == 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("unexpected argument '", arg, "'; flags are --name"));
    }
    std::string name = arg.substr(2);
    std::string value;
    bool has_value = false;
    if (const size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name.resize(eq);
      has_value = true;
    }
    const Decl* decl = Find(name);
    if (decl == nullptr) {
      std::vector<std::string> known;
      for (const Decl& d : decls_) known.push_back("--" + d.name);
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag '--", name,
                       "'; this mode accepts: ", absl::StrJoin(known, " ")));
    }
    if (!has_value) {
      if (i + 1 >= args.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("flag '--", name, "' needs a value"));
      }
      value = args[++i];
    }
    std::vector<std::string>& slot = values_[name];
    if (!slot.empty() && !decl->repeatable) {
      return absl::InvalidArgumentError(
          absl::StrCat("flag '--", name, "' given more than once"));
    }
    slot.push_back(std::move(value));
  }
  return absl::OkStatus();
}

bool FlagSet::Has(const std::string& name) const {
  return values_.count(name) > 0;
}

std::string FlagSet::Get(const std::string& name) const {
  if (auto it = values_.find(name); it != values_.end()) {
    return it->second.back();
  }
  const Decl* decl = Find(name);
  return decl == nullptr ? "" : decl->default_value;
}

std::vector<std::string> FlagSet::GetAll(const std::string& name) const {
  auto it = values_.find(name);
  return it == values_.end() ? std::vector<std::string>{} : it->second;
}

absl::StatusOr<int64_t> FlagSet::GetInt(const std::string& name, int64_t lo,
                                        int64_t hi) const {
  const std::string text = Get(name);
  int64_t value = 0;
  if (!absl::SimpleAtoi(text, &value) || value < lo || value > hi) {
    return absl::InvalidArgumentError(absl::StrCat("--", name, " = '", text,
                                                   "' must be an integer in [",
                                                   lo, ", ", hi, "]"));
  }
  return value;
}

absl::StatusOr<std::string> FlagSet::GetRequired(
    const std::string& name) const {
  std::string value = Get(name);
  if (value.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--", name, " is required"));
  }
  return value;
}

std::string FlagSet::Usage() const {
  std::string out;
  for (const Decl& d : decls_) {
    absl::StrAppendFormat(
        &out, "  --%-18s %s%s%s\n", d.name, d.help,
        d.default_value.empty()
            ? ""
            : absl::StrCat(" (default ", d.default_value, ")"),
        d.repeatable ? " [repeatable]" : "");
  }
  return out;
}

std::string FlagSet::Canonical(const std::vector<std::string>& ignored) const {
  std::string out;
  for (const auto& [name, values] : values_) {
    if (std::find(ignored.begin(), ignored.end(), name) != ignored.end()) {
      continue;
    }
    for (const std::string& value : values) {
      absl::StrAppend(&out, out.empty() ? "" : " ", "--", name, "=", value);
    }
  }
  return out;
}

}  // namespace bnn::experiment
