#include "server/auth/authenticator.h"

#include <cstdio>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <absl/strings/str_cat.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "server/auth/token_file.h"
#include "tests/server/server_test_util.h"

namespace bnn::server {
namespace {

using ::bnn::server::testutil::StatusIs;
using ::bnn::server::testutil::TempDir;
using ::testing::HasSubstr;
using ::testing::Not;

class AuthenticatorTest : public ::testing::Test {
 protected:
  AuthenticatorTest() : path_(dir_.path() + "/tokens") {}

  // A new token with `scopes`, written to the file by WriteFile().
  std::string AddToken(absl::string_view scopes, absl::string_view name) {
    const NewToken created = *CreateToken(*ScopeSet::Parse(scopes), name);
    lines_ += FormatTokenLine(created.entry) + "\n";
    return created.token;
  }
  void WriteFile() { std::ofstream(path_) << lines_; }

  // The caller's name: the token's, or "" without a token file.
  absl::StatusOr<std::string> Caller(const Authenticator& auth,
                                     std::vector<std::string> metadata,
                                     Scope required) {
    std::vector<absl::string_view> views(metadata.begin(), metadata.end());
    return auth.Authorize(views, "SomeRpc", required);
  }
  absl::Status Authorize(const Authenticator& auth,
                         std::vector<std::string> metadata, Scope required) {
    return Caller(auth, std::move(metadata), required).status();
  }

  TempDir dir_;
  const std::string path_;
  std::string lines_;
};

TEST_F(AuthenticatorTest, WithoutATokenFileEveryCallIsAllowed) {
  const std::unique_ptr<Authenticator> auth = *Authenticator::Create("");
  EXPECT_FALSE(auth->enabled());
  EXPECT_EQ(Caller(*auth, {}, Scope::kAdmin).value_or("?"), "");
  EXPECT_THAT(auth->Reload(), StatusIs(absl::StatusCode::kFailedPrecondition,
                                       "no --token-file"));
}

TEST_F(AuthenticatorTest, MissingMalformedAndUnknownTokensAreUnauthenticated) {
  const std::string token = AddToken("admin", "root");
  WriteFile();
  const std::unique_ptr<Authenticator> auth = *Authenticator::Create(path_);
  EXPECT_TRUE(auth->enabled());
  EXPECT_EQ(auth->num_tokens(), 1);
  EXPECT_THAT(Authorize(*auth, {}, Scope::kPredict),
              StatusIs(absl::StatusCode::kUnauthenticated,
                       "SomeRpc needs a bearer token: send the metadata "
                       "'authorization: Bearer TOKEN'"));
  for (const std::vector<std::string>& malformed :
       std::vector<std::vector<std::string>>{
           {token},
           {"Basic " + token},
           {"Bearer"},
           {"Bearer " + token, "Bearer " + token}}) {
    const absl::Status status = Authorize(*auth, malformed, Scope::kPredict);
    EXPECT_THAT(status, StatusIs(absl::StatusCode::kUnauthenticated,
                                 "is not one 'Bearer TOKEN'"));
    EXPECT_THAT(std::string(status.message()), Not(HasSubstr(token)));
  }
  for (const std::string& wrong :
       {std::string("Bearer "), "Bearer " + token + "x",
        "Bearer " + token.substr(1), std::string("Bearer bnn_guess")}) {
    const absl::Status status = Authorize(*auth, {wrong}, Scope::kPredict);
    EXPECT_THAT(status, StatusIs(absl::StatusCode::kUnauthenticated,
                                 "the bearer token of SomeRpc is not valid"))
        << wrong;
    EXPECT_THAT(std::string(status.message()), Not(HasSubstr("bnn_")));
  }
  // The scheme is case-insensitive; spaces around the token do not count.
  EXPECT_TRUE(Authorize(*auth, {"bearer " + token}, Scope::kAdmin).ok());
  EXPECT_TRUE(Authorize(*auth, {"BEARER  " + token + " "}, Scope::kAdmin).ok());
}

TEST_F(AuthenticatorTest, ScopesDecideAndDenialsNameTheTokenNotItsValue) {
  const std::string predict = AddToken("predict", "app");
  const std::string train = AddToken("train", "pipeline");
  const std::string both = AddToken("predict,train", "loop");
  const std::string admin = AddToken("admin", "ops");
  WriteFile();
  const std::unique_ptr<Authenticator> auth = *Authenticator::Create(path_);
  ASSERT_EQ(auth->num_tokens(), 4);
  const auto call = [&](const std::string& token, Scope required) {
    return Authorize(*auth, {"Bearer " + token}, required);
  };
  EXPECT_EQ(Caller(*auth, {"Bearer " + predict}, Scope::kPredict).value_or(""),
            "app");
  EXPECT_EQ(Caller(*auth, {"Bearer " + admin}, Scope::kTrain).value_or(""),
            "ops");
  EXPECT_TRUE(call(train, Scope::kTrain).ok());
  EXPECT_TRUE(call(both, Scope::kPredict).ok());
  EXPECT_TRUE(call(both, Scope::kTrain).ok());
  for (const Scope scope : {Scope::kPredict, Scope::kTrain, Scope::kAdmin}) {
    EXPECT_TRUE(call(admin, scope).ok());
  }
  const absl::Status denied = call(predict, Scope::kTrain);
  EXPECT_THAT(denied,
              StatusIs(absl::StatusCode::kPermissionDenied,
                       "token 'app' (scopes predict) may not call SomeRpc, "
                       "which needs scope train"));
  EXPECT_THAT(std::string(denied.message()), Not(HasSubstr(predict)));
  EXPECT_THAT(call(train, Scope::kPredict),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       "token 'pipeline' (scopes train)"));
  EXPECT_THAT(call(both, Scope::kAdmin),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       "token 'loop' (scopes predict,train) may not call "
                       "SomeRpc, which needs scope admin"));
}

TEST_F(AuthenticatorTest, ReloadSwapsTokensAndKeepsThemWhenTheFileIsBad) {
  const std::string old_token = AddToken("predict", "old");
  WriteFile();
  const std::unique_ptr<Authenticator> auth = *Authenticator::Create(path_);
  lines_.clear();
  const std::string new_token = AddToken("predict", "new");
  WriteFile();
  ASSERT_TRUE(auth->Reload().ok());
  EXPECT_TRUE(Authorize(*auth, {"Bearer " + new_token}, Scope::kPredict).ok());
  EXPECT_THAT(Authorize(*auth, {"Bearer " + old_token}, Scope::kPredict),
              StatusIs(absl::StatusCode::kUnauthenticated, "not valid"));

  std::ofstream(path_) << lines_ << "sha256:00 predict broken\n";
  EXPECT_THAT(auth->Reload(), StatusIs(absl::StatusCode::kInvalidArgument,
                                       "line 2: the first field must be"));
  std::remove(path_.c_str());
  EXPECT_THAT(auth->Reload(),
              StatusIs(absl::StatusCode::kNotFound, "cannot read token file"));
  EXPECT_EQ(auth->num_tokens(), 1);
  EXPECT_TRUE(Authorize(*auth, {"Bearer " + new_token}, Scope::kPredict).ok());
}

TEST_F(AuthenticatorTest, CreateFailsOnABadFile) {
  EXPECT_THAT(Authenticator::Create(path_).status(),
              StatusIs(absl::StatusCode::kNotFound, path_));
  std::ofstream(path_) << "garbage\n";
  EXPECT_THAT(Authenticator::Create(path_).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "token file " + path_ + " line 1: expected 3 fields"));
}

}  // namespace
}  // namespace bnn::server
