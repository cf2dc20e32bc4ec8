// Readers: CSV (header, target by name or index, blank lines, CRLF, quoting,
// classification, errors naming line and column), gzip'd files, the UCI split
// layout and IDX image/label files. Every fixture file is written into a
// fresh temporary directory by the test itself.
#include "bnn/data/readers.h"

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <stdlib.h>
#include <string>
#include <vector>
#include <zlib.h>

#include "absl/status/status.h"
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "bnn/data/dataset.h"

#include "tests/test_util/test_util.h"

namespace bnn {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

using ::bnn::testing::Msg;

CsvOptions Target(const std::string& column, bool classification = false) {
  CsvOptions options;
  options.target_column = column;
  options.classification = classification;
  return options;
}

// A fresh directory per test, removed afterwards.
class ReadersTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(temp_.path().empty()); }

  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

  std::string Write(const std::string& name, const std::string& contents) {
    const std::string path = Path(name);
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
    EXPECT_TRUE(out.good()) << path;
    return path;
  }

  std::string WriteGzip(const std::string& name, const std::string& contents) {
    const std::string path = Path(name);
    gzFile f = gzopen(path.c_str(), "wb");
    EXPECT_NE(f, nullptr) << path;
    if (f == nullptr) return path;
    EXPECT_EQ(
        gzwrite(f, contents.data(), static_cast<unsigned>(contents.size())),
        static_cast<int>(contents.size()));
    EXPECT_EQ(gzclose(f), Z_OK);
    return path;
  }

  ::bnn::testing::ScopedTempDir temp_{"bnn_readers"};
  const std::string& dir_ = temp_.path();
};

// ---------------------------------------------------------------- ParseCsv

TEST(ParseCsvTest, ReadsHeaderRowsAndTargetByName) {
  const absl::StatusOr<Dataset> d =
      ParseCsv("a,b,y\n1,2,3\n4,5,6\n", Target("y"));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->task, Task::kRegression);
  EXPECT_EQ(d->num_features, 2);
  EXPECT_EQ(d->num_rows(), 2);
  EXPECT_THAT(d->features, ElementsAre(1, 2, 4, 5));
  EXPECT_THAT(d->targets, ElementsAre(3, 6));
  EXPECT_THAT(d->feature_names, ElementsAre("a", "b"));
  EXPECT_EQ(d->target_name, "y");
  EXPECT_TRUE(d->Validate().ok());
}

TEST(ParseCsvTest, EmptyTargetMakesEveryColumnAFeature) {
  const absl::StatusOr<Dataset> d = ParseCsv("a,b\n1,2\n3,4\n", Target(""));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->num_features, 2);
  EXPECT_THAT(d->features, ElementsAre(1, 2, 3, 4));
  EXPECT_THAT(d->targets, ElementsAre(0, 0));
  EXPECT_THAT(d->feature_names, ElementsAre("a", "b"));
  const absl::StatusOr<Dataset> one = ParseCsv("x\n5\n", Target(""));
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->num_features, 1);
}

TEST(ParseCsvTest, Utf8ByteOrderMarkIsIgnored) {
  const absl::StatusOr<Dataset> d =
      ParseCsv("\xEF\xBB\xBFy,a\n1,2\n", Target("y"));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_THAT(d->targets, ElementsAre(1));
  EXPECT_THAT(d->feature_names, ElementsAre("a"));
}

TEST(ParseCsvTest, TargetColumnInTheMiddleIsRemovedFromFeatures) {
  const absl::StatusOr<Dataset> d =
      ParseCsv("a,y,b\n1,-2.5,3e2\n4,5,6\n", Target("y"));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_THAT(d->features, ElementsAre(1, 300, 4, 6));
  EXPECT_THAT(d->targets, ElementsAre(-2.5, 5));
  EXPECT_THAT(d->feature_names, ElementsAre("a", "b"));
}

