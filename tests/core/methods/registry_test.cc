// The method registry and the string-parameter machinery behind `--param`
// and wire options: lookup by name, unknown names and keys listed, bound
// violations naming the field, and the canonical printed form round-tripping.
#include "bnn/methods/registry.h"

#include <cstdint>
#include <fstream>
#include <limits>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "bnn/methods/method.h"
#include "bnn/methods/options.h"
#include "bnn/methods/slang.h"

#include "tests/test_util/test_util.h"

namespace bnn {
namespace {

using ::testing::AllOf;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::Field;
using ::testing::HasSubstr;
using ::testing::Key;
using ::testing::Not;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;

using ::bnn::testing::Msg;

const MethodRegistry& Builtin() { return MethodRegistry::Builtin(); }

// ------------------------------------------------------------- registry

TEST(MethodRegistryTest, BuiltinContainsSlang) {
  EXPECT_THAT(Builtin().Names(), Contains("slang"));
  const absl::StatusOr<const MethodRegistry::Entry*> entry =
      Builtin().Find("slang");
  ASSERT_TRUE(entry.ok()) << entry.status();
  EXPECT_EQ((*entry)->name, "slang");
  EXPECT_FALSE((*entry)->description.empty());
  EXPECT_THAT((*entry)->params, Contains(Field(&ParamInfo::name, "rank")));
  EXPECT_EQ(&MethodRegistry::Builtin(), &Builtin());  // one instance
}

TEST(MethodRegistryTest, CreateSlangWithDefaultsAndOverrides) {
  absl::StatusOr<std::unique_ptr<VariationalMethod>> m =
      Builtin().Create("slang", {});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)->name(), "slang");
  EXPECT_EQ((*m)->batch_size(), SlangOptions{}.batch_size);

  m = Builtin().Create("slang", {{"batch_size", "7"}, {"rank", "3"}});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)->batch_size(), 7);
  const ParamMap params = (*m)->Params();
  EXPECT_THAT(params, Contains(Pair("rank", "3")));
  EXPECT_THAT(params, Contains(Pair("batch_size", "7")));
}

TEST(MethodRegistryTest, UnknownMethodListsKnownOnes) {
  const absl::StatusOr<std::unique_ptr<VariationalMethod>> m =
      Builtin().Create("nope", {});
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(m.status()), AllOf(HasSubstr("'nope'"), HasSubstr("slang")));
  EXPECT_EQ(Builtin().Find("nope").status().code(),
            absl::StatusCode::kInvalidArgument);
  // Names are case-sensitive.
  EXPECT_FALSE(Builtin().Find("SLANG").ok());
}

TEST(MethodRegistryTest, UnknownParameterNamesKeyAndListsKnownOnes) {
  const absl::StatusOr<std::unique_ptr<VariationalMethod>> m =
      Builtin().Create("slang", {{"rnak", "2"}});
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(
      Msg(m.status()),
      AllOf(HasSubstr("'rnak'"), HasSubstr("rank"), HasSubstr("mc_samples"),
            HasSubstr("learning_rate"), HasSubstr("precision")));
}

TEST(MethodRegistryTest, IgnoredKeysAreAcceptedAndListed) {
  const std::vector<std::string> ignored = {"epochs", "seed"};
  absl::StatusOr<std::unique_ptr<VariationalMethod>> m = Builtin().Create(
      "slang", {{"epochs", "3"}, {"seed", "17"}, {"rank", "2"}}, ignored);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_THAT((*m)->Params(), Contains(Pair("rank", "2")));
  EXPECT_THAT((*m)->Params(), Not(Contains(Key("epochs"))));

  // Without `ignored` the same keys are unknown.
  m = Builtin().Create("slang", {{"epochs", "3"}});
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(m.status()), HasSubstr("'epochs'"));

  // An unknown key next to ignored ones lists the ignored ones as known.
  m = Builtin().Create("slang", {{"epoch", "3"}}, ignored);
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(m.status()), AllOf(HasSubstr("'epoch'"), HasSubstr("epochs"),
                                     HasSubstr("seed")));
}

