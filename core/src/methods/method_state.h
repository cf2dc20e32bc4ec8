// Internal: the pieces of VariationalMethod::SaveState/LoadState that every
// method shares: named arrays in and out of a bnn.checkpoint.MethodState,
// with their shapes checked on the way in, and the posterior in the
// snapshot's encoding for methods whose state is exactly that posterior.
//
// What a method saves: every member that a later Step() reads and an earlier
// Step() (or Initialize/WarmStart) wrote, other than per-step workspaces
// that each step overwrites before reading. What it may recompute in
// LoadState instead: factorisations that each step recomputes from saved
// state (SLANG's LowRankPrecision, from U and d), with the same code, so that
// the bits agree.
#ifndef BNN_METHODS_METHOD_STATE_H_
#define BNN_METHODS_METHOD_STATE_H_

#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include <Eigen/Cholesky>
#include <Eigen/Core>

#include "bnn/core/checkpoint.pb.h"
#include "bnn/model/model_spec.h"
#include "bnn/posterior/posterior.h"

namespace bnn::internal {

// Eigen::LLT whose factor can be restored from a checkpoint. A factorisation
// is state when it is not recomputed from saved state before every use:
// nng_full's (refreshed every inverse_interval steps while the Fisher moves
// on) and BALI's R^-1 (whose input matrix is not kept). Recomputing such a
// factor from other inputs would change the bits of every later step.
class RestorableLlt : public Eigen::LLT<Eigen::MatrixXd> {
 public:
  using Base = Eigen::LLT<Eigen::MatrixXd>;
  using Base::Base;
  using Base::operator=;

  // The L1 norm of the factored matrix (for rcond()).
  double l1_norm() const { return m_l1_norm; }
  // As if compute() had factored a matrix with lower Cholesky factor
  // `factor` (its strict upper part is ignored) and L1 norm `l1_norm`.
  void Restore(Eigen::MatrixXd factor, double l1_norm) {
    m_matrix = std::move(factor);
    m_l1_norm = l1_norm;
    m_isInitialized = true;
    m_info = Eigen::Success;
  }
};

// Writes a method's state. Arrays are stored in the scalar type they have
// (float or double), column-major with their (rows, cols) shape.
class StateWriter {
 public:
  // `version`: the layout version of `method`'s state, bumped when the
  // method saves something new or different.
  StateWriter(absl::string_view method, uint32_t version,
              checkpoint::MethodState* state);

  template <typename Derived>
  void Array(absl::string_view name, const Eigen::PlainObjectBase<Derived>& a) {
    Put(name, {a.rows(), a.cols()}, a.data(), a.size());
  }
  void Array(absl::string_view name, const std::vector<double>& v) {
    Put(name, {static_cast<int64_t>(v.size()), 1}, v.data(),
        static_cast<int64_t>(v.size()));
  }
  // Equal-length vectors as the columns of a rows x count matrix (HMC's
  // kept samples, L-BFGS's correction pairs); `rows` is used when there are
  // none.
  template <typename Container>
  void Columns(absl::string_view name, int64_t rows, const Container& columns);
  void Scalar(absl::string_view name, double value);
  void Int(absl::string_view name, int64_t value);
  // The factor and the L1 norm, as "<name>.factor" and "<name>.l1_norm".
  void Llt(absl::string_view name, const RestorableLlt& llt);
  // The posterior in the snapshot's encoding (Posterior::ToProto).
  void Posterior(const bnn::Posterior& posterior);

 private:
  template <typename T>
  void Put(absl::string_view name, std::vector<int64_t> shape, const T* data,
           int64_t size);

  checkpoint::MethodState* state_;
};

// Reads a method's state back, checking every array's presence, scalar type
// and shape. Errors are InvalidArgument naming the method and the array.
class StateReader {
 public:
  // InvalidArgument unless `state` was saved by `method`; FailedPrecondition
  // if its layout version is newer than `version`. Borrows `state`.
  static absl::StatusOr<StateReader> Open(const checkpoint::MethodState& state,
                                          absl::string_view method,
                                          uint32_t version);

  uint32_t version() const { return state_->version(); }