TEST(ParseCsvTest, TargetByZeroBasedIndex) {
  const absl::StatusOr<Dataset> d =
      ParseCsv("a,b,c\n1,2,3\n4,5,6\n", Target("0"));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->target_name, "a");
  EXPECT_THAT(d->targets, ElementsAre(1, 4));
  EXPECT_THAT(d->features, ElementsAre(2, 3, 5, 6));
}

TEST(ParseCsvTest, HeaderNameTakesPrecedenceOverIndex) {
  // The column named "0" is column 1, not column 0.
  const absl::StatusOr<Dataset> d = ParseCsv("x,0,z\n1,2,3\n", Target("0"));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->target_name, "0");
  EXPECT_THAT(d->targets, ElementsAre(2));
  EXPECT_THAT(d->features, ElementsAre(1, 3));
}

TEST(ParseCsvTest, BlankLinesAreIgnoredAnywhere) {
  const absl::StatusOr<Dataset> d =
      ParseCsv("\n  \na,y\n1,2\n\n \t\n3,4\n\n\n", Target("y"));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->num_rows(), 2);
  EXPECT_THAT(d->features, ElementsAre(1, 3));
  EXPECT_THAT(d->targets, ElementsAre(2, 4));
}

TEST(ParseCsvTest, CrlfLineEndingsIncludingTrailingBlankLine) {
  const absl::StatusOr<Dataset> d =
      ParseCsv("a,y\r\n1,2\r\n\r\n3,4\r\n\r\n", Target("y"));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->target_name, "y");  // no stray '\r'
  EXPECT_THAT(d->feature_names, ElementsAre("a"));
  EXPECT_THAT(d->features, ElementsAre(1, 3));
  EXPECT_THAT(d->targets, ElementsAre(2, 4));
}

TEST(ParseCsvTest, NoTrailingNewline) {
  const absl::StatusOr<Dataset> d = ParseCsv("a,y\n1,2\n3,4", Target("y"));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_THAT(d->targets, ElementsAre(2, 4));
}

TEST(ParseCsvTest, QuotedHeaderNamesAreUnquoted) {
  const absl::StatusOr<Dataset> d =
      ParseCsv("\"feature one\", \"y\"\n1,2\n", Target("y"));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_THAT(d->feature_names, ElementsAre("feature one"));
  EXPECT_EQ(d->target_name, "y");
  EXPECT_THAT(d->targets, ElementsAre(2));
}

TEST(ParseCsvTest, QuotedFieldsFollowRfc4180) {
  // A quoted header name may hold the delimiter, doubled quotes and a line
  // break; numbers may be quoted; records end in CRLF.
  const absl::StatusOr<Dataset> d = ParseCsv(
      "\"price, in $\",\"the \"\"best\"\" one\",\"two\r\nlines\",y\r\n"
      "\"1.5\",2, \"3\" ,4\r\n"
      "5,\"6\",7,\"8\"",
      Target("y"));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_THAT(d->feature_names,
              ElementsAre("price, in $", "the \"best\" one", "two\r\nlines"));
  EXPECT_THAT(d->features, ElementsAre(1.5, 2, 3, 5, 6, 7));
  EXPECT_THAT(d->targets, ElementsAre(4, 8));
  // A target named with a quoted comma is found by its name.
  const absl::StatusOr<Dataset> by_name =
      ParseCsv("x,\"y, observed\"\n1,2\n", Target("y, observed"));
  ASSERT_TRUE(by_name.ok()) << by_name.status();
  EXPECT_THAT(by_name->targets, ElementsAre(2));
  // An empty quoted field is a field (not a blank line), and not a number.
  const absl::StatusOr<Dataset> empty = ParseCsv("x\n\"\"\n", Target(""));
  EXPECT_THAT(Msg(empty.status()),
              AllOf(HasSubstr("line 2, column 1"), HasSubstr("''")));
}

TEST(ParseCsvTest, LinesAreCountedInsideQuotedFields) {
  // The header spans lines 1-2, so the bad row is line 4.
  const absl::StatusOr<Dataset> d =
      ParseCsv("\"a\nb\",y\n1,2\n3,x\n", Target("y"));
  EXPECT_THAT(Msg(d.status()),
              AllOf(HasSubstr("line 4, column 2"), HasSubstr("'x'")));
}

