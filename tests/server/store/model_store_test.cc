#include "server/store/model_store.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "bnn/status.h"

#include "tests/server/server_test_util.h"
#include "tests/server/store/store_dir.h"

namespace bnn::server {
namespace {

using ::bnn::server::testutil::StatusIs;
using ::bnn::server::testutil::StoreDir;
using ::bnn::server::testutil::TempDir;
using ::bnn::server::testutil::TinySnapshot;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;

std::vector<std::string> SnapshotsOf(const Model& model) {
  std::vector<std::string> out;
  for (const auto& v : model.versions) out.push_back(v.snapshot_id());
  return out;
}

// The aliases of `model` but `latest`, with the versions they name.
std::map<std::string, int64_t> UserAliasesOf(const Model& model) {
  std::map<std::string, int64_t> out;
  for (const auto& a : model.aliases) {
    if (a.alias() != kLatestAlias) out[a.alias()] = a.version();
  }
  return out;
}

class ModelStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    snapshots_ = std::make_unique<SnapshotStore>(dir_.metadata(), dir_.blobs());
    for (uint64_t seed : {1, 2, 3}) {
      snapshot_ids_.push_back(
          snapshots_->Create(TinySnapshot(seed))->snapshot_id());
    }
  }
  // Reopens the data directory (as a restart would) and the stores on it.
  std::unique_ptr<ModelStore> Open(ModelStore::Options options = {}) {
    snapshots_.reset();
    dir_.Reopen();
    snapshots_ = std::make_unique<SnapshotStore>(dir_.metadata(), dir_.blobs());
    absl::StatusOr<std::unique_ptr<ModelStore>> store =
        ModelStore::Open(options, snapshots_.get());
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? *std::move(store) : nullptr;
  }
  const std::string& snap(int i) const { return snapshot_ids_[i]; }

  ResolvedModel Resolve(const ModelStore& store, const std::string& ref) {
    const absl::StatusOr<ModelRef> parsed = ParseModelRef("model", ref);
    EXPECT_TRUE(parsed.ok()) << parsed.status();
    const absl::StatusOr<ResolvedModel> resolved = store.Resolve(*parsed);
    EXPECT_TRUE(resolved.ok()) << ref << ": " << resolved.status();
    return resolved.value_or(ResolvedModel{});
  }

  TempDir temp_;
  StoreDir dir_{temp_.path() + "/data"};
  std::unique_ptr<SnapshotStore> snapshots_;
  std::vector<std::string> snapshot_ids_;
};

TEST(ModelRefTest, ParsesTheThreeForms) {
  const ModelRef plain = *ParseModelRef("model", "fraud.v2-eu_1");
  EXPECT_EQ(plain.name, "fraud.v2-eu_1");
  EXPECT_EQ(plain.alias, "latest");
  EXPECT_EQ(plain.version, 0);
  const ModelRef aliased = *ParseModelRef("model", "m@stable");
  EXPECT_EQ(aliased.name, "m");
  EXPECT_EQ(aliased.alias, "stable");
  const ModelRef versioned = *ParseModelRef("model", "m:12");
  EXPECT_EQ(versioned.name, "m");
  EXPECT_EQ(versioned.version, 12);
  EXPECT_TRUE(versioned.alias.empty());
}

TEST(ModelRefTest, RefusesOtherForms) {
  for (const char* ref :
       {"", "@stable", "m@", "m@Stable", "m@1abc", "m:", "m:0", "m:-1", "m:+3",
        "m:1x", "m:99999999999999999999", ".m", "-m", "m/x", "m n", "m@a@b",
        "m:1@a"}) {
    EXPECT_THAT(ParseModelRef("model", ref).status(),
                StatusIs(absl::StatusCode::kInvalidArgument, "model"))
        << ref;
  }
  EXPECT_THAT(ParseModelRef("model", std::string(300, 'm')).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "model has 300 bytes; model references have at most"));
}

