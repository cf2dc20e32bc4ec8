// Fixed-seed fingerprints of every method family: each run trains a method
// through the public interface (registry, Initialize, Step) on a small
// synthetic problem and prints every number of the exported posterior (the
// snapshot's Posterior message, flattened in field order) and the predictive
// noise precision at full precision. Comparing two outputs shows whether a
// refactoring changed what the methods compute.
//
//   build/bench/fingerprint/bnn_method_fingerprint > before.txt
//   ... change the code, rebuild ...
//   build/bench/fingerprint/bnn_method_fingerprint --compare before.txt
//
// --compare prints, per run, the largest |a - b| / max(1, |a|) and exits 1
// when any exceeds --tolerance (default 1e-12) or a run's shape differs.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include "bnn/check.h"
#include "bnn/core/snapshot.pb.h"
#include "bnn/data/dataset.h"
#include "bnn/methods/method.h"
#include "bnn/methods/registry.h"
#include "bnn/model/model_spec.h"
#include "bnn/posterior/posterior.h"
#include "bnn/random.h"

namespace bnn {
namespace {

// y = sin(x_0) + x_1 x_2 / 2 + noise, features ~ N(0, 1).
Dataset Regression(int n, int features, Rng& rng) {
  Dataset d;
  d.num_features = features;
  for (int i = 0; i < n; ++i) {
    std::vector<double> x(features);
    for (double& v : x) v = rng.Normal();
    d.features.insert(d.features.end(), x.begin(), x.end());
    d.targets.push_back(std::sin(x[0]) + 0.5 * x[1] * x[features - 1] +
                        0.1 * rng.Normal());
  }
  return d;
}

// Labels from a noisy linear score (binary) or the argmax of noisy linear
// scores (classes > 2).
Dataset Classification(int n, int features, int classes, Rng& rng) {
  Dataset d;
  d.num_features = features;
  d.task = classes == 2 ? Task::kBinary : Task::kMulticlass;
  d.num_classes = classes;
  for (int c = 0; c < classes; ++c) d.class_values.push_back(c);
  for (int i = 0; i < n; ++i) {
    std::vector<double> x(features);
    for (double& v : x) v = rng.Normal();
    d.features.insert(d.features.end(), x.begin(), x.end());
    int best = 0;
    double best_score = -1e300;
    for (int c = 0; c < classes; ++c) {
      double score = 0.3 * rng.Normal();
      for (int f = 0; f < features; ++f)
        score += std::cos(1.0 + c * features + f) * x[f];
      if (score > best_score) best_score = score, best = c;
    }
    d.targets.push_back(classes == 2 ? (best_score > 0 ? 1 : 0) : best);
  }
  return d;
}

struct Run {
  std::string name;    // unique label of the run
  std::string method;  // registry name
  ParamMap params;
  const Dataset* data;
  std::vector<int> hidden;
  Activation activation;
  int steps;
  uint64_t seed;
};

void Flatten(const google::protobuf::Message& m, std::vector<double>* out) {
  using google::protobuf::FieldDescriptor;
  const auto* desc = m.GetDescriptor();
  const auto* refl = m.GetReflection();
  for (int i = 0; i < desc->field_count(); ++i) {
    const FieldDescriptor* f = desc->field(i);
    if (f->is_repeated()) {
      const int size = refl->FieldSize(m, f);
      for (int k = 0; k < size; ++k) {
        switch (f->cpp_type()) {
          case FieldDescriptor::CPPTYPE_DOUBLE:
            out->push_back(refl->GetRepeatedDouble(m, f, k));
            break;
          case FieldDescriptor::CPPTYPE_INT32:
            out->push_back(refl->GetRepeatedInt32(m, f, k));
            break;
          case FieldDescriptor::CPPTYPE_BOOL:
            out->push_back(refl->GetRepeatedBool(m, f, k) ? 1 : 0);
            break;
          case FieldDescriptor::CPPTYPE_MESSAGE:
            Flatten(refl->GetRepeatedMessage(m, f, k), out);
            break;
          default:
            break;
        }
      }
      continue;
    }
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (refl->HasField(m, f)) Flatten(refl->GetMessage(m, f), out);
    } else if (f->cpp_type() == FieldDescriptor::CPPTYPE_DOUBLE) {
      out->push_back(refl->GetDouble(m, f));
    } else if (f->cpp_type() == FieldDescriptor::CPPTYPE_INT32) {
      out->push_back(refl->GetInt32(m, f));
    }
  }
}

std::vector<double> Fingerprint(const Run& run) {
  Rng rng(run.seed);
  const Dataset& data = *run.data;
  const ModelSpec spec =
      ModelSpec::ForTask(data.task, static_cast<int>(data.num_features),
                         data.num_classes, run.hidden, run.activation);
  auto method = MethodRegistry::Builtin().Create(run.method, run.params);
  BNN_CHECK_OK(method.status());
  BNN_CHECK_OK((*method)->Initialize(spec, data, rng));
  const int batch = std::min<int>((*method)->batch_size(), data.num_rows());
  const int64_t per_epoch = (data.num_rows() + batch - 1) / batch;
  (*method)->SetSchedule(per_epoch, run.steps);
  std::vector<int64_t> rows(batch);
  for (int t = 0; t < run.steps; ++t) {
    for (int64_t& r : rows)
      r = static_cast<int64_t>(rng.UniformInt(data.num_rows()));
    BNN_CHECK_OK((*method)->Step(rows, rng).status());
  }
  snapshot::Posterior proto;
  (*method)->ExportPosterior()->ToProto(&proto);
  std::vector<double> values;
  Flatten(proto, &values);
  values.push_back((*method)->noise_precision());
  return values;
}

std::map<std::string, std::vector<double>> Read(std::istream& in) {
  std::map<std::string, std::vector<double>> runs;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string name;
    size_t n = 0;
    if (!(fields >> name >> n)) continue;
    std::vector<double>& v = runs[name];
    v.resize(n);
    for (double& x : v) {
      std::string s;
      fields >> s;
      x = std::strtod(s.c_str(), nullptr);
    }
  }
  return runs;
}