TEST(ParseCsvTest, MalformedQuotesNameTheLine) {
  absl::StatusOr<Dataset> d = ParseCsv("a,y\n1,2\n\"3,4\n", Target("y"));
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(d.status()),
              AllOf(HasSubstr("line 3"), HasSubstr("not closed")));
  d = ParseCsv("a,y\n\"1\"x,2\n", Target("y"));
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(d.status()),
              AllOf(HasSubstr("line 2"), HasSubstr("unexpected 'x'")));
}

TEST(ParseCsvTest, OtherDelimiter) {
  CsvOptions options = Target("y");
  options.delimiter = ';';
  const absl::StatusOr<Dataset> d = ParseCsv("a;y\n1.5;2\n", options);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_THAT(d->features, ElementsAre(1.5));
  EXPECT_THAT(d->targets, ElementsAre(2));
}

TEST(ParseCsvTest, ClassificationEncodesLabels) {
  const absl::StatusOr<Dataset> d =
      ParseCsv("x,label\n0.5,-1\n1.5,1\n2.5,-1\n", Target("label", true));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->task, Task::kBinary);
  EXPECT_EQ(d->num_classes, 2);
  EXPECT_THAT(d->class_values, ElementsAre(-1, 1));
  EXPECT_THAT(d->targets, ElementsAre(0, 1, 0));
  EXPECT_TRUE(d->Validate().ok());
}

TEST(ParseCsvTest, ClassificationWithThreeLabelsIsMulticlass) {
  const absl::StatusOr<Dataset> d =
      ParseCsv("x,c\n1,3\n2,1\n3,2\n", Target("c", true));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->task, Task::kMulticlass);
  EXPECT_EQ(d->num_classes, 3);
  EXPECT_THAT(d->targets, ElementsAre(2, 0, 1));
}

TEST(ParseCsvTest, ClassificationWithOneLabelFails) {
  const absl::StatusOr<Dataset> d =
      ParseCsv("x,c\n1,3\n2,3\n", Target("c", true));
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(d.status()), HasSubstr("at least 2 distinct labels"));
}

TEST(ParseCsvTest, EmptyTextIsAnError) {
  for (const char* text : {"", "\n", "  \r\n\n"}) {
    const absl::StatusOr<Dataset> d = ParseCsv(text, Target("y"));
    EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_THAT(Msg(d.status()), HasSubstr("empty")) << text;
  }
}

TEST(ParseCsvTest, HeaderOnlyIsAnError) {
  const absl::StatusOr<Dataset> d = ParseCsv("a,y\n\n", Target("y"));
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(d.status()), HasSubstr("no data rows"));
}

TEST(ParseCsvTest, ClassificationWithoutTargetIsAnError) {
  const absl::StatusOr<Dataset> d =
      ParseCsv("a,y\n1,2\n", Target("", /*classification=*/true));
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(d.status()), HasSubstr("target column"));
}

TEST(ParseCsvTest, SingleColumnHeaderIsAnError) {
  const absl::StatusOr<Dataset> d = ParseCsv("y\n1\n2\n", Target("y"));
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(d.status()),
              AllOf(HasSubstr("line 1"), HasSubstr("at least one feature")));
}

TEST(ParseCsvTest, RowWithTooFewFieldsNamesTheLine) {
  // Line numbers are 1-based and count blank lines.
  const absl::StatusOr<Dataset> d =
      ParseCsv("a,b,y\n1,2,3\n\n4,5\n", Target("y"));
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(d.status()),
              AllOf(HasSubstr("line 4 "), HasSubstr("2 fields"),
                    HasSubstr("header has 3")));
}