TEST(ModelRefTest, NamesAndAliases) {
  EXPECT_TRUE(ValidateModelName("name", std::string(128, 'a')).ok());
  EXPECT_THAT(ValidateModelName("name", std::string(129, 'a')),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "name has 129 characters; model names have at most "
                       "128"));
  EXPECT_THAT(ValidateModelName("name", ""),
              StatusIs(absl::StatusCode::kInvalidArgument, "name is required"));
  EXPECT_THAT(ValidateModelName("name", "../etc"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "name '../etc' is not a model name"));
  EXPECT_TRUE(ValidateUserAlias("alias", "stable").ok());
  EXPECT_TRUE(ValidateUserAlias("alias", "canary-2_b").ok());
  EXPECT_THAT(ValidateUserAlias("alias", "latest"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "alias is 'latest', which always names the newest"));
  EXPECT_THAT(ValidateUserAlias("alias", "123"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "alias '123' is not an alias"));
  EXPECT_THAT(ValidateUserAlias("alias", std::string(65, 'a')),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "alias has 65 characters; aliases have at most 64"));
}

TEST_F(ModelStoreTest, PublishNumbersVersionsAndMovesLatest) {
  std::unique_ptr<ModelStore> store = Open();
  const Model first = *store->Publish("m", snap(0), {"stable"});
  EXPECT_EQ(LatestVersion(first), 1);
  EXPECT_THAT(AliasesOf(first, 1), ElementsAre("latest", "stable"));
  const Model second = *store->Publish("m", snap(1));
  EXPECT_EQ(LatestVersion(second), 2);
  EXPECT_THAT(SnapshotsOf(second), ElementsAre(snap(0), snap(1)));
  // latest moved by itself; stable stayed.
  EXPECT_THAT(AliasesOf(second, 1), ElementsAre("stable"));
  EXPECT_THAT(AliasesOf(second, 2), ElementsAre("latest"));
  EXPECT_EQ(Resolve(*store, "m").snapshot_id, snap(1));
  EXPECT_EQ(Resolve(*store, "m@latest").version, 2);
  EXPECT_EQ(Resolve(*store, "m@stable").snapshot_id, snap(0));
  EXPECT_EQ(Resolve(*store, "m:1").snapshot_id, snap(0));
  EXPECT_EQ(Resolve(*store, "m:2").name, "m");
  EXPECT_EQ(store->size(), 1);
}

TEST_F(ModelStoreTest, PublishRefusesBadInputs) {
  std::unique_ptr<ModelStore> store = Open();
  EXPECT_THAT(store->Publish("m", "snap-0000000000000000").status(),
              StatusIs(absl::StatusCode::kNotFound,
                       "snapshot_id 'snap-0000000000000000' not found"));
  EXPECT_THAT(store->Publish("bad name", snap(0)).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "name"));
  EXPECT_THAT(store->Publish("m", snap(0), {"stable", "latest"}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "aliases[1]"));
  // Nothing was stored by the failures.
  EXPECT_THAT(store->Get("m").status(),
              StatusIs(absl::StatusCode::kNotFound, "model 'm' not found"));
  EXPECT_EQ(store->size(), 0);
}

TEST_F(ModelStoreTest, ResolveReportsWhatIsMissing) {
  std::unique_ptr<ModelStore> store = Open();
  ASSERT_TRUE(store->Publish("m", snap(0), {"stable"}).ok());
  const auto resolve = [&](const char* ref) {
    return store->Resolve(*ParseModelRef("model", ref)).status();
  };
  EXPECT_THAT(resolve("x"),
              StatusIs(absl::StatusCode::kNotFound, "model 'x' not found"));
  EXPECT_THAT(resolve("m@canary"),
              StatusIs(absl::StatusCode::kNotFound,
                       "model 'm' has no alias 'canary' (its aliases: "
                       "latest, stable)"));
  EXPECT_THAT(resolve("m:5"),
              StatusIs(absl::StatusCode::kNotFound,
                       "model 'm' has no version 5 (its latest is 1)"));
}

