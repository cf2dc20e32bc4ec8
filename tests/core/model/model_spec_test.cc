// ModelSpec: the flat parameter layout every posterior, method and snapshot
// shares (column-major [W b] blocks, bias last), task defaults, validation
// messages naming the field and bound, and the enum names.
#include "bnn/model/model_spec.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/test_util/test_util.h"

namespace bnn {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

using ::bnn::testing::Msg;

// 3 -> 4 -> 2 -> 1, Gaussian.
ModelSpec TwoHidden() {
  ModelSpec spec;
  spec.input_dim = 3;
  spec.hidden_sizes = {4, 2};
  spec.activations = {Activation::kRelu, Activation::kTanh};
  spec.output_dim = 1;
  spec.likelihood = Likelihood::kGaussian;
  return spec;
}

TEST(ModelSpecLayoutTest, LayersHaveShapesAndContiguousOffsets) {
  const std::vector<LayerShape> layers = TwoHidden().Layers();
  ASSERT_EQ(layers.size(), 3u);
  EXPECT_EQ(layers[0].in, 3);
  EXPECT_EQ(layers[0].out, 4);
  EXPECT_EQ(layers[0].offset, 0);
  EXPECT_EQ(layers[0].size(), 16);  // 4 x (3 + 1)
  EXPECT_EQ(layers[1].in, 4);
  EXPECT_EQ(layers[1].out, 2);
  EXPECT_EQ(layers[1].offset, 16);
  EXPECT_EQ(layers[1].size(), 10);  // 2 x (4 + 1)
  EXPECT_EQ(layers[2].in, 2);
  EXPECT_EQ(layers[2].out, 1);
  EXPECT_EQ(layers[2].offset, 26);
  EXPECT_EQ(layers[2].size(), 3);
  EXPECT_EQ(TwoHidden().NumParameters(), 29);
}

TEST(ModelSpecLayoutTest, IndexIsColumnMajorWithBiasAsLastColumn) {
  const std::vector<LayerShape> layers = TwoHidden().Layers();
  const LayerShape& l0 = layers[0];  // 4 x 4 block [W b] at offset 0
  EXPECT_EQ(l0.Index(0, 0), 0);
  EXPECT_EQ(l0.Index(1, 0), 1);  // next row, same column
  EXPECT_EQ(l0.Index(3, 0), 3);
  EXPECT_EQ(l0.Index(0, 1), 4);  // next column
  EXPECT_EQ(l0.Index(2, 2), 10);
  EXPECT_EQ(l0.Index(0, 3), 12);     // bias column starts after in * out
  EXPECT_EQ(l0.Index(3, 3), 15);     // last entry of the block
  const LayerShape& l1 = layers[1];  // 2 x 5 block at offset 16
  EXPECT_EQ(l1.Index(0, 0), 16);
  EXPECT_EQ(l1.Index(1, 2), 16 + 2 * 2 + 1);
  EXPECT_EQ(l1.Index(1, 4), 25);  // bias of unit 1
  const LayerShape& l2 = layers[2];
  EXPECT_EQ(l2.Index(0, 2), 28);  // the output bias is theta's last entry
}

TEST(ModelSpecLayoutTest, EveryIndexIsHitExactlyOnce) {
  const ModelSpec spec = TwoHidden();
  std::vector<int> hits(spec.NumParameters(), 0);
  for (const LayerShape& l : spec.Layers()) {
    for (int i = 0; i <= l.in; ++i) {
      for (int o = 0; o < l.out; ++o) {
        const int64_t k = l.Index(o, i);
        ASSERT_GE(k, 0);
        ASSERT_LT(k, spec.NumParameters());
        ++hits[k];
      }
    }
  }
  for (int h : hits) EXPECT_EQ(h, 1);
}

TEST(ModelSpecLayoutTest, BiasMaskMarksTheLastColumnOfEachBlock) {
  const std::vector<bool> mask = TwoHidden().BiasMask();
  ASSERT_EQ(mask.size(), 29u);
  std::vector<int> bias;
  for (size_t k = 0; k < mask.size(); ++k) {
    if (mask[k]) bias.push_back(static_cast<int>(k));
  }
  EXPECT_THAT(bias, ElementsAre(12, 13, 14, 15, 24, 25, 28));
}

TEST(ModelSpecLayoutTest, NoHiddenLayersIsOneLinearLayer) {
  ModelSpec spec;
  spec.input_dim = 5;
  spec.output_dim = 3;
  spec.likelihood = Likelihood::kCategorical;
  ASSERT_TRUE(spec.Validate().ok());
  const std::vector<LayerShape> layers = spec.Layers();
  ASSERT_EQ(layers.size(), 1u);
  EXPECT_EQ(layers[0].in, 5);
  EXPECT_EQ(layers[0].out, 3);
  EXPECT_EQ(spec.NumParameters(), 18);
  std::vector<int> bias;
  const std::vector<bool> mask = spec.BiasMask();
  for (size_t k = 0; k < mask.size(); ++k) {
    if (mask[k]) bias.push_back(static_cast<int>(k));
  }
  EXPECT_THAT(bias, ElementsAre(15, 16, 17));
}

TEST(ModelSpecForTaskTest, Regression) {
  const ModelSpec spec =
      ModelSpec::ForTask(Task::kRegression, 13, 0, {50}, Activation::kRelu);
  EXPECT_EQ(spec.input_dim, 13);
  EXPECT_THAT(spec.hidden_sizes, ElementsAre(50));
  EXPECT_THAT(spec.activations, ElementsAre(Activation::kRelu));
  EXPECT_EQ(spec.output_dim, 1);
  EXPECT_EQ(spec.likelihood, Likelihood::kGaussian);
  EXPECT_TRUE(spec.Validate().ok());
  EXPECT_EQ(spec.NumParameters(), 50 * 14 + 51);
}

TEST(ModelSpecForTaskTest, BinaryHasOneLogit) {
  const ModelSpec spec =
      ModelSpec::ForTask(Task::kBinary, 4, 2, {8, 8}, Activation::kTanh);
  EXPECT_EQ(spec.output_dim, 1);
  EXPECT_EQ(spec.likelihood, Likelihood::kBernoulli);
  EXPECT_THAT(spec.activations,
              ElementsAre(Activation::kTanh, Activation::kTanh));
  EXPECT_TRUE(spec.Validate().ok());
}

TEST(ModelSpecForTaskTest, MulticlassHasOneLogitPerClass) {
  const ModelSpec spec =
      ModelSpec::ForTask(Task::kMulticlass, 784, 10, {}, Activation::kRelu);
  EXPECT_EQ(spec.output_dim, 10);
  EXPECT_EQ(spec.likelihood, Likelihood::kCategorical);
  EXPECT_TRUE(spec.activations.empty());
  EXPECT_TRUE(spec.Validate().ok());
  EXPECT_EQ(spec.NumParameters(), 10 * 785);
}

TEST(ModelSpecValidateTest, InputDimOutOfRange) {
  ModelSpec spec = TwoHidden();
  spec.input_dim = 0;
  const absl::Status s = spec.Validate();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(s), AllOf(HasSubstr("input_dim = 0"), HasSubstr("[1, ")));
}