struct BadValue {
  std::string key;
  std::string value;
  std::vector<std::string> message_parts;
};

class BadValueTest : public ::testing::TestWithParam<BadValue> {};

TEST_P(BadValueTest, IsInvalidArgumentNamingFieldAndBound) {
  const BadValue& bad = GetParam();
  const absl::StatusOr<std::unique_ptr<VariationalMethod>> m =
      Builtin().Create("slang", {{bad.key, bad.value}});
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  for (const std::string& part : bad.message_parts) {
    EXPECT_THAT(Msg(m.status()), HasSubstr(part));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Slang, BadValueTest,
    ::testing::Values(
        BadValue{"rank", "0", {"rank = 0", "[1, 4096]"}},
        BadValue{"rank", "-3", {"rank = -3", "[1, 4096]"}},
        BadValue{"beta", "2", {"beta = 2", "(0, 1]"}},
        BadValue{"beta", "0", {"beta = 0", "(0, 1]"}},
        BadValue{"learning_rate", "-0.5", {"learning_rate = -0.5", "(0, 10]"}},
        BadValue{"mc_samples", "0", {"mc_samples = 0", "[1, 10000]"}},
        BadValue{"momentum", "1", {"momentum = 1", "[0, 0.999999]"}},
        BadValue{"prior_precision", "0", {"prior_precision = 0", "positive"}},
        BadValue{"noise_precision", "nan", {"noise_precision", "positive"}},
        BadValue{"power_iterations", "0", {"power_iterations = 0", "[1, 100]"}},
        BadValue{"precision",
                 "float16",
                 {"precision = 'float16'", "float64", "float32"}},
        BadValue{
            "learning_rate", "abc", {"'learning_rate'", "'abc'", "number"}},
        BadValue{"rank", "1.5", {"'rank'", "'1.5'", "int"}},
        BadValue{"batch_size", "", {"'batch_size'", "int"}}),
    [](const ::testing::TestParamInfo<BadValue>& info) {
      return info.param.key + "_" + std::to_string(info.index);
    });

TEST(MethodRegistryTest, MethodsListTheDefaultsTheyRunWith) {
  auto listed = [](const std::string& method, const std::string& param) {
    auto entry = Builtin().Find(method);
    EXPECT_TRUE(entry.ok()) << method;
    for (const ParamInfo& p : (*entry)->params) {
      if (p.name == param) return p.default_value;
    }
    return std::string("(missing)");
  };
  // Variants registered with non-default options list those.
  EXPECT_EQ(listed("map", "dropout"), "0");
  EXPECT_EQ(listed("mc_dropout", "dropout"), "0.1");
  EXPECT_EQ(listed("bali_l", "reparameterization"), "local");
  EXPECT_EQ(listed("bali_w", "reparameterization"), "weight");
  // Embedded prior fields keep each method's default.
  EXPECT_EQ(listed("slang", "bias_prior_precision"), "1e-06");
  EXPECT_EQ(listed("bbb", "bias_prior_precision"), "1");
  EXPECT_EQ(listed("noisy_adam", "noise_model"), "fixed");
  // A fixed variant refuses the other value; "bali" takes either.
  EXPECT_EQ(Builtin()
                .Create("bali_l", {{"reparameterization", "weight"}})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Builtin().Create("bali", {{"reparameterization", "local"}}).ok());
  EXPECT_TRUE(
      Builtin().Create("bali_l", {{"reparameterization", "local"}}).ok());
}

TEST(OptionsSchemaTest, EnumAndEmbeddedFieldsParseOnceAndPrintBack) {
  SlangOptions o;
  ASSERT_TRUE(SlangOptionsSchema()
                  .Apply({{"eig_solver", "exact"},
                          {"precision", "float32"},
                          {"bias_prior_precision", "0.5"},
                          {"noise_precision", "7"}},
                         &o)
                  .ok());
  EXPECT_EQ(o.eig_solver, EigSolver::kExact);
  EXPECT_EQ(o.precision, Arithmetic::kFloat32);
  EXPECT_EQ(o.prior.bias_prior_precision, 0.5);
  EXPECT_EQ(o.prior.noise_precision, 7.0);
  EXPECT_EQ(o.prior.prior_precision, 1.0);  // untouched
  const ParamMap printed = SlangOptionsSchema().ToParams(o);
  EXPECT_EQ(printed.at("eig_solver"), "exact");
  EXPECT_EQ(printed.at("precision"), "float32");
  EXPECT_EQ(printed.at("bias_prior_precision"), "0.5");
  // SLANG embeds only the prior fields it uses.
  EXPECT_EQ(printed.count("noise_model"), 0u);
  const absl::Status bad =
      SlangOptionsSchema().Apply({{"eig_solver", "lanczos"}}, &o);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(bad), AllOf(HasSubstr("eig_solver = 'lanczos'"),
                              HasSubstr("auto, randomized, exact")));
}