TEST(ParseCsvTest, RowWithTooManyFieldsNamesTheLine) {
  const absl::StatusOr<Dataset> d =
      ParseCsv("a,b,y\n1,2,3\n4,5,6,7\n", Target("y"));
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(d.status()),
              AllOf(HasSubstr("line 3 "), HasSubstr("more than 3")));
}

TEST(ParseCsvTest, NonNumberNamesLineColumnAndColumnName) {
  const absl::StatusOr<Dataset> d =
      ParseCsv("a,b,y\n1,2,3\n4,abc,6\n", Target("y"));
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(d.status()),
              AllOf(HasSubstr("line 3, column 2"), HasSubstr("'b'"),
                    HasSubstr("'abc'"), HasSubstr("not a finite number")));
}

TEST(ParseCsvTest, EmptyFieldIsNotANumber) {
  const absl::StatusOr<Dataset> d = ParseCsv("a,b,y\n1,,3\n", Target("y"));
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(d.status()),
              AllOf(HasSubstr("line 2, column 2"), HasSubstr("'b'")));
}

TEST(ParseCsvTest, NanAndInfAreRejectedWithTheirPosition) {
  absl::StatusOr<Dataset> d = ParseCsv("a,y\n1,2\nnan,3\n", Target("y"));
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(d.status()),
              AllOf(HasSubstr("line 3, column 1"), HasSubstr("'a'")));
  d = ParseCsv("a,y\n1,inf\n", Target("y"));
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(d.status()),
              AllOf(HasSubstr("line 2, column 2"), HasSubstr("'y'")));
}

// Found by csv_fuzz: blanks around fields were skipped even when the
// delimiter is itself a blank, so a tab after a quoted field and empty
// tab-separated fields disappeared.
TEST(ParseCsvTest, TabDelimiterIsNeverABlank) {
  CsvOptions options = Target("y");
  options.delimiter = '\t';
  absl::StatusOr<Dataset> d =
      ParseCsv("\"a\"\t\"b c\"\ty\n1\t 2 \t3\n", options);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_THAT(d->feature_names, ElementsAre("a", "b c"));
  EXPECT_THAT(d->features, ElementsAre(1, 2));
  EXPECT_THAT(d->targets, ElementsAre(3));
  d = ParseCsv("a\t\ty\n1\t2\t3\n", options);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_THAT(d->feature_names, ElementsAre("a", ""));
  d = ParseCsv("a\tb\ty\n1\t\t3\n", options);
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(d.status()), HasSubstr("line 2, column 2"));
}

TEST(ParseCsvTest, UnknownTargetColumnIsAnError) {
  absl::StatusOr<Dataset> d = ParseCsv("a,b\n1,2\n", Target("price"));
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(d.status()),
              AllOf(HasSubstr("'price'"), HasSubstr("[0, 2)")));
  // An index past the last column is unknown too.
  d = ParseCsv("a,b\n1,2\n", Target("2"));
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(d.status()), HasSubstr("'2'"));
}

// ----------------------------------------------------------------- ReadCsv

TEST_F(ReadersTest, ReadCsvReadsPlainAndGzipFilesAlike) {
  const std::string text = "a,b,y\n1,2,3\n4,5,6\n7,8,9\n";
  const std::string plain = Write("d.csv", text);
  const std::string gz = WriteGzip("d.csv.gz", text);
  // The gzip'd file really is compressed.
  std::ifstream raw(gz, std::ios::binary);
  char magic[2] = {0, 0};
  raw.read(magic, 2);
  ASSERT_EQ(static_cast<unsigned char>(magic[0]), 0x1f);
  ASSERT_EQ(static_cast<unsigned char>(magic[1]), 0x8b);

  for (const std::string& path : {plain, gz}) {
    const absl::StatusOr<Dataset> d = ReadCsv(path, Target("b"));
    ASSERT_TRUE(d.ok()) << path << ": " << d.status();
    EXPECT_THAT(d->features, ElementsAre(1, 3, 4, 6, 7, 9)) << path;
    EXPECT_THAT(d->targets, ElementsAre(2, 5, 8)) << path;
  }
}

