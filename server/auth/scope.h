// Scopes: what a bearer token may do. Each RPC needs exactly one scope (the
// table of its API, e.g. server/api/bnn_v1/method_scopes.h); a token holds a
// set of them.
//
// Nesting: admin grants every RPC; predict and train are independent, so a
// token that uploads data and trains (train) cannot read predictions unless
// it also holds predict. A token holding both is written "predict,train".
#ifndef BNN_SERVER_AUTH_SCOPE_H_
#define BNN_SERVER_AUTH_SCOPE_H_

#include <cstdint>
#include <string>

#include <absl/status/statusor.h>
#include <absl/strings/string_view.h>

namespace bnn::server {

enum class Scope : uint8_t {
  // Predict, Acquire, reads of snapshots and methods.
  kPredict,
  // Uploads, appends, dataset reads, StartTraining, CancelJob, job reads.
  kTrain,
  // Deletions, snapshot import and export, and every other RPC.
  kAdmin,
};

// "predict", "train", "admin".
absl::string_view ScopeToString(Scope scope);
// InvalidArgument naming the known scopes for any other name.
absl::StatusOr<Scope> StringToScope(absl::string_view name);

// The scopes of one token.
class ScopeSet {
 public:
  ScopeSet() = default;
  // A comma-separated list of scope names ("predict,train"); at least one,
  // no repeats. InvalidArgument naming the offending entry otherwise.
  static absl::StatusOr<ScopeSet> Parse(absl::string_view list);

  void Add(Scope scope) { bits_ |= Bit(scope); }
  bool Contains(Scope scope) const { return (bits_ & Bit(scope)) != 0; }
  bool empty() const { return bits_ == 0; }
  // Whether a token with these scopes may call an RPC that needs
  // `required`: it holds `required`, or admin.
  bool Grants(Scope required) const {
    return Contains(required) || Contains(Scope::kAdmin);
  }
  // The Parse() form, in the order predict, train, admin.
  std::string ToString() const;

  bool operator==(const ScopeSet& other) const { return bits_ == other.bits_; }

 private:
  static uint8_t Bit(Scope scope) {
    return static_cast<uint8_t>(1u << static_cast<unsigned>(scope));
  }
  uint8_t bits_ = 0;
};

}  // namespace bnn::server

#endif  // BNN_SERVER_AUTH_SCOPE_H_