TEST(MethodRegistryTest, RegisterRejectsDuplicatesAndEmptyEntries) {
  MethodRegistry registry;
  RegisterBuiltinMethods(&registry);
  const std::vector<std::string> builtin = registry.Names();
  EXPECT_THAT(builtin,
              ::testing::IsSupersetOf({"slang", "slang_online_eig", "vogn_full",
                                       "von_full", "vogn_diag", "von_diag",
                                       "exact_full", "exact_diag", "bbb"}));

  MethodRegistry::Entry dup;
  dup.name = "slang";
  dup.factory = [](const ParamMap&, const std::vector<std::string>&)
      -> absl::StatusOr<std::unique_ptr<VariationalMethod>> {
    return absl::UnimplementedError("fake");
  };
  absl::Status s = registry.Register(dup);
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(Msg(s), HasSubstr("'slang'"));

  MethodRegistry::Entry unnamed = dup;
  unnamed.name = "";
  EXPECT_EQ(registry.Register(unnamed).code(),
            absl::StatusCode::kInvalidArgument);
  MethodRegistry::Entry no_factory;
  no_factory.name = "nofactory";
  EXPECT_EQ(registry.Register(no_factory).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.Names(), builtin);  // nothing was added
}

TEST(MethodRegistryTest, CreateForwardsParamsAndIgnoredToTheFactory) {
  MethodRegistry registry;
  ParamMap seen_params;
  std::vector<std::string> seen_ignored;
  MethodRegistry::Entry fake;
  fake.name = "fake";
  fake.description = "a test double";
  fake.factory = [&](const ParamMap& params,
                     const std::vector<std::string>& ignored)
      -> absl::StatusOr<std::unique_ptr<VariationalMethod>> {
    seen_params = params;
    seen_ignored = ignored;
    return absl::UnimplementedError("fake factory");
  };
  ASSERT_TRUE(registry.Register(fake).ok());
  const absl::StatusOr<std::unique_ptr<VariationalMethod>> m =
      registry.Create("fake", {{"a", "1"}}, {"epochs"});
  EXPECT_EQ(m.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(seen_params, ElementsAre(Pair("a", "1")));
  EXPECT_THAT(seen_ignored, ElementsAre("epochs"));
  EXPECT_THAT(registry.Names(), ElementsAre("fake"));
  // The fresh registry knows nothing of the built-ins.
  EXPECT_FALSE(registry.Find("slang").ok());
}

// -------------------------------------------------------- OptionsSchema

struct TestOptions {
  int count = 3;
  int64_t big = int64_t{1} << 40;
  double rate = 0.1;
  bool flag = false;
  std::string mode = "fast";

  bool operator==(const TestOptions& o) const {
    return count == o.count && big == o.big && rate == o.rate &&
           flag == o.flag && mode == o.mode;
  }
};

OptionsSchema<TestOptions> TestSchema() {
  OptionsSchema<TestOptions> s;
  s.Field("count", &TestOptions::count, "an int")
      .Field("big", &TestOptions::big, "an int64")
      .Field("rate", &TestOptions::rate, "a double")
      .Field("flag", &TestOptions::flag, "a bool")
      .Field("mode", &TestOptions::mode, "a string");
  return s;
}

TEST(OptionsSchemaTest, ToParamsThenApplyGivesEqualOptions) {
  const OptionsSchema<TestOptions> schema = TestSchema();
  TestOptions o;
  o.count = -7;
  o.big = std::numeric_limits<int64_t>::max();
  o.rate = 0.1 + 0.2;  // needs 17 significant digits
  o.flag = true;
  o.mode = "slow mode";
  const ParamMap params = schema.ToParams(o);
  EXPECT_THAT(params, UnorderedElementsAre(Pair("count", "-7"),
                                           Pair("big", "9223372036854775807"),
                                           Pair("rate", "0.30000000000000004"),
                                           Pair("flag", "true"),
                                           Pair("mode", "slow mode")));
  TestOptions back;
  ASSERT_TRUE(schema.Apply(params, &back).ok());
  EXPECT_TRUE(back == o);
}

TEST(OptionsSchemaTest, DoublesPrintInShortestRoundTrippableForm) {
  const OptionsSchema<TestOptions> schema = TestSchema();
  const std::vector<std::pair<double, std::string>> cases = {
      {0.1, "0.1"},
      {0.01, "0.01"},
      {2.5, "2.5"},
      {1e-6, "1e-06"},
      {100.0, "100"},
      {-0.75, "-0.75"},
      {1.0 / 3, "0.3333333333333333"},
      {123456789.0, "123456789"},
      {0.30000000000000004, "0.30000000000000004"}};
  for (const auto& [value, text] : cases) {
    TestOptions o;
    o.rate = value;
    const ParamMap params = schema.ToParams(o);
    EXPECT_EQ(params.at("rate"), text) << value;
    TestOptions back;
    back.rate = -1;
    ASSERT_TRUE(schema.Apply({{"rate", params.at("rate")}}, &back).ok());
    EXPECT_EQ(back.rate, value) << text;  // bit-exact
  }
}

TEST(OptionsSchemaTest, SlangOptionsRoundTripThroughParams) {
  SlangOptions o;
  o.rank = 5;
  o.mc_samples = 12;
  o.batch_size = 10;
  o.learning_rate = 0.0123;
  o.beta = 0.9;
  o.decay = 0.51;
  o.momentum = 0.0;
  o.prior.prior_precision = 1.0 / 7;
  o.prior.bias_prior_precision = 1e-8;
  o.prior.noise_precision = 40.3;
  o.power_iterations = 2;
  o.init_precision = 3.5;
  o.eig_threshold = 0.0;
  o.precision = Arithmetic::kFloat32;
  o.eig_solver = EigSolver::kExact;
  ASSERT_TRUE(o.Validate().ok());
  const ParamMap params = SlangOptionsSchema().ToParams(o);
  // Every declared field is printed.
  const std::vector<ParamInfo> declared = SlangOptionsSchema().Describe();
  EXPECT_EQ(params.size(), declared.size());
  for (const ParamInfo& info : declared) {
    EXPECT_EQ(params.count(info.name), 1u) << info.name;
  }
  EXPECT_EQ(params.at("rank"), "5");
  EXPECT_EQ(params.at("learning_rate"), "0.0123");
  EXPECT_EQ(params.at("precision"), "float32");
  SlangOptions back;
  ASSERT_TRUE(SlangOptionsSchema().Apply(params, &back).ok());
  EXPECT_EQ(back.rank, o.rank);
  EXPECT_EQ(back.mc_samples, o.mc_samples);
  EXPECT_EQ(back.batch_size, o.batch_size);
  EXPECT_EQ(back.learning_rate, o.learning_rate);
  EXPECT_EQ(back.beta, o.beta);
  EXPECT_EQ(back.decay, o.decay);
  EXPECT_EQ(back.momentum, o.momentum);
  EXPECT_EQ(back.prior.prior_precision, o.prior.prior_precision);
  EXPECT_EQ(back.prior.bias_prior_precision, o.prior.bias_prior_precision);
  EXPECT_EQ(back.prior.noise_precision, o.prior.noise_precision);
  EXPECT_EQ(back.power_iterations, o.power_iterations);
  EXPECT_EQ(back.init_precision, o.init_precision);
  EXPECT_EQ(back.eig_threshold, o.eig_threshold);
  EXPECT_EQ(back.precision, o.precision);
  EXPECT_EQ(back.eig_solver, o.eig_solver);
  // Fields added later are covered by the printed forms agreeing.
  EXPECT_EQ(SlangOptionsSchema().ToParams(back), params);
}

TEST(OptionsSchemaTest, ApplyLeavesUnnamedFieldsAlone) {
  const OptionsSchema<TestOptions> schema = TestSchema();
  TestOptions o;
  ASSERT_TRUE(schema.Apply({{"count", "9"}, {"flag", "true"}}, &o).ok());
  EXPECT_EQ(o.count, 9);
  EXPECT_TRUE(o.flag);
  EXPECT_EQ(o.rate, 0.1);
  EXPECT_EQ(o.mode, "fast");
}

TEST(OptionsSchemaTest, BadValuesNameKeyAndType) {
  const OptionsSchema<TestOptions> schema = TestSchema();
  TestOptions o;
  absl::Status s = schema.Apply({{"flag", "maybe"}}, &o);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(s), AllOf(HasSubstr("'flag'"), HasSubstr("'maybe'"),
                            HasSubstr("bool")));
  s = schema.Apply({{"count", "99999999999"}}, &o);  // overflows int
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(s), AllOf(HasSubstr("'count'"), HasSubstr("int")));
}