TEST_F(ReadersTest, ReadCsvMissingFileIsNotFound) {
  const absl::StatusOr<Dataset> d =
      ReadCsv(Path("does_not_exist.csv"), Target("y"));
  EXPECT_EQ(d.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Msg(d.status()), HasSubstr("does_not_exist.csv"));
}

TEST_F(ReadersTest, ReadCsvErrorsNameTheFileAndLine) {
  const std::string path = WriteGzip("bad.csv.gz", "a,y\n1,2\n3,x\n");
  const absl::StatusOr<Dataset> d = ReadCsv(path, Target("y"));
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(d.status()),
              AllOf(HasSubstr("bad.csv.gz"), HasSubstr("line 3, column 2")));
}

// ------------------------------------------------------------------- UCI

class UciTest : public ReadersTest {
 protected:
  // 5 rows x 3 columns; the target is the middle column.
  void WriteValidLayout() {
    Write("data.txt",
          "1 10 100\n"
          "2\t20   200\n"
          "3 30 300\n"
          "\n"
          "4 40 400\n"
          "5 50 500\n");
    Write("index_features.txt", "0\n2\n");
    Write("index_target.txt", "1\n");
    Write("n_splits.txt", "2\n");
    Write("n_hidden.txt", "100\n");
    Write("index_train_0.txt", "0\n1\n2\n");
    Write("index_test_0.txt", "3\n4\n");
    // numpy.savetxt writes indices as floats.
    Write("index_train_1.txt",
          "4.000000000000000000e+00\n1.000000000000000000e+00\n"
          "3.000000000000000000e+00\n");
    Write("index_test_1.txt", "0 2\n");
  }
};

TEST_F(UciTest, ReadsAllRowsAndSplits) {
  WriteValidLayout();
  const absl::StatusOr<UciDataset> uci = ReadUciDataset(dir_);
  ASSERT_TRUE(uci.ok()) << uci.status();
  EXPECT_EQ(uci->num_splits(), 2);
  EXPECT_EQ(uci->n_hidden, 100);
  EXPECT_EQ(uci->all.task, Task::kRegression);
  EXPECT_EQ(uci->all.num_features, 2);
  EXPECT_EQ(uci->all.num_rows(), 5);
  EXPECT_THAT(uci->all.targets, ElementsAre(10, 20, 30, 40, 50));
  EXPECT_TRUE(uci->all.Validate().ok());

  const Dataset train0 = uci->Train(0);
  EXPECT_THAT(train0.features, ElementsAre(1, 100, 2, 200, 3, 300));
  EXPECT_THAT(train0.targets, ElementsAre(10, 20, 30));
  const Dataset test0 = uci->Test(0);
  EXPECT_THAT(test0.features, ElementsAre(4, 400, 5, 500));
  EXPECT_THAT(test0.targets, ElementsAre(40, 50));

  const Dataset train1 = uci->Train(1);
  EXPECT_THAT(train1.targets, ElementsAre(50, 20, 40));  // file order
  EXPECT_THAT(train1.features, ElementsAre(5, 500, 2, 200, 4, 400));
  const Dataset test1 = uci->Test(1);
  EXPECT_THAT(test1.targets, ElementsAre(10, 30));
}

TEST_F(UciTest, MissingNHiddenDefaultsTo50) {
  WriteValidLayout();
  std::filesystem::remove(Path("n_hidden.txt"));
  const absl::StatusOr<UciDataset> uci = ReadUciDataset(dir_);
  ASSERT_TRUE(uci.ok()) << uci.status();
  EXPECT_EQ(uci->n_hidden, 50);
}

TEST_F(UciTest, OutOfRangeSplitIndexNamesFileAndValue) {
  WriteValidLayout();
  Write("index_test_1.txt", "0\n5\n");  // 5 rows: valid indices are 0..4
  const absl::StatusOr<UciDataset> uci = ReadUciDataset(dir_);
  EXPECT_EQ(uci.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(uci.status()), AllOf(HasSubstr("index_test_1.txt:2"),
                                       HasSubstr("'5'"), HasSubstr("[0, 5)")));
}