int Main(int argc, char** argv) {
  std::string compare;
  double tolerance = 1e-12;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--compare" && i + 1 < argc) {
      compare = argv[++i];
    } else if (arg == "--tolerance" && i + 1 < argc) {
      tolerance = std::strtod(argv[++i], nullptr);
    } else {
      std::fprintf(stderr, "usage: %s [--compare FILE] [--tolerance X]\n",
                   argv[0]);
      return 2;
    }
  }
  Rng data_rng(2024);
  const Dataset reg = Regression(48, 3, data_rng);
  const Dataset bin = Classification(60, 3, 2, data_rng);
  const Dataset multi = Classification(60, 3, 3, data_rng);
  const std::vector<int> one{8}, two{6, 5};
  const Activation relu = Activation::kRelu, tanh = Activation::kTanh,
                   leaky = Activation::kLeakyTanh;
  const std::vector<Run> runs = {
      {"slang",
       "slang",
       {{"rank", "2"}, {"batch_size", "10"}, {"eig_solver", "randomized"}},
       &reg,
       one,
       relu,
       60,
       1},
      {"slang_exact_eig",
       "slang",
       {{"rank", "3"}, {"batch_size", "8"}, {"eig_solver", "exact"}},
       &reg,
       two,
       tanh,
       40,
       2},
      {"slang_float32",
       "slang",
       {{"rank", "2"},
        {"batch_size", "10"},
        {"precision", "float32"},
        {"eig_solver", "randomized"}},
       &bin,
       one,
       tanh,
       40,
       3},
      {"slang_online_eig",
       "slang_online_eig",
       {{"rank", "2"}, {"eig_solver", "randomized"}},
       &reg,
       one,
       relu,
       30,
       4},
      {"noisy_adam",
       "noisy_adam",
       {{"batch_size", "10"}},
       &reg,
       one,
       relu,
       80,
       5},
      {"noisy_adam_gamma",
       "noisy_adam",
       {{"batch_size", "10"}, {"noise_model", "gamma"}, {"trust_region", "1"}},
       &reg,
       two,
       tanh,
       60,
       6},
      {"noisy_kfac",
       "noisy_kfac",
       {{"batch_size", "10"}, {"lr_decay_at", "0.5"}},
       &reg,
       two,
       relu,
       60,
       7},
      {"noisy_kfac_multiclass",
       "noisy_kfac",
       {{"mc_samples", "2"}},
       &multi,
       one,
       tanh,
       40,
       8},
      {"nng_full", "nng_full", {{"batch_size", "12"}}, &bin, one, relu, 40, 9},
      {"bali_w", "bali_w", {{"batch_size", "16"}}, &reg, two, relu, 60, 10},
      {"bali_l", "bali_l", {{"batch_size", "16"}}, &reg, two, relu, 60, 11},
      {"bali_w_multiclass",
       "bali",
       {{"batch_size", "20"}},
       &multi,
       one,
       leaky,
       40,
       12},
      {"bali_l_binary",
       "bali",
       {{"batch_size", "20"}, {"reparameterization", "local"}},
       &bin,
       two,
       leaky,
       40,
       13},
      {"bbb",
       "bbb",
       {{"batch_size", "10"}, {"mc_samples", "3"}},
       &reg,
       one,
       relu,
       60,
       14},
      {"vogn_full",
       "vogn_full",
       {{"batch_size", "10"}},
       &reg,
       one,
       tanh,
       40,
       15},
      {"vogn_diag",
       "vogn_diag",
       {{"momentum", "0.5"}},
       &multi,
       one,
       relu,
       40,
       16},
      {"von_full", "von_full", {}, &bin, {}, relu, 30, 17},
      {"von_diag", "von_diag", {}, &multi, {}, relu, 30, 18},
      {"mc_dropout",
       "mc_dropout",
       {{"batch_size", "10"}, {"dropout", "0.2"}, {"drop_inputs", "true"}},
       &reg,
       two,
       tanh,
       80,
       19},
      {"mc_dropout_multiclass",
       "mc_dropout",
       {{"dropout", "0.3"}},
       &multi,
       one,
       leaky,
       60,
       20},
      {"map", "map", {{"batch_size", "10"}}, &bin, one, relu, 60, 21},
      {"hmc",
       "hmc",
       {{"chains", "2"}, {"warmup", "10"}, {"leapfrog_steps", "5"}},
       &reg,
       {4},
       tanh,
       25,
       22},
      {"exact_full", "exact_full", {}, &bin, {}, relu, 15, 23},
      {"exact_diag", "exact_diag", {}, &bin, {}, relu, 15, 24},
  };

  std::map<std::string, std::vector<double>> want;
  if (!compare.empty()) {
    std::ifstream in(compare);
    if (!in) {
      std::fprintf(stderr, "cannot read %s\n", compare.c_str());
      return 2;
    }
    want = Read(in);
  }
  bool ok = true;
  for (const Run& run : runs) {
    const std::vector<double> got = Fingerprint(run);
    if (compare.empty()) {
      std::cout << run.name << ' ' << got.size();
      for (double v : got) std::cout << ' ' << absl::StrFormat("%.17g", v);
      std::cout << '\n';
      continue;
    }
    auto it = want.find(run.name);
    if (it == want.end() || it->second.size() != got.size()) {
      std::printf("%-24s shape differs (%zu values, recorded %zu)\n",
                  run.name.c_str(), got.size(),
                  it == want.end() ? size_t{0} : it->second.size());
      ok = false;
      continue;
    }
    double worst = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      const double a = it->second[i];
      worst =
          std::max(worst, std::abs(a - got[i]) / std::max(1.0, std::abs(a)));
    }
    const bool pass = worst <= tolerance;
    ok &= pass;
    std::printf("%-24s %5zu values  max rel diff %.3g  %s\n", run.name.c_str(),
                got.size(), worst, pass ? "ok" : "DIFFERS");
  }
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace bnn

int main(int argc, char** argv) { return bnn::Main(argc, argv); }
