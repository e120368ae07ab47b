// Snapshot store: round trip, storage figures, overwrite protection, writer argument checks and
// the documented layout as h5dump shows it.
#include <hdf5.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>

#include "common/run_command.hpp"
#include "data_test_util.hpp"

namespace gs::data::test {
namespace {

SnapshotMeta test_meta() {
  SnapshotMeta meta;
  meta.model = "cnn";
  meta.dataset = "fashion-mnist";
  meta.seed = 0xFEEDFACECAFEBEEFULL;  // above INT64_MAX: the attribute must be unsigned
  return meta;
}

struct Written {
  std::vector<StepRecord> records;
  std::vector<std::vector<std::vector<float>>> grads;  // [step][layer]
};

Written write_file(const std::filesystem::path& path, const std::vector<LayerInfo>& layers, int steps,
                   std::uint64_t seed, WriterOptions options = {}) {
  Written w;
  SnapshotWriter writer(path, test_meta(), layers, options);
  for (int s = 0; s < steps; ++s) {
    const StepRecord rec{s * 5 + 3, 2.5 / (s + 1.0) + 1e-9 * s, 0.1 * std::pow(0.9, s)};
    std::vector<std::vector<float>> g;
    std::vector<std::span<const float>> spans;
    for (std::size_t l = 0; l < layers.size(); ++l) g.push_back(synthetic_grad(seed, rec.step, l, layers[l].numel()));
    for (const auto& v : g) spans.emplace_back(v);
    writer.append(rec, spans);
    EXPECT_EQ(writer.steps_written(), static_cast<std::size_t>(s + 1));
    w.records.push_back(rec);
    w.grads.push_back(std::move(g));
  }
  writer.close();
  writer.close();  // idempotent
  return w;
}

bool same_bits(const std::vector<float>& a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(Snapshot, RoundTripIsBitExact) {
  ScratchDir dir;
  const auto path = dir / "run.h5";
  const auto layers = odd_layers();
  WriterOptions options;
  options.max_chunk_elements = 512;  // fc.weight (1517 values) spans 3 chunks per row
  const Written w = write_file(path, layers, 7, 42, options);

  SnapshotReader r(path);
  EXPECT_EQ(r.meta().model, "cnn");
  EXPECT_EQ(r.meta().dataset, "fashion-mnist");
  EXPECT_EQ(r.meta().seed, 0xFEEDFACECAFEBEEFULL);
  EXPECT_EQ(r.meta().format_version, 1);
  EXPECT_EQ(r.meta().created.size(), 20u);  // YYYY-MM-DDTHH:MM:SSZ
  EXPECT_EQ(r.meta().created.back(), 'Z');
  EXPECT_FALSE(r.meta().gradscope_version.empty());
  ASSERT_EQ(r.layers().size(), layers.size());
  std::int64_t total = 0;
  for (std::size_t l = 0; l < layers.size(); ++l) {
    EXPECT_EQ(r.layers()[l].name, layers[l].name);  // creation order, not name order
    EXPECT_EQ(r.layers()[l].shape, layers[l].shape);
    total += layers[l].numel();
  }
  EXPECT_EQ(r.layers()[2].numel(), 1);  // 0-d
  EXPECT_EQ(r.total_numel(), total);
  ASSERT_EQ(r.step_count(), 7u);
  EXPECT_EQ(r.refresh(), 7u);
  for (std::size_t s = 0; s < 7; ++s) {
    EXPECT_EQ(r.steps()[s].step, w.records[s].step);
    EXPECT_EQ(r.steps()[s].loss, w.records[s].loss);  // float64 stored exactly
    EXPECT_EQ(r.steps()[s].lr, w.records[s].lr);
    for (std::size_t l = 0; l < layers.size(); ++l)
      EXPECT_TRUE(same_bits(w.grads[s][l], r.read(s, l))) << "step " << s << " layer " << l;
  }
  EXPECT_EQ(r.step_index(w.records[4].step), 4u);
  EXPECT_EQ(r.layer_index("fc.weight"), 4u);
  // The leak checks elsewhere count these: an open reader holds identifiers.
  EXPECT_GT(H5Fget_obj_count(static_cast<hid_t>(H5F_OBJ_ALL), H5F_OBJ_ALL), 0);

  // read_model and for_each_step concatenate layers in order.
  const auto flat = r.read_model(3);
  std::vector<float> expected;
  for (const auto& g : w.grads[3]) expected.insert(expected.end(), g.begin(), g.end());
  EXPECT_TRUE(same_bits(expected, flat));
  std::vector<std::size_t> seen;
  r.for_each_step(2, 6, [&](std::size_t i, const StepRecord& rec, std::span<const float> v) {
    seen.push_back(i);
    EXPECT_EQ(rec.step, w.records[i].step);
    std::vector<float> want;
    for (const auto& g : w.grads[i]) want.insert(want.end(), g.begin(), g.end());
    EXPECT_TRUE(same_bits(want, v));
  });
  EXPECT_EQ(seen, (std::vector<std::size_t>{2, 3, 4, 5}));
}

// Readers of one file in one process (a notebook's reader and the analysis it starts): HDF5 1.10
// breaks a dataset open twice once either id is refreshed, so they share their ids. Each one reads
// every row right, whichever opened or refreshed last, and outlives the others.
TEST(Snapshot, ReadersOfOneFileInOneProcessReadTheSameRows) {
  ScratchDir dir;
  const auto path = dir / "run.h5";
  const auto layers = odd_layers();
  const Written w = write_file(path, layers, 4, 11);
  auto first = std::make_unique<SnapshotReader>(path);
  auto check = [&](const SnapshotReader& r, const char* who) {
    for (std::size_t s = 0; s < 4; ++s)
      for (std::size_t l = 0; l < layers.size(); ++l)
        EXPECT_TRUE(same_bits(w.grads[s][l], r.read(s, l))) << who << " step " << s << " layer " << l;
  };
  check(*first, "first alone");
  const SnapshotReader second(path);
  EXPECT_EQ(first->refresh(), 4u);
  check(*first, "first");
  check(second, "second");
  first.reset();
  check(second, "second, the first closed");
  const SnapshotReader third(dir / "." / "run.h5");  // another name for the same file
  EXPECT_EQ(third.path(), dir / "." / "run.h5");     // messages name it as given
  check(third, "third");
}

// The same file read from its bytes in memory (HDF5's core driver): what a peer sends, or a
// fuzzer feeds. Cut short or garbled, it is refused with the image's name in the message.
TEST(Snapshot, ReadsAFileImageInMemory) {
  ScratchDir dir;
  const auto path = dir / "run.h5";
  const auto layers = odd_layers();
  const Written w = write_file(path, layers, 4, 9);
  std::ifstream in(path, std::ios::binary);
  std::vector<char> raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(raw.data()), raw.size());
  SnapshotReader r(FileImage{bytes, "peer.h5"});
  EXPECT_EQ(r.path(), "peer.h5");
  ASSERT_EQ(r.step_count(), 4u);
  ASSERT_EQ(r.layers().size(), layers.size());
  for (std::size_t s = 0; s < 4; ++s)
    for (std::size_t l = 0; l < layers.size(); ++l) EXPECT_TRUE(same_bits(w.grads[s][l], r.read(s, l)));
  expect_error([&] { SnapshotReader(FileImage{bytes.first(bytes.size() / 2), "half.h5"}); }, {"half.h5"});
  expect_error([&] { SnapshotReader(FileImage{bytes.first(5), "tiny.h5"}); }, {"tiny.h5", "5 bytes"});
  std::vector<char> garbled = raw;
  for (std::size_t i = 0; i < garbled.size(); i += 97) garbled[i] = char(garbled[i] ^ 0x5a);
  EXPECT_THROW(SnapshotReader(FileImage{
                   std::span<const std::byte>(reinterpret_cast<const std::byte*>(garbled.data()), garbled.size())}),
               gs::Error);
}

TEST(Snapshot, LookupsAndReadArgumentsAreChecked) {
  ScratchDir dir;
  const auto path = dir / "run.h5";
  write_file(path, odd_layers(), 3, 7);
  SnapshotReader r(path);
  expect_error([&] { (void)r.layer_index("nope"); }, {path.string(), "nope", "conv1.weight"});
  expect_error([&] { (void)r.step_index(4); }, {path.string(), "step 4", "from 3 to 13"});
  expect_error([&] { (void)r.read(3, 0); }, {path.string(), "out of range"});
  expect_error([&] { (void)r.read(0, 7); }, {path.string(), "out of range"});
  std::vector<float> small(5);
  expect_error([&] { r.read(0, 0, small); }, {path.string(), "600"});
  expect_error([&] { r.for_each_step(2, 4, [](auto, auto&, auto) {}); }, {path.string(), "outside"});
}

TEST(Snapshot, StorageInfoReportsCompression) {
  ScratchDir dir;
  const auto path = dir / "run.h5";
  // Gradients quantized to a few levels compress well; the ratio must show that.
  const std::vector<LayerInfo> layers{{"w", {256, 64}}};
  {
    WriterOptions deflate;
    deflate.compression = "deflate";
    SnapshotWriter writer(path, test_meta(), layers, deflate);
    std::mt19937 rng(3);
    std::uniform_int_distribution<int> level(-3, 3);
    for (int s = 0; s < 4; ++s) {
      std::vector<float> g(256 * 64);
      for (auto& x : g) x = 0.25f * static_cast<float>(level(rng));
      const std::span<const float> span(g);
      writer.append({s, 1.0, 0.1}, std::span<const std::span<const float>>(&span, 1));
    }
  }
  SnapshotReader r(path);
  const StorageInfo info = storage_info(r);
  EXPECT_EQ(info.raw_grad_bytes, 4u * 256 * 64 * 4);
  EXPECT_GT(info.stored_grad_bytes, 0u);
  EXPECT_LT(info.stored_grad_bytes * 4, info.raw_grad_bytes);  // better than 4x
  EXPECT_EQ(info.file_bytes, std::filesystem::file_size(path));
  EXPECT_GT(info.file_bytes, info.stored_grad_bytes);
}

TEST(Snapshot, RefusesToOverwriteWithoutForce) {
  ScratchDir dir;
  const auto path = dir / "run.h5";
  const auto layers = odd_layers();
  const Written first = write_file(path, layers, 2, 11);
  const auto size_before = std::filesystem::file_size(path);
  expect_error([&] { SnapshotWriter(path, test_meta(), layers); }, {path.string(), "exists", "--force"});
  {
    // The original is intact and readable.
    EXPECT_EQ(std::filesystem::file_size(path), size_before);
    SnapshotReader r(path);
    ASSERT_EQ(r.step_count(), 2u);
    EXPECT_TRUE(same_bits(first.grads[1][4], r.read(1, 4)));
  }
  // A text file of the user's is protected the same way.
  const auto text = dir / "notes.h5";
  std::ofstream(text) << "mine\n";
  expect_error([&] { SnapshotWriter(text, test_meta(), layers); }, {text.string(), "exists"});
  std::ifstream in(text);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "mine");

