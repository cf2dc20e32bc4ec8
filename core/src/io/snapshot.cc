#include "bnn/io/snapshot.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

#include "bnn/core/snapshot.pb.h"
#include "bnn/posterior/posterior.h"
#include "bnn/status.h"

namespace bnn {
namespace {

constexpr char kMagic[8] = {'B', 'N', 'N', 'S', 'N', 'A', 'P', '1'};
constexpr size_t kHeaderSize = 8 + 4 + 8;
constexpr size_t kTrailerSize = 4;

std::array<uint32_t, 256> MakeCrcTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0x82f63b78u ^ (c >> 1) : c >> 1;
    table[i] = c;
  }
  return table;
}

template <typename U>
void PutLE(U value, std::string* out) {
  for (size_t i = 0; i < sizeof(U); ++i) {
    out->push_back(static_cast<char>((value >> (8 * i)) & 0xff));
  }
}

template <typename U>
U GetLE(const char* p) {
  U value = 0;
  for (size_t i = 0; i < sizeof(U); ++i) {
    value |= static_cast<U>(static_cast<unsigned char>(p[i])) << (8 * i);
  }
  return value;
}

absl::StatusOr<Snapshot> FromProto(const snapshot::Snapshot& p) {
  Snapshot s;
  s.format_version = p.format_version();
  s.library_version = p.library_version();
  s.method = p.method();
  for (const auto& [k, v] : p.params()) s.params[k] = v;
  ModelSpec& m = s.model;
  m.input_dim = p.model().input_dim();
  m.hidden_sizes.assign(p.model().hidden_sizes().begin(),
                        p.model().hidden_sizes().end());
  for (const std::string& a : p.model().activations()) {
    BNN_ASSIGN_OR_RETURN(Activation act, StringToActivation(a));
    m.activations.push_back(act);
  }
  m.output_dim = p.model().output_dim();
  BNN_ASSIGN_OR_RETURN(m.likelihood,
                       StringToLikelihood(p.model().likelihood()));
  BNN_RETURN_IF_ERROR(m.Validate());
  BNN_ASSIGN_OR_RETURN(s.task, StringToTask(p.task()));
  s.class_values.assign(p.class_values().begin(), p.class_values().end());
  const auto& st = p.standardization();
  s.standardization.feature_mean.assign(st.feature_mean().begin(),
                                        st.feature_mean().end());
  s.standardization.feature_std.assign(st.feature_std().begin(),
                                       st.feature_std().end());
  s.standardization.target_mean = st.target_mean();
  s.standardization.target_std = st.target_std();
  if (static_cast<int>(s.standardization.feature_mean.size()) != m.input_dim ||
      s.standardization.feature_std.size() !=
          s.standardization.feature_mean.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "snapshot standardisation has ", s.standardization.feature_mean.size(),
        " features; the model has ", m.input_dim));
  }
  for (double sd : s.standardization.feature_std) {
    if (!(sd > 0)) {
      return absl::InvalidArgumentError(
          "snapshot standardisation has a non-positive feature std");
    }
  }
  if (!(s.standardization.target_std > 0)) {
    return absl::InvalidArgumentError(
        "snapshot standardisation has a non-positive target std");
  }
  if (m.likelihood != LikelihoodForTask(s.task)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "snapshot task ", TaskToString(s.task), " does not match its ",
        LikelihoodToString(m.likelihood), " likelihood"));
  }
  if (IsClassification(s.task)) {
    const size_t classes =
        m.likelihood == Likelihood::kCategorical ? m.output_dim : 2;
    if (s.class_values.size() != classes) {
      return absl::InvalidArgumentError(
          absl::StrCat("snapshot has ", s.class_values.size(),
                       " class_values; the model has ", classes, " classes"));
    }
  }
  s.noise_precision = p.noise_precision();
  if (m.likelihood == Likelihood::kGaussian && !(s.noise_precision > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "snapshot noise_precision = ", s.noise_precision, " must be positive"));
  }
  const auto& t = p.training();
  s.training = {t.dataset_id(),
                t.dataset_version(),
                t.dataset_hash(),
                t.num_train(),
                t.steps(),
                t.epochs(),
                t.final_loss(),
                t.seconds(),
                t.seed(),
                t.parent_snapshot_id(),
                t.prior_from_parent()};
  BNN_ASSIGN_OR_RETURN(std::unique_ptr<Posterior> posterior,
                       PosteriorFromProto(p.posterior(), m));
  s.posterior = std::move(posterior);
  s.created_unix_ms = p.created_unix_ms();
  return s;
}

}  // namespace

uint32_t Crc32c(absl::string_view data) {
  static const std::array<uint32_t, 256> table = MakeCrcTable();
  uint32_t crc = 0xffffffffu;
  for (unsigned char c : data) crc = table[(crc ^ c) & 0xff] ^ (crc >> 8);
  return crc ^ 0xffffffffu;
}