TEST_F(ModelStoreTest, SetAndDeleteAliases) {
  std::unique_ptr<ModelStore> store = Open();
  ASSERT_TRUE(store->Publish("m", snap(0)).ok());
  ASSERT_TRUE(store->Publish("m", snap(1)).ok());
  const Model moved = *store->SetAlias("m", "stable", 1);
  EXPECT_THAT(UserAliasesOf(moved), UnorderedElementsAre(Pair("stable", 1)));
  EXPECT_EQ(Resolve(*store, "m@stable").snapshot_id, snap(0));
  ASSERT_TRUE(store->SetAlias("m", "stable", 2).ok());
  EXPECT_EQ(Resolve(*store, "m@stable").snapshot_id, snap(1));
  EXPECT_THAT(store->SetAlias("m", "latest", 1).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "'latest'"));
  EXPECT_THAT(store->SetAlias("m", "stable", 3).status(),
              StatusIs(absl::StatusCode::kNotFound, "has no version 3"));
  EXPECT_THAT(
      store->SetAlias("m", "stable", 0).status(),
      StatusIs(absl::StatusCode::kInvalidArgument, "version = 0 must be >= 1"));
  EXPECT_THAT(store->SetAlias("x", "stable", 1).status(),
              StatusIs(absl::StatusCode::kNotFound, "model 'x' not found"));
  const Model deleted = *store->DeleteAlias("m", "stable");
  EXPECT_THAT(UserAliasesOf(deleted), IsEmpty());
  EXPECT_THAT(AliasesOf(deleted, 2), ElementsAre("latest"));
  EXPECT_THAT(
      store->DeleteAlias("m", "stable").status(),
      StatusIs(absl::StatusCode::kNotFound, "model 'm' has no alias 'stable'"));
  EXPECT_THAT(store->DeleteAlias("m", "latest").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "'latest'"));
}

TEST_F(ModelStoreTest, LimitsAreResourceExhaustedNamingTheFlag) {
  ModelStore::Options options;
  options.max_models = 2;
  options.max_versions = 2;
  options.max_aliases = 1;
  std::unique_ptr<ModelStore> store = Open(options);
  ASSERT_TRUE(store->Publish("a", snap(0)).ok());
  ASSERT_TRUE(store->Publish("b", snap(0)).ok());
  EXPECT_THAT(store->Publish("c", snap(0)).status(),
              StatusIs(absl::StatusCode::kResourceExhausted, "--max-models"));
  ASSERT_TRUE(store->Publish("a", snap(1)).ok());
  EXPECT_THAT(store->Publish("a", snap(2)).status(),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       "--max-model-versions = 2"));
  ASSERT_TRUE(store->SetAlias("a", "stable", 1).ok());
  // Moving an existing alias is not a new one.
  ASSERT_TRUE(store->SetAlias("a", "stable", 2).ok());
  EXPECT_THAT(store->SetAlias("a", "canary", 1).status(),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       "--max-model-aliases = 1"));
  EXPECT_THAT(
      store->Publish("b", snap(1), {"x", "y"}).status(),
      StatusIs(absl::StatusCode::kResourceExhausted, "--max-model-aliases"));
  EXPECT_EQ(LatestVersion(*store->Get("b")), 1);
  ModelStore::Options bad;
  bad.max_versions = 0;
  EXPECT_THAT(bad.Validate(), StatusIs(absl::StatusCode::kInvalidArgument,
                                       "--max-model-versions = 0 must be"));
}

TEST_F(ModelStoreTest, ReopenKeepsEverything) {
  {
    std::unique_ptr<ModelStore> store = Open();
    ASSERT_TRUE(store->Publish("m", snap(0)).ok());
    ASSERT_TRUE(store->Publish("m", snap(1), {"stable"}).ok());
    ASSERT_TRUE(store->SetAlias("m", "canary", 1).ok());
    ASSERT_TRUE(store->Publish("n", snap(2)).ok());
    ASSERT_TRUE(store->Delete("n").ok());
  }
  std::unique_ptr<ModelStore> store = Open();
  const Model model = *store->Get("m");
  EXPECT_THAT(SnapshotsOf(model), ElementsAre(snap(0), snap(1)));
  EXPECT_THAT(UserAliasesOf(model),
              UnorderedElementsAre(Pair("stable", 2), Pair("canary", 1)));
  EXPECT_THAT(store->Get("n").status(),
              StatusIs(absl::StatusCode::kNotFound, ""));
  // Numbers continue where they were.
  EXPECT_EQ(LatestVersion(*store->Publish("m", snap(2))), 3);
  bool more = true;
  EXPECT_EQ(store->List("", 10, &more)->size(), 1u);
  EXPECT_FALSE(more);
}

