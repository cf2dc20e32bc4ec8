// Eigen aliases shared by the numerical parts of the core. The scalar type T
// is float or double: big arrays (activations, gradient factors, U) use T,
// small factorisations (L x L, K x K) always use double.
#ifndef BNN_LINALG_TYPES_H_
#define BNN_LINALG_TYPES_H_

#include <Eigen/Core>

namespace bnn {

template <typename T>
using MatrixX = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>;
template <typename T>
using VectorX = Eigen::Matrix<T, Eigen::Dynamic, 1>;
template <typename T>
using RowMatrixX =
    Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

}  // namespace bnn

#endif  // BNN_LINALG_TYPES_H_