TEST_F(UciTest, OutOfRangeColumnIndexIsAnError) {
  WriteValidLayout();
  Write("index_target.txt", "3\n");  // 3 columns
  const absl::StatusOr<UciDataset> uci = ReadUciDataset(dir_);
  EXPECT_EQ(uci.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(uci.status()),
              AllOf(HasSubstr("index_target.txt:1"), HasSubstr("[0, 3)")));
}

TEST_F(UciTest, RaggedDataLineNamesTheLine) {
  WriteValidLayout();
  Write("data.txt", "1 10 100\n2 20 200\n3 30\n4 40 400\n");
  const absl::StatusOr<UciDataset> uci = ReadUciDataset(dir_);
  EXPECT_EQ(uci.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(uci.status()),
              AllOf(HasSubstr("data.txt: line 3"), HasSubstr("2 columns"),
                    HasSubstr("line 1 has 3")));
}

TEST_F(UciTest, NonNumberInDataNamesLineAndColumn) {
  WriteValidLayout();
  Write("data.txt", "1 10 100\n2 ? 200\n");
  const absl::StatusOr<UciDataset> uci = ReadUciDataset(dir_);
  EXPECT_EQ(uci.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(uci.status()),
              AllOf(HasSubstr("line 2, column 2"), HasSubstr("'?'")));
}

TEST_F(UciTest, MissingNSplitsIsNotFound) {
  WriteValidLayout();
  std::filesystem::remove(Path("n_splits.txt"));
  const absl::StatusOr<UciDataset> uci = ReadUciDataset(dir_);
  EXPECT_EQ(uci.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Msg(uci.status()), HasSubstr("n_splits.txt"));
}

TEST_F(UciTest, MissingSplitFileIsNotFound) {
  WriteValidLayout();
  std::filesystem::remove(Path("index_train_1.txt"));
  const absl::StatusOr<UciDataset> uci = ReadUciDataset(dir_);
  EXPECT_EQ(uci.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Msg(uci.status()), HasSubstr("index_train_1.txt"));
}

TEST_F(UciTest, BadNSplitsIsInvalid) {
  WriteValidLayout();
  Write("n_splits.txt", "0\n");
  const absl::StatusOr<UciDataset> uci = ReadUciDataset(dir_);
  EXPECT_EQ(uci.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(uci.status()), HasSubstr("n_splits.txt"));
}

TEST_F(UciTest, MissingDirectoryIsNotFound) {
  const absl::StatusOr<UciDataset> uci = ReadUciDataset(Path("nope"));
  EXPECT_EQ(uci.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Msg(uci.status()), HasSubstr("data.txt"));
}

// ------------------------------------------------------------------- IDX

std::string BigEndian(uint32_t v) {
  std::string out(4, '\0');
  for (int i = 0; i < 4; ++i)
    out[i] = static_cast<char>((v >> (24 - 8 * i)) & 0xff);
  return out;
}

std::string IdxFile(uint32_t magic, const std::vector<uint32_t>& dims,
                    const std::vector<uint8_t>& payload) {
  std::string out = BigEndian(magic);
  for (uint32_t d : dims) out += BigEndian(d);
  out.append(payload.begin(), payload.end());
  return out;
}

// 3 images of 2 x 2 pixels.
std::string Images() {
  return IdxFile(0x00000803, {3, 2, 2},
                 {0, 255, 51, 102, 1, 2, 3, 4, 255, 0, 0, 128});
}
std::string Labels(const std::vector<uint8_t>& labels) {
  return IdxFile(0x00000801, {static_cast<uint32_t>(labels.size())}, labels);
}

class IdxTest : public ReadersTest {};

