#include "bnn/methods/registry.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"

#include "bnn/methods/bali.h"
#include "bnn/methods/bbb.h"
#include "bnn/methods/dropout.h"
#include "bnn/methods/exact.h"
#include "bnn/methods/hmc.h"
#include "bnn/methods/method.h"
#include "bnn/methods/nng.h"
#include "bnn/methods/slang.h"
#include "bnn/methods/vogn.h"
#include "bnn/status.h"

namespace bnn {

absl::Status VariationalMethod::WarmStart(const Posterior&, bool) {
  return absl::UnimplementedError(
      absl::StrCat("method '", name(), "' cannot warm-start from a snapshot"));
}

absl::Status MethodRegistry::Register(Entry entry) {
  if (entry.name.empty() || !entry.factory) {
    return absl::InvalidArgumentError("a method needs a name and a factory");
  }
  if (entries_.count(entry.name) > 0) {
    return absl::AlreadyExistsError(
        absl::StrCat("method '", entry.name, "' is already registered"));
  }
  std::string name = entry.name;
  entries_.emplace(std::move(name), std::move(entry));
  return absl::OkStatus();
}

absl::StatusOr<const MethodRegistry::Entry*> MethodRegistry::Find(
    absl::string_view name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown method '", name,
                     "'; known methods: ", absl::StrJoin(Names(), ", ")));
  }
  return &it->second;
}

absl::StatusOr<std::unique_ptr<VariationalMethod>> MethodRegistry::Create(
    absl::string_view name, const ParamMap& params,
    const std::vector<std::string>& ignored) const {
  BNN_ASSIGN_OR_RETURN(const Entry* entry, Find(name));
  return entry->factory(params, ignored);
}

absl::Status MethodRegistry::Validate(
    absl::string_view name, const ParamMap& params,
    const std::vector<std::string>& ignored) const {
  return Create(name, params, ignored).status();
}

std::vector<std::string> MethodRegistry::Names() const {
  std::vector<std::string> names;
  for (const auto& [name, entry] : entries_) names.push_back(name);
  return names;
}

const MethodRegistry& MethodRegistry::Builtin() {
  static const MethodRegistry* registry = [] {
    auto* r = new MethodRegistry();
    RegisterBuiltinMethods(r);
    return r;
  }();
  return *registry;
}

// Every built-in method, in one explicit list; each method file registers
// its own variants.
void RegisterBuiltinMethods(MethodRegistry* registry) {
  RegisterBali(*registry);
  RegisterBbb(*registry);
  RegisterDropout(*registry);
  RegisterExact(*registry);
  RegisterHmc(*registry);
  RegisterNng(*registry);
  RegisterSlang(*registry);
  RegisterVogn(*registry);
}

}  // namespace bnn