TEST(OptionsSchemaTest, DescribeListsFieldsWithTypesAndDefaults) {
  const std::vector<ParamInfo> info = TestSchema().Describe();
  ASSERT_EQ(info.size(), 5u);
  EXPECT_EQ(info[0].name, "count");
  EXPECT_EQ(info[0].type, "int");
  EXPECT_EQ(info[0].default_value, "3");
  EXPECT_EQ(info[0].help, "an int");
  EXPECT_EQ(info[1].type, "int");
  EXPECT_EQ(info[1].default_value, "1099511627776");
  EXPECT_EQ(info[2].type, "double");
  EXPECT_EQ(info[2].default_value, "0.1");
  EXPECT_EQ(info[3].type, "bool");
  EXPECT_EQ(info[3].default_value, "false");
  EXPECT_EQ(info[4].type, "string");
  EXPECT_EQ(info[4].default_value, "fast");
}

// ------------------------------------------------- ParseParamAssignment

TEST(ParseParamAssignmentTest, ParsesKeyValue) {
  ParamMap params;
  ASSERT_TRUE(ParseParamAssignment("k=v", &params).ok());
  ASSERT_TRUE(ParseParamAssignment(" rank = 4 ", &params).ok());
  ASSERT_TRUE(ParseParamAssignment("expr=a=b", &params).ok());
  ASSERT_TRUE(ParseParamAssignment("empty=", &params).ok());
  EXPECT_THAT(params,
              UnorderedElementsAre(Pair("k", "v"), Pair("rank", "4"),
                                   Pair("expr", "a=b"), Pair("empty", "")));
  // A later assignment replaces an earlier one.
  ASSERT_TRUE(ParseParamAssignment("k=w", &params).ok());
  EXPECT_EQ(params.at("k"), "w");
}

