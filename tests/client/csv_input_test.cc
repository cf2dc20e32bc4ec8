#include "client/csv_input.h"

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace bnn::client {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ParseFeatureCsvTest, WithoutTargetEveryColumnIsAFeature) {
  absl::StatusOr<FeatureTable> table =
      ParseFeatureCsv("a,b\n1,2\n\n3,4.5\n", "");
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_THAT(table->feature_names, ElementsAre("a", "b"));
  EXPECT_EQ(table->num_features, 2);
  EXPECT_EQ(table->num_rows(), 2);
  EXPECT_THAT(table->features, ElementsAre(1, 2, 3, 4.5));
}

TEST(ParseFeatureCsvTest, SingleColumnAndCrLfLineEndings) {
  absl::StatusOr<FeatureTable> table = ParseFeatureCsv("x\r\n-8\r\n8\r\n", "");
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_THAT(table->feature_names, ElementsAre("x"));
  EXPECT_THAT(table->features, ElementsAre(-8, 8));
}

TEST(ParseFeatureCsvTest, TargetByNameOrIndexIsLeftOut) {
  absl::StatusOr<FeatureTable> by_name = ParseFeatureCsv("x,y,z\n1,2,3\n", "y");
  ASSERT_TRUE(by_name.ok()) << by_name.status();
  EXPECT_THAT(by_name->feature_names, ElementsAre("x", "z"));
  EXPECT_THAT(by_name->features, ElementsAre(1, 3));

  absl::StatusOr<FeatureTable> by_index =
      ParseFeatureCsv("x,y,z\n1,2,3\n", "0");
  ASSERT_TRUE(by_index.ok()) << by_index.status();
  EXPECT_THAT(by_index->feature_names, ElementsAre("y", "z"));
}

