#include "methods/method_state.h"

#include "absl/strings/str_join.h"

#include "bnn/core/snapshot.pb.h"
#include "bnn/status.h"

namespace bnn::internal {

StateWriter::StateWriter(absl::string_view method, uint32_t version,
                         checkpoint::MethodState* state)
    : state_(state) {
  state_->Clear();
  state_->set_method(std::string(method));
  state_->set_version(version);
}

template <typename T>
void StateWriter::Put(absl::string_view name, std::vector<int64_t> shape,
                      const T* data, int64_t size) {
  checkpoint::Array* array = state_->add_arrays();
  array->set_name(std::string(name));
  for (int64_t n : shape) array->add_shape(n);
  if constexpr (std::is_same_v<T, float>) {
    array->mutable_f32()->Add(data, data + size);
  } else if constexpr (std::is_same_v<T, double>) {
    array->mutable_f64()->Add(data, data + size);
  } else {
    array->mutable_i64()->Add(data, data + size);
  }
}

template void StateWriter::Put<float>(absl::string_view, std::vector<int64_t>,
                                      const float*, int64_t);
template void StateWriter::Put<double>(absl::string_view, std::vector<int64_t>,
                                       const double*, int64_t);

void StateWriter::Scalar(absl::string_view name, double value) {
  Put(name, {}, &value, 1);
}

void StateWriter::Int(absl::string_view name, int64_t value) {
  Put(name, {}, &value, 1);
}

void StateWriter::Llt(absl::string_view name, const RestorableLlt& llt) {
  Array(absl::StrCat(name, ".factor"), llt.matrixLLT());
  Scalar(absl::StrCat(name, ".l1_norm"), llt.l1_norm());
}

void StateWriter::Posterior(const bnn::Posterior& posterior) {
  posterior.ToProto(state_->mutable_posterior());
}

StateReader::StateReader(const checkpoint::MethodState* state) : state_(state) {
  for (const checkpoint::Array& array : state->arrays()) {
    arrays_.emplace(array.name(), &array);
  }
}

absl::StatusOr<StateReader> StateReader::Open(
    const checkpoint::MethodState& state, absl::string_view method,
    uint32_t version) {
  if (state.method() != method) {
    return absl::InvalidArgumentError(
        absl::StrCat("the checkpoint holds the state of method '",
                     state.method(), "', not of '", method, "'"));
  }
  if (state.version() > version) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint state of ", method, " has layout version ",
                     state.version(), ", newer than this build reads (",
                     version, "); upgrade bnn-serve to resume it"));
  }
  if (state.version() == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "checkpoint state of ", method, " has the invalid layout version 0"));
  }
  StateReader reader(&state);
  if (reader.arrays_.size() != static_cast<size_t>(state.arrays_size())) {
    return reader.Error("an array name appears twice");
  }
  return reader;
}

absl::Status StateReader::Error(absl::string_view what) const {
  return absl::InvalidArgumentError(
      absl::StrCat("checkpoint state of ", state_->method(), ": ", what));
}

template <typename T>
absl::StatusOr<const checkpoint::Array*> StateReader::Find(
    absl::string_view name, int64_t rows, int64_t max_cols,
    bool exact_cols) const {
  auto it = arrays_.find(name);
  if (it == arrays_.end()) {
    return Error(absl::StrCat("array '", name, "' is missing"));
  }
  const checkpoint::Array& a = *it->second;
  if (a.shape_size() != 2 || a.shape(0) != rows || a.shape(1) < 0 ||
      a.shape(1) > max_cols || (exact_cols && a.shape(1) != max_cols)) {
    return Error(absl::StrCat("array '", name, "' has shape (",
                              absl::StrJoin(a.shape(), ", "),
                              "); the method expects (", rows, ", ",
                              exact_cols ? "" : "<= ", max_cols, ")"));
  }
  const int64_t size = a.shape(0) * a.shape(1);
  const int64_t f32 = a.f32_size(), f64 = a.f64_size(), i64 = a.i64_size();
  const int64_t held = std::is_same_v<T, float> ? f32 : f64;
  if (held != size || f32 + f64 + i64 != size) {
    return Error(absl::StrCat(
        "array '", name, "' holds ", f64, " float64, ", f32, " float32 and ",
        i64, " int64 values; the method expects ", size, " ",
        std::is_same_v<T, float> ? "float32" : "float64", " values"));
  }
  return &a;
}

template absl::StatusOr<const checkpoint::Array*> StateReader::Find<float>(
    absl::string_view, int64_t, int64_t, bool) const;
template absl::StatusOr<const checkpoint::Array*> StateReader::Find<double>(
    absl::string_view, int64_t, int64_t, bool) const;

absl::Status StateReader::Array(absl::string_view name, size_t size,
                                std::vector<double>* out) const {
  BNN_ASSIGN_OR_RETURN(
      const checkpoint::Array* array,
      Find<double>(name, static_cast<int64_t>(size), 1, /*exact_cols=*/true));
  out->assign(array->f64().begin(), array->f64().end());
  return absl::OkStatus();
}

absl::Status StateReader::Scalar(absl::string_view name, double* out) const {
  auto it = arrays_.find(name);
  if (it == arrays_.end() || it->second->shape_size() != 0 ||
      it->second->f64_size() != 1) {
    return Error(absl::StrCat("scalar '", name, "' is missing"));
  }
  *out = it->second->f64(0);
  return absl::OkStatus();
}

absl::Status StateReader::Int(absl::string_view name, int64_t lo, int64_t hi,
                              int64_t* out) const {
  auto it = arrays_.find(name);
  if (it == arrays_.end() || it->second->shape_size() != 0 ||
      it->second->i64_size() != 1) {
    return Error(absl::StrCat("integer '", name, "' is missing"));
  }
  const int64_t value = it->second->i64(0);
  if (value < lo || value > hi) {
    return Error(absl::StrCat("integer '", name, "' = ", value, " is outside [",
                              lo, ", ", hi, "]"));
  }
  *out = value;
  return absl::OkStatus();
}

absl::Status StateReader::Bool(absl::string_view name, bool* out) const {
  int64_t value = 0;
  BNN_RETURN_IF_ERROR(Int(name, 0, 1, &value));
  *out = value != 0;
  return absl::OkStatus();
}

absl::Status StateReader::Llt(absl::string_view name, int64_t dim,
                              RestorableLlt* out) const {
  Eigen::MatrixXd factor(dim, dim);
  BNN_RETURN_IF_ERROR(Array(absl::StrCat(name, ".factor"), &factor));
  double l1_norm = 0;
  BNN_RETURN_IF_ERROR(Scalar(absl::StrCat(name, ".l1_norm"), &l1_norm));
  if (!factor.allFinite() || !(factor.diagonal().array() > 0).all()) {
    return Error(absl::StrCat("the Cholesky factor '", name,
                              "' has a non-finite or non-positive entry"));
  }
  out->Restore(std::move(factor), l1_norm);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<bnn::Posterior>> StateReader::Posterior(
    const ModelSpec& model) const {
  if (!state_->has_posterior()) return Error("the posterior is missing");
  absl::StatusOr<std::unique_ptr<bnn::Posterior>> posterior =
      PosteriorFromProto(state_->posterior(), model);
  if (!posterior.ok()) {
    return Error(absl::StrCat("posterior: ", posterior.status().message()));
  }
  return posterior;
}

}  // namespace bnn::internal
