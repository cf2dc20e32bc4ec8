#include "bnn/methods/registry.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"

#include "bnn/check.h"
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

// Every built-in method, in one explicit list.
void RegisterBuiltinMethods(MethodRegistry* registry) {
  for (const bool online_eig : {false, true}) {
    BNN_CHECK_OK(registry->Register(
        {online_eig ? "slang_online_eig" : "slang",
         online_eig
             ? "SLANG-OnlineEig: low-rank factors averaged from the top "
               "eigenpairs of the empirical Fisher alone (Mishkin et al. 2018, "
               "App. B)"
             : "SLANG: low-rank + diagonal Gaussian posterior by approximate "
               "natural gradient (Mishkin et al. 2018)",
         SlangOptionsSchema().Describe(),
         [online_eig](const ParamMap& params,
                      const std::vector<std::string>& ignored)
             -> absl::StatusOr<std::unique_ptr<VariationalMethod>> {
           SlangOptions options;
           BNN_RETURN_IF_ERROR(
               SlangOptionsSchema().Apply(params, &options, ignored));
           return CreateSlang(options, online_eig);
         }}));
  }
  struct VognVariant {
    const char* name;
    const char* description;
    Curvature curvature;
    CovarianceStructure structure;
  };
  const VognVariant variants[] = {
      {"vogn_full",
       "full-Gaussian VI by natural gradient with the empirical Fisher "
       "(SLANG eq. 2; D <= 4096)",
       Curvature::kEmpiricalFisher, CovarianceStructure::kFull},
      {"von_full",
       "full-Gaussian VI by natural gradient with the exact Hessian (SLANG "
       "eqs. 12-13; no hidden layers, D <= 4096)",
       Curvature::kHessian, CovarianceStructure::kFull},
      {"vogn_diag",
       "mean-field VI by natural gradient with the empirical Fisher (SLANG "
       "Table 1 'MF EF')",
       Curvature::kEmpiricalFisher, CovarianceStructure::kDiagonal},
      {"von_diag",
       "mean-field VI by natural gradient with the exact Hessian (SLANG "
       "Table 1 'MF Hessian'; no hidden layers)",
       Curvature::kHessian, CovarianceStructure::kDiagonal},
  };
  struct BaliEntry {
    const char* name;
    const char* reparameterization;  // nullptr: taken from the parameters
    const char* description;
  };
  const BaliEntry bali[] = {
      {"bali", nullptr,
       "BALI: layerwise Bayesian linear regression with matrix-normal-inverse-"
       "Wishart posteriors (Kurle et al.); reparameterization=weight|local"},
      {"bali_w", "weight", "BALI with weight reparameterisation (BALI-W)"},
      {"bali_l", "local", "BALI with local reparameterisation (BALI-L)"},
  };
  for (const BaliEntry& e : bali) {
    BNN_CHECK_OK(registry->Register(
        {e.name, e.description, BaliOptionsSchema().Describe(),
         [e](const ParamMap& params, const std::vector<std::string>& ignored)
             -> absl::StatusOr<std::unique_ptr<VariationalMethod>> {
           BaliOptions options;
           BNN_RETURN_IF_ERROR(
               BaliOptionsSchema().Apply(params, &options, ignored));
           if (e.reparameterization != nullptr) {
             if (params.count("reparameterization") > 0 &&
                 options.reparameterization != e.reparameterization) {
               return absl::InvalidArgumentError(absl::StrCat(
                   "method ", e.name, " fixes reparameterization = ",
                   e.reparameterization, "; use method 'bali' to choose"));
             }
             options.reparameterization = e.reparameterization;
           }
           return CreateBali(options);
         }}));
  }
  for (const bool map : {false, true}) {
    BNN_CHECK_OK(registry->Register(
        {map ? "map" : "mc_dropout",
         map ? "MAP point estimate by Adam with weight decay (the BALI paper's "
               "baseline; served as a degenerate posterior)"
             : "MC dropout (Gal & Ghahramani 2016): Adam with weight decay; "
               "predictions average over dropout masks",
         DropoutOptionsSchema().Describe(),
         [map](const ParamMap& params, const std::vector<std::string>& ignored)
             -> absl::StatusOr<std::unique_ptr<VariationalMethod>> {
           DropoutOptions options;
           if (map) options.dropout = 0;
           BNN_RETURN_IF_ERROR(
               DropoutOptionsSchema().Apply(params, &options, ignored));
           return CreateDropout(options, map);
         }}));
  }
  BNN_CHECK_OK(registry->Register(
      {"bbb",
       "Bayes by Backprop: mean-field Gaussian VI by reparameterisation "
       "gradients and Adam (Blundell et al. 2015)",
       BbbOptionsSchema().Describe(),
       [](const ParamMap& params, const std::vector<std::string>& ignored)
           -> absl::StatusOr<std::unique_ptr<VariationalMethod>> {
         BbbOptions options;
         BNN_RETURN_IF_ERROR(
             BbbOptionsSchema().Apply(params, &options, ignored));
         return CreateBbb(options);
       }}));
  BNN_CHECK_OK(registry->Register(
      {"hmc",
       "Hamiltonian Monte Carlo (multiple chains, dual-averaging step size, "
       "thinning): a sample-set posterior, the evaluation reference",
       HmcOptionsSchema().Describe(),
       [](const ParamMap& params, const std::vector<std::string>& ignored)
           -> absl::StatusOr<std::unique_ptr<VariationalMethod>> {
         HmcOptions options;
         BNN_RETURN_IF_ERROR(
             HmcOptionsSchema().Apply(params, &options, ignored));
         return CreateHmc(options);
       }}));
  struct NngEntry {
    const char* name;
    const char* description;
    NngVariant variant;
  };
  const NngEntry nng[] = {
      {"noisy_adam",
       "noisy Adam (NNG-FFG): factorised Gaussian by noisy natural gradient "
       "(Zhang et al. 2018, Alg. 1)",
       NngVariant::kNoisyAdam},
      {"noisy_kfac",
       "noisy K-FAC (NNG-MVG): per-layer matrix-variate Gaussian by noisy "
       "natural gradient (Zhang et al. 2018, Alg. 2)",
       NngVariant::kNoisyKfac},
      {"nng_full",
       "noisy natural gradient with a full covariance (Zhang et al. 2018, eqs. "
       "9-10; D <= 4096)",
       NngVariant::kFull},
  };
  for (const NngEntry& e : nng) {
    BNN_CHECK_OK(registry->Register(
        {e.name, e.description, NngOptionsSchema().Describe(),
         [e](const ParamMap& params, const std::vector<std::string>& ignored)
             -> absl::StatusOr<std::unique_ptr<VariationalMethod>> {
           NngOptions options;
           BNN_RETURN_IF_ERROR(
               NngOptionsSchema().Apply(params, &options, ignored));
           return CreateNng(options, e.variant);
         }}));
  }
  for (const bool full : {true, false}) {
    BNN_CHECK_OK(registry->Register(
        {full ? "exact_full" : "exact_diag",
         full ? "optimal full-Gaussian VI of Bayesian logistic regression "
                "(L-BFGS on the ELBO, Gauss-Hermite; SLANG's 'Full Exact')"
              : "optimal mean-field VI of Bayesian logistic regression "
                "(SLANG's 'MF Exact')",
         ExactOptionsSchema().Describe(),
         [full](const ParamMap& params, const std::vector<std::string>& ignored)
             -> absl::StatusOr<std::unique_ptr<VariationalMethod>> {
           ExactOptions options;
           BNN_RETURN_IF_ERROR(
               ExactOptionsSchema().Apply(params, &options, ignored));
           return CreateExact(options, full);
         }}));
  }
  for (const VognVariant& v : variants) {
    BNN_CHECK_OK(registry->Register(
        {v.name, v.description, VognOptionsSchema().Describe(),
         [v](const ParamMap& params, const std::vector<std::string>& ignored)
             -> absl::StatusOr<std::unique_ptr<VariationalMethod>> {
           VognOptions options;
           BNN_RETURN_IF_ERROR(
               VognOptionsSchema().Apply(params, &options, ignored));
           return CreateVogn(options, v.curvature, v.structure);
         }}));
  }
}

}  // namespace bnn