TEST(ModelSpecValidateTest, HiddenSizeZeroNamesTheIndex) {
  ModelSpec spec = TwoHidden();
  spec.hidden_sizes = {4, 0};
  const absl::Status s = spec.Validate();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(s),
              AllOf(HasSubstr("hidden_sizes[1] = 0"), HasSubstr("[1, 65536]")));
}

TEST(ModelSpecValidateTest, HiddenSizeTooWideNamesTheIndex) {
  ModelSpec spec = TwoHidden();
  spec.hidden_sizes = {kMaxLayerWidth + 1, 2};
  const absl::Status s = spec.Validate();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(s), HasSubstr("hidden_sizes[0] = 65537"));
}

TEST(ModelSpecValidateTest, TooManyLayers) {
  ModelSpec spec = TwoHidden();
  spec.hidden_sizes.assign(kMaxHiddenLayers + 1, 2);
  spec.activations.assign(kMaxHiddenLayers + 1, Activation::kRelu);
  absl::Status s = spec.Validate();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(s), AllOf(HasSubstr("hidden_sizes has 17 layers"),
                            HasSubstr("limit is 16")));
  // Exactly the limit is fine.
  spec.hidden_sizes.pop_back();
  spec.activations.pop_back();
  EXPECT_TRUE(spec.Validate().ok());
}