TEST(ParseParamAssignmentTest, MissingEqualsIsInvalid) {
  ParamMap params;
  const absl::Status s = ParseParamAssignment("novalue", &params);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(s), AllOf(HasSubstr("'novalue'"), HasSubstr("key=value")));
  EXPECT_TRUE(params.empty());
}

TEST(ParseParamAssignmentTest, EmptyKeyIsInvalid) {
  ParamMap params;
  for (const char* text : {"=v", "  =v"}) {
    const absl::Status s = ParseParamAssignment(text, &params);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_THAT(Msg(s), HasSubstr("empty key")) << text;
  }
  EXPECT_TRUE(params.empty());
}

// ------------------------------------------------------- bound checks

TEST(CheckTest, IntRange) {
  EXPECT_TRUE(CheckIntRange("n", 1, 1, 3).ok());
  EXPECT_TRUE(CheckIntRange("n", 3, 1, 3).ok());
  const absl::Status s = CheckIntRange("n", 4, 1, 3);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Msg(s), "n = 4 must be in [1, 3]");
}

TEST(CheckTest, RangeIsOpenBelowUnlessInclusive) {
  EXPECT_FALSE(CheckRange("x", 0.0, 0.0, 1.0).ok());
  EXPECT_TRUE(CheckRange("x", 0.0, 0.0, 1.0, true).ok());
  EXPECT_TRUE(CheckRange("x", 1.0, 0.0, 1.0).ok());
  EXPECT_FALSE(CheckRange("x", 1.5, 0.0, 1.0).ok());
  const absl::Status s =
      CheckRange("x", std::numeric_limits<double>::quiet_NaN(), 0.0, 1.0, true);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(s), AllOf(HasSubstr("x = nan"), HasSubstr("[0, 1]")));
}