TEST_F(IdxTest, ReadsPlainImagesAndLabelsWithDefaultScale) {
  const std::string images = Write("images-idx3-ubyte", Images());
  const std::string labels = Write("labels-idx1-ubyte", Labels({0, 2, 1}));
  const absl::StatusOr<Dataset> d = ReadIdx(images, labels);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->num_rows(), 3);
  EXPECT_EQ(d->num_features, 4);
  ASSERT_EQ(d->features.size(), 12u);
  EXPECT_DOUBLE_EQ(d->features[0], 0.0);
  EXPECT_DOUBLE_EQ(d->features[1], 1.0);
  EXPECT_DOUBLE_EQ(d->features[2], 0.2);
  EXPECT_DOUBLE_EQ(d->features[3], 0.4);
  EXPECT_DOUBLE_EQ(d->features[4], 1.0 / 255);
  EXPECT_DOUBLE_EQ(d->features[11], 128.0 / 255);
  EXPECT_THAT(d->targets, ElementsAre(0, 2, 1));
  EXPECT_EQ(d->task, Task::kMulticlass);
  EXPECT_EQ(d->num_classes, 3);
  EXPECT_THAT(d->class_values, ElementsAre(0, 1, 2));
  EXPECT_TRUE(d->Validate().ok());
}

TEST_F(IdxTest, ReadsGzipFilesAndHonoursScale) {
  const std::string images = WriteGzip("images-idx3-ubyte.gz", Images());
  const std::string labels =
      WriteGzip("labels-idx1-ubyte.gz", Labels({1, 0, 1}));
  IdxOptions options;
  options.scale = 1.0;
  const absl::StatusOr<Dataset> d = ReadIdx(images, labels, options);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_THAT(d->features,
              ElementsAre(0, 255, 51, 102, 1, 2, 3, 4, 255, 0, 0, 128));
  EXPECT_EQ(d->task, Task::kBinary);
  EXPECT_EQ(d->num_classes, 2);
  EXPECT_THAT(d->targets, ElementsAre(1, 0, 1));
}

TEST_F(IdxTest, LabelIndicesAreKeptNotCompacted) {
  // Labels {3, 7, 3}: class indices stay 3 and 7, so there are 8 classes.
  const std::string images = Write("images", Images());
  const std::string labels = Write("labels", Labels({3, 7, 3}));
  const absl::StatusOr<Dataset> d = ReadIdx(images, labels);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->num_classes, 8);
  EXPECT_THAT(d->targets, ElementsAre(3, 7, 3));
  EXPECT_TRUE(d->Validate().ok());
}

TEST_F(IdxTest, WithoutLabelsTargetsAreZeroRegression) {
  const std::string images = WriteGzip("images.gz", Images());
  const absl::StatusOr<Dataset> d = ReadIdx(images, "");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->task, Task::kRegression);
  EXPECT_EQ(d->num_classes, 0);
  EXPECT_THAT(d->targets, ElementsAre(0, 0, 0));
}

TEST_F(IdxTest, BadMagicIsInvalid) {
  std::string bytes = Images();
  bytes[0] = 0x12;
  const std::string images = Write("images", bytes);
  const absl::StatusOr<Dataset> d = ReadIdx(images, "");
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(d.status()),
              AllOf(HasSubstr("images"), HasSubstr("bad magic")));
}

TEST_F(IdxTest, NonUbyteElementTypeIsInvalid) {
  // 0x0D is float32.
  const std::string images =
      Write("images", IdxFile(0x00000D03, {1, 1, 1}, {0, 0, 0, 0}));
  const absl::StatusOr<Dataset> d = ReadIdx(images, "");
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(d.status()),
              AllOf(HasSubstr("0xd"), HasSubstr("unsigned byte")));
}