TEST(ModelSpecValidateTest, ActivationCountMismatch) {
  ModelSpec spec = TwoHidden();
  spec.activations = {Activation::kRelu};
  const absl::Status s = spec.Validate();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(s), AllOf(HasSubstr("activations has 1"),
                            HasSubstr("one per hidden layer (2)")));
}

TEST(ModelSpecValidateTest, CategoricalNeedsTwoOutputs) {
  ModelSpec spec = TwoHidden();
  spec.likelihood = Likelihood::kCategorical;
  spec.output_dim = 1;
  const absl::Status s = spec.Validate();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(s), AllOf(HasSubstr("output_dim = 1"),
                            HasSubstr("categorical"), HasSubstr(">= 2")));
  spec.output_dim = 2;
  EXPECT_TRUE(spec.Validate().ok());
}

TEST(ModelSpecValidateTest, GaussianAndBernoulliNeedOneOutput) {
  for (Likelihood l : {Likelihood::kGaussian, Likelihood::kBernoulli}) {
    ModelSpec spec = TwoHidden();
    spec.likelihood = l;
    spec.output_dim = 2;
    const absl::Status s = spec.Validate();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(Msg(s), AllOf(HasSubstr("output_dim = 2"),
                              HasSubstr(std::string(LikelihoodToString(l))),
                              HasSubstr("exactly 1")));
  }
}

TEST(ModelSpecValidateTest, TooManyParameters) {
  ModelSpec spec;
  spec.input_dim = kMaxLayerWidth;
  spec.hidden_sizes = {kMaxLayerWidth};
  spec.activations = {Activation::kRelu};
  const absl::Status s = spec.Validate();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(s), AllOf(HasSubstr("parameters"),
                            HasSubstr(std::to_string(kMaxParameters))));
}

TEST(ActivationNamesTest, RoundTripAndAliases) {
  for (Activation a : {Activation::kRelu, Activation::kTanh,
                       Activation::kLeakyTanh, Activation::kIdentity}) {
    const absl::StatusOr<Activation> back =
        StringToActivation(ActivationToString(a));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, a);
  }
  EXPECT_EQ(ActivationToString(Activation::kRelu), "relu");
  EXPECT_EQ(ActivationToString(Activation::kTanh), "tanh");
  EXPECT_EQ(ActivationToString(Activation::kLeakyTanh), "leaky_tanh");
  EXPECT_EQ(ActivationToString(Activation::kIdentity), "identity");
  const absl::StatusOr<Activation> dashed = StringToActivation("leaky-tanh");
  ASSERT_TRUE(dashed.ok()) << dashed.status();
  EXPECT_EQ(*dashed, Activation::kLeakyTanh);
}

TEST(ActivationNamesTest, UnknownListsKnown) {
  const absl::StatusOr<Activation> a = StringToActivation("sigmoid");
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(a.status()),
              AllOf(HasSubstr("'sigmoid'"), HasSubstr("relu"),
                    HasSubstr("leaky_tanh"), HasSubstr("identity")));
  EXPECT_FALSE(StringToActivation("").ok());
}

TEST(LikelihoodNamesTest, RoundTripAndTaskMapping) {
  for (Likelihood l : {Likelihood::kGaussian, Likelihood::kBernoulli,
                       Likelihood::kCategorical}) {
    const absl::StatusOr<Likelihood> back =
        StringToLikelihood(LikelihoodToString(l));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, l);
  }
  EXPECT_EQ(LikelihoodToString(Likelihood::kGaussian), "gaussian");
  EXPECT_EQ(LikelihoodToString(Likelihood::kBernoulli), "bernoulli");
  EXPECT_EQ(LikelihoodToString(Likelihood::kCategorical), "categorical");
  const absl::StatusOr<Likelihood> bad = StringToLikelihood("poisson");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(bad.status()),
              AllOf(HasSubstr("'poisson'"), HasSubstr("gaussian")));

  EXPECT_EQ(LikelihoodForTask(Task::kRegression), Likelihood::kGaussian);
  EXPECT_EQ(LikelihoodForTask(Task::kBinary), Likelihood::kBernoulli);
  EXPECT_EQ(LikelihoodForTask(Task::kMulticlass), Likelihood::kCategorical);
}

}  // namespace
}  // namespace bnn