TEST(CheckTest, PositiveAndOneOf) {
  EXPECT_TRUE(CheckPositive("p", 1e-300).ok());
  EXPECT_FALSE(CheckPositive("p", 0.0).ok());
  EXPECT_FALSE(
      CheckPositive("p", std::numeric_limits<double>::infinity()).ok());
  EXPECT_TRUE(CheckOneOf("m", "b", {"a", "b"}).ok());
  const absl::Status s = CheckOneOf("m", "c", {"a", "b"});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Msg(s), "m = 'c' must be one of: a, b");
}

// README.md's method table (in "Using bnnctl") has one row per registered
// method, and no other: its first column lists the names, e.g. "| `bali`,
// `bali_w`, `bali_l` | ...".
TEST(MethodRegistryTest, ReadmeMethodTableListsEveryMethod) {
  std::ifstream in(std::string(BNN_SOURCE_DIR) + "/README.md");
  ASSERT_TRUE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  const std::string readme = text.str();
  const size_t header = readme.find("| Method | Posterior family |");
  ASSERT_NE(header, std::string::npos) << "README.md has no method table";
  std::set<std::string> listed;
  std::istringstream rows(readme.substr(header));
  std::string line;
  std::getline(rows, line);  // the header
  std::getline(rows, line);  // |---|
  const std::regex name("`([a-z_]+)`");
  while (std::getline(rows, line) && !line.empty() && line[0] == '|') {
    const std::string first = line.substr(1, line.find('|', 1) - 1);
    for (std::sregex_iterator it(first.begin(), first.end(), name), end;
         it != end; ++it) {
      EXPECT_TRUE(listed.insert((*it)[1]).second)
          << "listed twice: " << (*it)[1];
    }
  }
  const std::vector<std::string> names = MethodRegistry::Builtin().Names();
  EXPECT_EQ(listed, std::set<std::string>(names.begin(), names.end()));
}

}  // namespace
}  // namespace bnn
