// Methods by name. The registry is filled explicitly by
// RegisterBuiltinMethods(), which calls each method file's RegisterX() (no
// static initialisers, so static linking cannot drop a method); an unknown
// name fails listing every known one.
#ifndef BNN_METHODS_REGISTRY_H_
#define BNN_METHODS_REGISTRY_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#include "bnn/methods/options.h"

namespace bnn {

class VariationalMethod;  // bnn/methods/method.h

class MethodRegistry {
 public:
  // Builds a method from its parameters. Must reject unknown keys other than
  // those in `ignored` (owned by the trainer) and run Options::Validate().
  using Factory =
      std::function<absl::StatusOr<std::unique_ptr<VariationalMethod>>(
          const ParamMap& params, const std::vector<std::string>& ignored)>;

  struct Entry {
    std::string name;
    std::string description;
    std::vector<ParamInfo> params;
    Factory factory;
  };

  // Fails on an empty or duplicate name.
  absl::Status Register(Entry entry);

  // Registers a method whose parameters are `schema`'s fields (`schema`
  // must outlive the registry: schemas are static). Its factory starts from
  // `defaults` (also what `methods` lists), applies the parameters, runs
  // Options::Validate() and calls `create(options)`, which returns the
  // method (a std::unique_ptr to it, or a StatusOr of one for factories
  // with checks of their own).
  template <typename Options, typename Create>
  absl::Status Add(std::string name, std::string description,
                   const OptionsSchema<Options>& schema, Create create,
                   const Options& defaults = Options{}) {
    return Register(
        {std::move(name), std::move(description), schema.Describe(defaults),
         [&schema, create, defaults](const ParamMap& params,
                                     const std::vector<std::string>& ignored)
             -> absl::StatusOr<std::unique_ptr<VariationalMethod>> {
           Options options = defaults;
           absl::Status status = schema.Apply(params, &options, ignored);
           if (status.ok()) status = options.Validate();
           if (!status.ok()) return status;
           return AsMethod(create(options));
         }});
  }

  absl::StatusOr<std::unique_ptr<VariationalMethod>> Create(
      absl::string_view name, const ParamMap& params,
      const std::vector<std::string>& ignored = {}) const;

  // What Create() would return, without keeping the method: checks the name,
  // the parameter keys and the option bounds.
  absl::Status Validate(absl::string_view name, const ParamMap& params,
                        const std::vector<std::string>& ignored = {}) const;

  // InvalidArgument listing the known names if `name` is unknown.
  absl::StatusOr<const Entry*> Find(absl::string_view name) const;
  std::vector<std::string> Names() const;

  // The registry with every built-in method ("slang", ...). Thread-safe.
  static const MethodRegistry& Builtin();

 private:
  // What Add()'s `create` returns, as the factory's result: a StatusOr of
  // the method as it is, a std::unique_ptr to a method converted. Templates,
  // so that only method files, where methods are complete types, instantiate
  // them.
  template <typename Result>
  static absl::StatusOr<std::unique_ptr<VariationalMethod>> AsMethod(
      Result result) {
    return result;
  }
  template <typename Method>
  static absl::StatusOr<std::unique_ptr<VariationalMethod>> AsMethod(
      std::unique_ptr<Method> method) {
    return std::unique_ptr<VariationalMethod>(std::move(method));
  }

  std::map<std::string, Entry, std::less<>> entries_;
};

void RegisterBuiltinMethods(MethodRegistry* registry);

}  // namespace bnn

#endif  // BNN_METHODS_REGISTRY_H_