TEST_F(ModelStoreTest, ListPagesByName) {
  std::unique_ptr<ModelStore> store = Open();
  for (const char* name : {"c", "a", "b", "d"}) {
    ASSERT_TRUE(store->Publish(name, snap(0)).ok());
  }
  bool more = false;
  std::vector<Model> page = *store->List("", 3, &more);
  ASSERT_EQ(page.size(), 3u);
  EXPECT_EQ(page[0].info.name(), "a");
  EXPECT_EQ(page[2].info.name(), "c");
  EXPECT_TRUE(more);
  page = *store->List("c", 3, &more);
  ASSERT_EQ(page.size(), 1u);
  EXPECT_EQ(page[0].info.name(), "d");
  EXPECT_FALSE(more);
}

TEST_F(ModelStoreTest, DeleteSnapshotIsRefusedWhileVersionsPointAtIt) {
  std::unique_ptr<ModelStore> store = Open();
  ASSERT_TRUE(store->Publish("m", snap(0), {"stable"}).ok());
  ASSERT_TRUE(store->Publish("m", snap(1)).ok());
  ASSERT_TRUE(store->Publish("m", snap(0)).ok());  // version 3
  ASSERT_TRUE(store->Publish("n", snap(0)).ok());
  EXPECT_THAT(store->DeleteSnapshot(snap(0), /*force=*/false),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       "is published as model m versions 1, 3 (aliases "
                       "latest, stable); n version 1 (aliases latest)"));
  EXPECT_TRUE(snapshots_->GetMeta(snap(0)).ok());
  EXPECT_TRUE(store->DeleteSnapshot(snap(2), /*force=*/false).ok());
  EXPECT_THAT(snapshots_->GetMeta(snap(2)).status(),
              StatusIs(absl::StatusCode::kNotFound, ""));

  ASSERT_TRUE(store->DeleteSnapshot(snap(0), /*force=*/true).ok());
  EXPECT_THAT(snapshots_->GetMeta(snap(0)).status(),
              StatusIs(absl::StatusCode::kNotFound, ""));
  const Model m = *store->Get("m");
  EXPECT_THAT(SnapshotsOf(m), ElementsAre(snap(1)));
  // stable was on version 1; latest fell back to version 2.
  EXPECT_THAT(UserAliasesOf(m), IsEmpty());
  EXPECT_THAT(AliasesOf(m, 2), ElementsAre("latest"));
  EXPECT_EQ(Resolve(*store, "m").version, 2);
  // n lost its only version: it stays, without versions, numbering on.
  EXPECT_THAT(
      store->Resolve(*ParseModelRef("model", "n")).status(),
      StatusIs(absl::StatusCode::kNotFound, "model 'n' has no versions"));
  EXPECT_EQ(LatestVersion(*store->Publish("n", snap(1))), 2);
  // The removal was written.
  store.reset();
  store = Open();
  EXPECT_THAT(SnapshotsOf(*store->Get("m")), ElementsAre(snap(1)));
}

TEST_F(ModelStoreTest, PublishFromJobIsIdempotent) {
  std::unique_ptr<ModelStore> store = Open();
  const auto publish = [&](const std::string& snapshot_id) {
    return dir_.metadata()->Write([&](MetadataTransaction& tx) {
      return store->PublishFromJob(tx, "m", snapshot_id);
    });
  };
  ASSERT_TRUE(publish(snap(0)).ok());
  ASSERT_TRUE(publish(snap(1)).ok());
  ASSERT_TRUE(publish(snap(0)).ok());
  EXPECT_THAT(SnapshotsOf(*store->Get("m")), ElementsAre(snap(0), snap(1)));
  EXPECT_THAT(publish("snap-0000000000000000"),
              StatusIs(absl::StatusCode::kNotFound, ""));
}

// The publish of a training job is part of the job's transaction: when
// that transaction fails later, the version and `latest` roll back too.
TEST_F(ModelStoreTest, PublishFromJobRollsBackWithItsTransaction) {
  std::unique_ptr<ModelStore> store = Open();
  ASSERT_TRUE(store->Publish("m", snap(0)).ok());
  EXPECT_THAT(dir_.metadata()->Write([&](MetadataTransaction& tx) {
    BNN_RETURN_IF_ERROR(store->PublishFromJob(tx, "m", snap(1)));
    return absl::AbortedError("the job's commit failed");
  }),
              StatusIs(absl::StatusCode::kAborted, "commit failed"));
  EXPECT_THAT(SnapshotsOf(*store->Get("m")), ElementsAre(snap(0)));
  EXPECT_EQ(Resolve(*store, "m").snapshot_id, snap(0));
}

}  // namespace
}  // namespace bnn::server
