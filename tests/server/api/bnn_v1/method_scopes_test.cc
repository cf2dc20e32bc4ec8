#include "server/api/bnn_v1/method_scopes.h"

#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>

#include <absl/strings/str_cat.h>
#include <gmock/gmock.h>
#include <google/protobuf/descriptor.h>
#include <gtest/gtest.h>

#include "bnn/v1/bnn_service.pb.h"

#include "tests/server/server_test_util.h"

namespace bnn::server {
namespace {

using ::bnn::server::testutil::StatusIs;

std::map<std::string, std::string> TableOfCode() {
  std::map<std::string, std::string> table;
  for (const auto& [method, scope] : MethodScopes()) {
    EXPECT_TRUE(
        table.emplace(std::string(method), std::string(ScopeToString(scope)))
            .second)
        << method << " is listed twice";
  }
  return table;
}

// A new RPC cannot be served without a scope: the table names exactly the
// methods of the service.
TEST(MethodScopesTest, EveryMethodOfTheServiceHasAScope) {
  // Found through a message of the file, which links and registers it.
  const google::protobuf::ServiceDescriptor* service =
      v1::PredictRequest::descriptor()->file()->FindServiceByName("BnnService");
  ASSERT_NE(service, nullptr);
  std::map<std::string, std::string> table = TableOfCode();
  for (int i = 0; i < service->method_count(); ++i) {
    const std::string& method = service->method(i)->name();
    EXPECT_TRUE(RequiredScope(method).ok()) << method << " has no scope";
    table.erase(method);
  }
  EXPECT_THAT(table, ::testing::IsEmpty())
      << "the table names RPCs the service does not have";
  EXPECT_THAT(
      RequiredScope("NoSuchRpc").status(),
      StatusIs(absl::StatusCode::kInternal, "RPC NoSuchRpc has no scope"));
}

// docs/api.md shows the same table: rows "| `Rpc` | `scope` |".
TEST(MethodScopesTest, DocsShowTheSameTable) {
  std::ifstream in(absl::StrCat(BNN_SOURCE_DIR, "/docs/api.md"));
  std::stringstream docs;
  docs << in.rdbuf();
  const std::string text = docs.str();
  const std::regex row("\\| `([A-Za-z]+)` \\| `(predict|train|admin)` \\|");
  std::map<std::string, std::string> documented;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), row);
       it != std::sregex_iterator(); ++it) {
    EXPECT_TRUE(documented.emplace((*it)[1], (*it)[2]).second)
        << (*it)[1] << " is documented twice";
  }
  EXPECT_EQ(documented, TableOfCode());
}

}  // namespace
}  // namespace bnn::server