TEST(ParseFeatureCsvTest, RaggedRowReportsTheUsersLineAndFieldCounts) {
  absl::StatusOr<FeatureTable> table = ParseFeatureCsv("a,b\n1,2\n3\n", "");
  ASSERT_FALSE(table.ok());
  EXPECT_EQ(table.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(table.status().message(),
              HasSubstr("line 3 has 1 fields; the header has 2"));
}

TEST(ParseFeatureCsvTest, BadNumberReportsLineAndColumn) {
  absl::StatusOr<FeatureTable> table =
      ParseFeatureCsv("a,b\n1,2\n3,oops\n", "");
  ASSERT_FALSE(table.ok());
  EXPECT_THAT(table.status().message(), HasSubstr("line 3, column 2"));
  EXPECT_THAT(table.status().message(), HasSubstr("oops"));
}

TEST(ParseFeatureCsvTest, NonFiniteValuesAreRejected) {
  for (const char* value : {"nan", "inf", "-inf"}) {
    absl::StatusOr<FeatureTable> table =
        ParseFeatureCsv(std::string("x\n1\n") + value + "\n", "");
    ASSERT_FALSE(table.ok()) << value;
    EXPECT_THAT(table.status().message(), HasSubstr("line 3, column 1"));
  }
}

TEST(ParseFeatureCsvTest, EmptyOrHeaderOnlyInputIsAnError) {
  EXPECT_FALSE(ParseFeatureCsv("", "").ok());
  EXPECT_FALSE(ParseFeatureCsv("\n\n", "").ok());
  EXPECT_FALSE(ParseFeatureCsv("x,y\n", "").ok());
  EXPECT_FALSE(ParseFeatureCsv("x,y\n1,2\n", "nope").ok());
}

TEST(ReadFeatureCsvTest, ReadsAFileAndPrefixesErrorsWithThePath) {
  const std::string path =
      testing::TempDir() + "/read_feature_csv_test_input.csv";
  {
    std::ofstream out(path);
    out << "x\n0.5\n1.5\n";
  }
  absl::StatusOr<FeatureTable> table = ReadFeatureCsv(path, "");
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_THAT(table->features, ElementsAre(0.5, 1.5));

  {
    std::ofstream out(path);
    out << "x\nbad\n";
  }
  table = ReadFeatureCsv(path, "");
  ASSERT_FALSE(table.ok());
  EXPECT_THAT(table.status().message(), HasSubstr(path + ": line 2"));
  std::remove(path.c_str());

  table = ReadFeatureCsv(path, "");
  ASSERT_FALSE(table.ok());
  EXPECT_EQ(table.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(table.status().message(), HasSubstr(path));
}

TEST(ParseFeatureCsvTest, QuotedFieldsAndCrLf) {
  absl::StatusOr<FeatureTable> table =
      ParseFeatureCsv("\"a, first\",\"say \"\"b\"\"\",y\r\n\"1\",2,3\r\n", "y");
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_THAT(table->feature_names, ElementsAre("a, first", "say \"b\""));
  EXPECT_THAT(table->features, ElementsAre(1, 2));
}

// RFC 4180 in the rows too, through the stdin path bnnctl takes for
// `--csv -`: quoted numbers, a quoted header holding a comma, a doubled
// quote and a line break, CRLF records; an unclosed quote names its line.
TEST(ReadCsvInputTest, QuotedFieldsFromStandardInput) {
  std::istringstream input(
      "\"x, in \"\"m\"\"\",\"two\r\nlines\",y\r\n\"1.5\", 2 ,\"-3\"\r\n"
      "4,\"5\",6\r\n");
  CsvOptions options;
  options.target_column = "y";
  absl::StatusOr<Dataset> data = ReadCsvInput("-", options, input);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_THAT(data->feature_names, ElementsAre("x, in \"m\"", "two\r\nlines"));
  EXPECT_THAT(data->features, ElementsAre(1.5, 2, 4, 5));
  EXPECT_THAT(data->targets, ElementsAre(-3, 6));

  std::istringstream unclosed("x,y\r\n1,\"2\r\n");
  absl::StatusOr<FeatureTable> table = ReadFeatureCsv("-", "", unclosed);
  EXPECT_EQ(table.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(table.status().message(),
              HasSubstr("line 2: a quoted field is not closed"));
}

TEST(ReadCsvInputTest, DashReadsStandardInput) {
  std::istringstream input("x,y\n1,10\n2,20\n");
  CsvOptions options;
  options.target_column = "y";
  absl::StatusOr<Dataset> data = ReadCsvInput("-", options, input);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_THAT(data->features, ElementsAre(1, 2));
  EXPECT_THAT(data->targets, ElementsAre(10, 20));

  std::istringstream features("x\n0.5\n");
  absl::StatusOr<FeatureTable> table = ReadFeatureCsv("-", "", features);
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_THAT(table->features, ElementsAre(0.5));

  // Errors name the source as a file path would be named.
  std::istringstream bad("x\nbad\n");
  table = ReadFeatureCsv("-", "", bad);
  EXPECT_EQ(table.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(table.status().message(), HasSubstr("stdin: line 2, column 1"));
}

TEST(CheckSameFeaturesTest, SameNamesInTheSameOrderFit) {
  EXPECT_TRUE(CheckSameFeatures({"a", "b"}, {"a", "b"}, 2).ok());
  // A dataset uploaded without names only constrains the count.
  EXPECT_TRUE(CheckSameFeatures({"a", "b"}, {}, 2).ok());
}

TEST(CheckSameFeaturesTest, WrongCountOrSwappedColumnsAreRejected) {
  absl::Status status = CheckSameFeatures({"a"}, {"a", "b"}, 2);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              HasSubstr("the file has 1 feature columns; the dataset has 2"));

  status = CheckSameFeatures({"b", "a"}, {"a", "b"}, 2);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              HasSubstr("feature column 0 is 'b'; the dataset's is 'a' "
                        "(features: a, b)"));
}

}  // namespace
}  // namespace bnn::client
