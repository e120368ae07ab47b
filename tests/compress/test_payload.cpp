#include <gtest/gtest.h>

#include <random>

#include "gs/compress/payload.hpp"
#include "gs/base/error.hpp"

using namespace gs::compress;

namespace {
Payload random_sparse(std::uint64_t n, std::size_t count, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> v;
  Payload p;
  p.n = n;
  for (std::size_t j = 0; j < count; ++j) {
    p.indices.push_back(std::int32_t(j * (n / count)));
    p.values.push_back(v(rng));
  }
  return p;
}
}  // namespace

TEST(Payload, SparseRoundTripIsBitExact) {
  const Payload p = random_sparse(10000, 37, 11);
  const auto bytes = encode(p);
  std::uint64_t wire = 0;
  EXPECT_EQ(encode(p, wire), bytes);
  EXPECT_EQ(wire, p.wire_bytes());
  // Ascending indices 270 apart: Rice-coded gaps of 8 bits + 1 + 1 ... at most 11 bits each.
  EXPECT_EQ(bytes.size(), 33u + 10u + p.wire_bytes());
  EXPECT_LE(p.wire_bytes(), 37u * 4u + (37u * 11u + 7u) / 8u);
  const Payload q = decode(bytes);
  EXPECT_EQ(q.kind, PayloadKind::sparse);
  EXPECT_EQ(q.n, p.n);
  EXPECT_EQ(q.indices, p.indices);
  EXPECT_EQ(q.values, p.values);
}

// Indices in any other order travel as int32s, 8 bytes a pair, and come back in their order.
TEST(Payload, UnorderedIndicesTravelAsInt32s) {
  Payload p = random_sparse(10000, 37, 12);
  std::swap(p.indices[3], p.indices[30]);
  const auto bytes = encode(p);
  EXPECT_EQ(p.wire_bytes(), 37u * 8u);
  EXPECT_EQ(bytes.size(), 33u + 10u + 37u * 8u);
  const Payload q = decode(bytes);
  EXPECT_EQ(q.indices, p.indices);
  EXPECT_EQ(q.values, p.values);
}

// A selection of 1% of 1e6 at random positions: about log2(100) + 2 bits an index, so 5.1 bytes
// a pair or less instead of 8; the first and last positions of the vector round-trip.
TEST(Payload, RiceGapsCostAboutLog2OfTheMeanGap) {
  std::mt19937_64 rng(5);
  Payload p;
  p.n = 1'000'000;
  std::bernoulli_distribution keep(0.01);
  for (std::int32_t i = 0; i < std::int32_t(p.n); ++i)
    if (i == 0 || i + 1 == std::int32_t(p.n) || keep(rng)) p.indices.push_back(i), p.values.push_back(float(i));
  const double per_pair = double(p.wire_bytes()) / double(p.count());
  EXPECT_LT(per_pair, 5.1);
  EXPECT_GT(per_pair, 4.8);  // the entropy of the gaps bounds any code: log2(100 e) bits
  const Payload q = decode(encode(p));
  EXPECT_EQ(q.indices, p.indices);
  EXPECT_EQ(q.values, p.values);
  Payload empty;
  empty.n = 5;
  EXPECT_EQ(decode(encode(empty)).count(), 0u);
}

TEST(Payload, DenseRoundTripKeepsScaleAndBits) {
  Payload p;
  p.kind = PayloadKind::dense;
  p.n = 5;
  p.values = {1.5f, -2.0f, 0.0f, 3.25f, 7.0f};
  p.scale = 0.125;
  p.code_bits = 4;
  const Payload q = decode(encode(p));
  EXPECT_EQ(q.kind, PayloadKind::dense);
  EXPECT_EQ(q.values, p.values);
  EXPECT_DOUBLE_EQ(q.scale, 0.125);
  EXPECT_EQ(q.code_bits, 4u);
  EXPECT_EQ(p.wire_bytes(), 3u);  // 5 codes of 4 bits, rounded up
}

TEST(Payload, BadInputThrows) {
  Payload p = random_sparse(100, 4, 3);
  auto bytes = encode(p);
  auto truncated = bytes;
  truncated.pop_back();
  EXPECT_THROW(decode(truncated), gs::Error);
  auto bad_magic = bytes;
  bad_magic[0] = std::byte{'X'};
  EXPECT_THROW(decode(bad_magic), gs::Error);
  EXPECT_THROW(decode(std::span<const std::byte>(bytes.data(), 10)), gs::Error);
  // The Rice section: a gap past n, a byte too many, an unknown coding.
  auto beyond = encode(random_sparse(100, 4, 3));
  beyond[33 + 10] = std::byte{0x00};  // the first gap's unary part: a run of ones, then a zero
  for (std::size_t i = 33 + 10; i < 33 + 10 + 3; ++i) beyond[i] = std::byte{0xff};
  EXPECT_THROW(decode(beyond), gs::Error);
  auto unknown = bytes;
  unknown[33] = std::byte{7};
  EXPECT_THROW(decode(unknown), gs::Error);

  Payload out_of_range = p;
  out_of_range.indices[1] = 100;
  EXPECT_THROW(validate(out_of_range), gs::Error);
  EXPECT_THROW(encode(out_of_range), gs::Error);
  Payload mismatched = p;
  mismatched.values.pop_back();
  EXPECT_THROW(validate(mismatched), gs::Error);
  Payload repeated = p;
  repeated.indices[2] = repeated.indices[1];
  EXPECT_NO_THROW(validate(repeated));
  EXPECT_THROW(validate(repeated, true), gs::Error);
  Payload dense_wrong;
  dense_wrong.kind = PayloadKind::dense;
  dense_wrong.n = 3;
  dense_wrong.values = {1.0f};
  EXPECT_THROW(validate(dense_wrong), gs::Error);
}