TEST_F(IdxTest, TruncatedPayloadIsDataLoss) {
  std::string bytes = Images();
  bytes.pop_back();
  const std::string images = WriteGzip("images.gz", bytes);
  const absl::StatusOr<Dataset> d = ReadIdx(images, "");
  EXPECT_EQ(d.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(Msg(d.status()),
              AllOf(HasSubstr("images.gz"), HasSubstr("11 bytes"),
                    HasSubstr("declares 12")));
}

TEST_F(IdxTest, TruncatedHeaderIsDataLoss) {
  const std::string images =
      Write("images", Images().substr(0, 10));  // magic + 1.5 dims
  const absl::StatusOr<Dataset> d = ReadIdx(images, "");
  EXPECT_EQ(d.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(Msg(d.status()), HasSubstr("truncated"));
}

TEST_F(IdxTest, TruncatedGzipStreamIsDataLoss) {
  const std::string full = WriteGzip("full.gz", Images());
  std::ifstream in(full, std::ios::binary);
  std::string gz((std::istreambuf_iterator<char>(in)),
                 std::istreambuf_iterator<char>());
  ASSERT_GT(gz.size(), 20u);
  const std::string images = Write("cut.gz", gz.substr(0, gz.size() - 12));
  const absl::StatusOr<Dataset> d = ReadIdx(images, "");
  EXPECT_EQ(d.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(Msg(d.status()), HasSubstr("cut.gz"));
}

TEST_F(IdxTest, LabelCountMismatchIsInvalid) {
  const std::string images = Write("images", Images());
  const std::string labels = Write("labels-short", Labels({0, 1}));
  const absl::StatusOr<Dataset> d = ReadIdx(images, labels);
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(d.status()),
              AllOf(HasSubstr("labels-short"), HasSubstr("3 entries")));
}

TEST_F(IdxTest, ImageFileAsLabelsIsInvalid) {
  const std::string images = Write("images", Images());
  const absl::StatusOr<Dataset> d = ReadIdx(images, images);
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(d.status()), HasSubstr("rank-1"));
}

TEST_F(IdxTest, RankOneImageFileIsInvalid) {
  const std::string images = Write("images", Labels({1, 2, 3}));
  const absl::StatusOr<Dataset> d = ReadIdx(images, "");
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(d.status()), HasSubstr("rank >= 2"));
}

// Found by idx_fuzz: a zero dimension gave an empty dataset (no rows, or
// rows of no features), and dimensions whose product overflows 64 bits
// matched a short payload.
TEST(ParseIdxTest, ZeroDimensionIsInvalid) {
  absl::StatusOr<Dataset> d = ParseIdx(IdxFile(0x00000802, {0, 2}, {}), "");
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(d.status()),
              AllOf(HasSubstr("images"), HasSubstr("dimension 0 is 0")));
  d = ParseIdx(IdxFile(0x00000802, {2, 0}, {}), "");
  EXPECT_THAT(Msg(d.status()), HasSubstr("dimension 1 is 0"));
}

TEST(ParseIdxTest, OverflowingDimensionsAreDataLoss) {
  const absl::StatusOr<Dataset> d =
      ParseIdx(IdxFile(0x00000804, {65536, 65536, 65536, 65536}, {1, 2}), "");
  EXPECT_EQ(d.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(Msg(d.status()),
              AllOf(HasSubstr("2 bytes"), HasSubstr("more than 2^64")));
}

TEST(ParseIdxTest, ParsesBytesInMemory) {
  const absl::StatusOr<Dataset> d = ParseIdx(Images(), Labels({2, 0, 1}));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->num_rows(), 3);
  EXPECT_EQ(d->num_features, 4);
  EXPECT_THAT(d->targets, ElementsAre(2, 0, 1));
  EXPECT_EQ(ParseIdx(Images(), Labels({0, 1})).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(ParseIdx(Images(), Labels({0, 1})).status()),
              HasSubstr("labels: expected a rank-1"));
}

TEST_F(IdxTest, MissingFilesAreNotFound) {
  absl::StatusOr<Dataset> d = ReadIdx(Path("no-images"), "");
  EXPECT_EQ(d.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Msg(d.status()), HasSubstr("no-images"));
  const std::string images = Write("images", Images());
  d = ReadIdx(images, Path("no-labels"));
  EXPECT_EQ(d.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Msg(d.status()), HasSubstr("no-labels"));
}

}  // namespace
}  // namespace bnn