  // Into `out`, which must already have the saved shape (the one
  // Initialize() gave it).
  template <typename Derived>
  absl::Status Array(absl::string_view name,
                     Eigen::PlainObjectBase<Derived>* out) const {
    return Get(name, out->rows(), out->cols(), /*exact_cols=*/true, out);
  }
  // Into `out`, resized to the saved shape: `rows` rows and at most
  // `max_cols` columns (U's rank, a warm-start prior's factor).
  template <typename Derived>
  absl::Status ArrayWithRows(absl::string_view name, int64_t rows,
                             int64_t max_cols,
                             Eigen::PlainObjectBase<Derived>* out) const {
    return Get(name, rows, max_cols, /*exact_cols=*/false, out);
  }
  absl::Status Array(absl::string_view name, size_t size,
                     std::vector<double>* out) const;
  // The columns of a rows x count array (count <= max_count) as vectors.
  template <typename Container>
  absl::Status Columns(absl::string_view name, int64_t rows, int64_t max_count,
                       Container* columns) const;
  absl::Status Scalar(absl::string_view name, double* out) const;
  // A value in [lo, hi].
  absl::Status Int(absl::string_view name, int64_t lo, int64_t hi,
                   int64_t* out) const;
  absl::Status Bool(absl::string_view name, bool* out) const;
  // A dim x dim factor.
  absl::Status Llt(absl::string_view name, int64_t dim,
                   RestorableLlt* out) const;
  // The saved posterior, checked against `model` (PosteriorFromProto).
  absl::StatusOr<std::unique_ptr<bnn::Posterior>> Posterior(
      const ModelSpec& model) const;

  // InvalidArgument("checkpoint state of <method>: <what>").
  absl::Status Error(absl::string_view what) const;

 private:
  explicit StateReader(const checkpoint::MethodState* state);

  // The array `name`, of `rows` x cols with cols == max_cols (exact_cols)
  // or <= max_cols, holding values of type T.
  template <typename T>
  absl::StatusOr<const checkpoint::Array*> Find(absl::string_view name,
                                                int64_t rows, int64_t max_cols,
                                                bool exact_cols) const;

  template <typename Derived>
  absl::Status Get(absl::string_view name, int64_t rows, int64_t max_cols,
                   bool exact_cols,
                   Eigen::PlainObjectBase<Derived>* out) const {
    using T = typename Derived::Scalar;
    if constexpr (Derived::ColsAtCompileTime == 1) {
      max_cols = 1;
      exact_cols = true;
    }
    auto array = Find<T>(name, rows, max_cols, exact_cols);
    if (!array.ok()) return array.status();
    out->resize(rows, (*array)->shape(1));
    if (out->size() > 0) {
      std::memcpy(out->data(), Values<T>(**array),
                  sizeof(T) * static_cast<size_t>(out->size()));
    }
    return absl::OkStatus();
  }

  template <typename T>
  static const T* Values(const checkpoint::Array& array) {
    if constexpr (std::is_same_v<T, float>) {
      return array.f32().data();
    } else {
      return array.f64().data();
    }
  }

  const checkpoint::MethodState* state_;
  std::map<std::string, const checkpoint::Array*, std::less<>> arrays_;
};

template <typename Container>
void StateWriter::Columns(absl::string_view name, int64_t rows,
                          const Container& columns) {
  checkpoint::Array* array = state_->add_arrays();
  array->set_name(std::string(name));
  array->add_shape(rows);
  array->add_shape(static_cast<int64_t>(columns.size()));
  auto* values = array->mutable_f64();
  values->Reserve(static_cast<int>(rows * columns.size()));
  for (const auto& column : columns) {
    values->Add(column.data(), column.data() + column.size());
  }
}

template <typename Container>
absl::Status StateReader::Columns(absl::string_view name, int64_t rows,
                                  int64_t max_count, Container* columns) const {
  auto array = Find<double>(name, rows, max_count, /*exact_cols=*/false);
  if (!array.ok()) return array.status();
  const int64_t count = (*array)->shape(1);
  columns->clear();
  const double* values = (*array)->f64().data();
  for (int64_t c = 0; c < count; ++c) {
    columns->push_back(
        Eigen::Map<const Eigen::VectorXd>(values + c * rows, rows));
  }
  return absl::OkStatus();
}

}  // namespace bnn::internal

#endif  // BNN_METHODS_METHOD_STATE_H_