absl::StatusOr<std::string> EncodeSnapshot(const Snapshot& s) {
  if (s.posterior == nullptr) {
    return absl::InvalidArgumentError("snapshot has no posterior");
  }
  snapshot::Snapshot p;
  p.set_format_version(kSnapshotFormatVersion);
  p.set_library_version(s.library_version);
  p.set_method(s.method);
  for (const auto& [k, v] : s.params) (*p.mutable_params())[k] = v;
  auto* m = p.mutable_model();
  m->set_input_dim(s.model.input_dim);
  for (int h : s.model.hidden_sizes) m->add_hidden_sizes(h);
  for (Activation a : s.model.activations) {
    m->add_activations(std::string(ActivationToString(a)));
  }
  m->set_output_dim(s.model.output_dim);
  m->set_likelihood(std::string(LikelihoodToString(s.model.likelihood)));
  p.set_task(std::string(TaskToString(s.task)));
  for (double v : s.class_values) p.add_class_values(v);
  auto* st = p.mutable_standardization();
  for (double v : s.standardization.feature_mean) st->add_feature_mean(v);
  for (double v : s.standardization.feature_std) st->add_feature_std(v);
  st->set_target_mean(s.standardization.target_mean);
  st->set_target_std(s.standardization.target_std);
  p.set_noise_precision(s.noise_precision);
  auto* t = p.mutable_training();
  t->set_dataset_id(s.training.dataset_id);
  t->set_dataset_version(s.training.dataset_version);
  t->set_dataset_hash(s.training.dataset_hash);
  t->set_num_train(s.training.num_train);
  t->set_steps(s.training.steps);
  t->set_epochs(s.training.epochs);
  t->set_final_loss(s.training.final_loss);
  t->set_seconds(s.training.seconds);
  t->set_seed(s.training.seed);
  t->set_parent_snapshot_id(s.training.parent_snapshot_id);
  t->set_prior_from_parent(s.training.prior_from_parent);
  s.posterior->ToProto(p.mutable_posterior());
  p.set_created_unix_ms(s.created_unix_ms);

  std::string payload;
  if (!p.SerializeToString(&payload)) {
    return absl::InternalError("snapshot serialisation failed");
  }
  std::string out(kMagic, sizeof(kMagic));
  PutLE<uint32_t>(kSnapshotFormatVersion, &out);
  PutLE<uint64_t>(payload.size(), &out);
  out += payload;
  PutLE<uint32_t>(Crc32c(payload), &out);
  return out;
}

absl::StatusOr<Snapshot> DecodeSnapshot(absl::string_view bytes) {
  const size_t magic_bytes = std::min(bytes.size(), sizeof(kMagic));
  if (std::memcmp(bytes.data(), kMagic, magic_bytes) != 0) {
    return absl::DataLossError(
        "not a bnn-serve snapshot (missing BNNSNAP1 header)");
  }
  if (bytes.size() < kHeaderSize) {
    return absl::DataLossError(
        absl::StrCat("snapshot is truncated: ", bytes.size(),
                     " bytes, shorter than its ", kHeaderSize, "-byte header"));
  }
  const uint32_t version = GetLE<uint32_t>(bytes.data() + 8);
  if (version > kSnapshotFormatVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "snapshot format version ", version,
        " is newer than this build supports (", kSnapshotFormatVersion,
        "); upgrade bnn-serve to load it"));
  }
  if (version == 0) {
    return absl::DataLossError("snapshot format version 0 is invalid");
  }
  const uint64_t size = GetLE<uint64_t>(bytes.data() + 12);
  if (bytes.size() < kHeaderSize + kTrailerSize ||
      size != bytes.size() - kHeaderSize - kTrailerSize) {
    return absl::DataLossError(absl::StrCat(
        "snapshot is truncated or has trailing bytes: header declares ", size,
        " payload bytes, file holds ",
        bytes.size() >= kHeaderSize + kTrailerSize
            ? bytes.size() - kHeaderSize - kTrailerSize
            : 0));
  }
  const absl::string_view payload = bytes.substr(kHeaderSize, size);
  const uint32_t stored = GetLE<uint32_t>(bytes.data() + kHeaderSize + size);
  const uint32_t actual = Crc32c(payload);
  if (stored != actual) {
    return absl::DataLossError(absl::StrCat(
        "snapshot checksum mismatch (stored CRC32C ", absl::Hex(stored),
        ", computed ", absl::Hex(actual), "): the file is corrupted"));
  }
  snapshot::Snapshot p;
  if (!p.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
    return absl::DataLossError("snapshot payload is not a valid message");
  }
  if (p.format_version() != version) {
    return absl::DataLossError(
        absl::StrCat("snapshot payload format_version ", p.format_version(),
                     " disagrees with its header (", version, ")"));
  }
  return FromProto(p);
}

absl::Status WriteFileDurably(const std::string& path,
                              absl::string_view bytes) {
  // Write a temporary, fsync it, rename over the target and fsync the
  // directory: after a crash the file is either the old or the new one.
  const std::string tmp = path + ".tmp";
  auto fail = [&](absl::string_view what) {
    return absl::InternalError(
        absl::StrCat(what, " ", tmp, ": ", std::strerror(errno)));
  };
  const int fd =
      ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return fail("cannot create");
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(fd);
      return fail("cannot write");
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    ::close(fd);
    return fail("cannot fsync");
  }
  if (::close(fd) != 0) return fail("cannot close");
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("cannot rename ", tmp, " to ", path,
                                            ": ", std::strerror(errno)));
  }
  const size_t slash = path.find_last_of('/');
  const std::string dir =
      slash == std::string::npos ? "." : path.substr(0, slash);
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
  return absl::OkStatus();
}

absl::Status WriteSnapshotFile(const std::string& path,
                               const Snapshot& snapshot) {
  BNN_ASSIGN_OR_RETURN(std::string bytes, EncodeSnapshot(snapshot));
  return WriteFileDurably(path, bytes);
}

absl::StatusOr<Snapshot> ReadSnapshotFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  absl::StatusOr<Snapshot> s = DecodeSnapshot(ss.str());
  if (!s.ok()) {
    return absl::Status(s.status().code(),
                        absl::StrCat(path, ": ", s.status().message()));
  }
  return s;
}

}  // namespace bnn