  WriterOptions force;
  force.force = true;
  write_file(path, {{"only", {3}}}, 1, 12, force);
  SnapshotReader r(path);
  EXPECT_EQ(r.layers().size(), 1u);
  EXPECT_EQ(r.step_count(), 1u);
}

TEST(Snapshot, WriterRejectsBadArguments) {
  ScratchDir dir;
  const auto path = dir / "run.h5";
  expect_error([&] { SnapshotWriter(path, test_meta(), {}); }, {path.string(), "at least one"});
  expect_error([&] { SnapshotWriter(path, test_meta(), {{"a/b", {2}}}); }, {"a/b", "'/'"});
  expect_error([&] { SnapshotWriter(path, test_meta(), {{"", {2}}}); }, {path.string(), "empty"});
  expect_error([&] { SnapshotWriter(path, test_meta(), {{"a", {2}}, {"a", {3}}}); }, {"'a'", "twice"});
  expect_error([&] { SnapshotWriter(path, test_meta(), {{"a", {2, 0}}}); }, {"'a'", "non-positive"});
  WriterOptions bad_level;
  bad_level.deflate_level = 10;
  expect_error([&] { SnapshotWriter(path, test_meta(), {{"a", {2}}}, bad_level); }, {"0..9"});
  SnapshotMeta v2 = test_meta();
  v2.format_version = 2;
  expect_error([&] { SnapshotWriter(path, v2, {{"a", {2}}}); }, {"version 1"});
  EXPECT_FALSE(std::filesystem::exists(path));  // no half-made file left behind
  expect_error(
      [&] {
        SnapshotWriter(dir / "no/such/dir/x.h5", test_meta(), {{"a", {2}}});
      },
      {"no/such/dir/x.h5", "directory", "does not exist", "create it first"});
  expect_error([&] { SnapshotWriter(dir.path(), test_meta(), {{"a", {2}}}); }, {dir.path().string(), "is a directory"});
  WriterOptions bad_codec;
  bad_codec.compression = "zip";
  expect_error(
      [&] {
        SnapshotWriter(path, test_meta(), {{"a", {2}}}, bad_codec);
      },
      {"unknown snapshot compression 'zip'", "none", "lz4"});

  SnapshotWriter writer(path, test_meta(), {{"a", {2}}, {"b", {3}}});
  const std::vector<float> two{1, 2}, three{1, 2, 3};
  const std::vector<std::span<const float>> ok{two, three}, swapped{three, two}, one{two};
  expect_error([&] { writer.append({0, 1, 1}, one); }, {path.string(), "1 gradient arrays", "2"});
  expect_error([&] { writer.append({0, 1, 1}, swapped); }, {"'a'", "needs 2"});
  writer.append({5, 1, 1}, ok);
  expect_error([&] { writer.append({5, 1, 1}, ok); }, {"step 5", "increase"});
  writer.close();
  expect_error([&] { writer.append({6, 1, 1}, ok); }, {path.string(), "after close"});
  {
    SnapshotReader r(path);
    EXPECT_EQ(r.step_count(), 1u);
  }
  // Every failed constructor above released what it had opened.
  writer = SnapshotWriter(dir / "other.h5", test_meta(), {{"a", {2}}});
  writer.close();
  EXPECT_EQ(H5Fget_obj_count(static_cast<hid_t>(H5F_OBJ_ALL), H5F_OBJ_ALL), 0);
}

TEST(Snapshot, DeflateLevelZeroStoresRawValues) {
  ScratchDir dir;
  const auto path = dir / "raw.h5";
  WriterOptions options;
  options.deflate_level = 0;
  const Written w = write_file(path, odd_layers(), 2, 5, options);
  SnapshotReader r(path);
  EXPECT_TRUE(same_bits(w.grads[1][0], r.read(1, 0)));
  const auto info = storage_info(r);
  EXPECT_EQ(info.stored_grad_bytes, info.raw_grad_bytes);
}

// Every codec of the table stores the values bit for bit; those that compress do so on gradients
// quantized to a few levels; "none" and "shuffle" store the raw size.
TEST(Snapshot, EveryCodecRoundTrips) {
  ScratchDir dir;
  for (const SnapshotCodec& codec : snapshot_codecs()) {
    ASSERT_TRUE(codec_available(codec)) << codec.name << " needs " << codec.package
                                        << " (scripts/setup.sh installs it)";
    WriterOptions options;
    options.compression = codec.name;
    const auto path = dir / (std::string(codec.name) + ".h5");
    const Written w = write_file(path, odd_layers(), 2, 5, options);
    SnapshotReader r(path);
    for (std::size_t l = 0; l < odd_layers().size(); ++l)
      EXPECT_TRUE(same_bits(w.grads[1][l], r.read(1, l))) << codec.name;
    const auto info = storage_info(r);
    const std::string name = codec.name;
    if (name == "none" || name == "shuffle") {
      EXPECT_EQ(info.stored_grad_bytes, info.raw_grad_bytes) << name;
    }
  }
  WriterOptions quantized;
  for (const char* name : {"deflate", "lz4", "blosc-lz4", "blosc-bitshuffle"}) {
    quantized.compression = name;
    const auto path = dir / (std::string("q-") + name + ".h5");
    {
      SnapshotWriter writer(path, test_meta(), {{"w", {256, 64}}}, quantized);
      std::vector<float> g(256 * 64);
      for (std::size_t i = 0; i < g.size(); ++i) g[i] = 0.25f * static_cast<float>(int(i * 7 % 5) - 2);
      const std::span<const float> span(g);
      writer.append({0, 1.0, 0.1}, std::span<const std::span<const float>>(&span, 1));
    }
    const auto info = storage_info(SnapshotReader(path));
    EXPECT_LT(info.stored_grad_bytes * 4, info.raw_grad_bytes) << name;
  }
}

// The documented layout, as the HDF5 tools show it (docs/snapshot-format.md).
TEST(Snapshot, H5DumpShowsDocumentedLayout) {
  ScratchDir dir;
  const auto path = dir / "run.h5";
  write_file(path, odd_layers(), 3, 9);
  const gs::testing::CommandRun h5dump = gs::testing::run_command("h5dump -H '" + path.string() + "' 2>&1");
  ASSERT_EQ(h5dump.status, 0) << h5dump.out;
  const std::string& out = h5dump.out;
  for (const char* name : {"ATTRIBUTE \"format\"",
                           "ATTRIBUTE \"format_version\"",
                           "ATTRIBUTE \"model\"",
                           "ATTRIBUTE \"dataset\"",
                           "ATTRIBUTE \"seed\"",
                           "ATTRIBUTE \"created\"",
                           "ATTRIBUTE \"gradscope_version\"",
                           "GROUP \"layers\"",
                           "GROUP \"conv1.weight\"",
                           "DATASET \"grad\"",
                           "DATASET \"step\"",
                           "ATTRIBUTE \"shape\"",
                           "DATASET \"steps\"",
                           "H5T_IEEE_F32LE",
                           "H5T_STD_I64LE",
                           "H5T_IEEE_F64LE",
                           "\"loss\"",
                           "\"lr\"",
                           "( 3, 600 ) / ( H5S_UNLIMITED, 600 )",
                           "H5T_STD_U64LE"})
    EXPECT_NE(out.find(name), std::string::npos) << "h5dump -H lacks " << name << "\n" << out;
}

}  // namespace
}  // namespace gs::data::test
