#pragma once
// Payload: what one worker sends for one vector (a tensor, a bucket or the whole model). Sparse
// payloads carry (int32 index, float value) pairs (their indices coded compactly on the wire) and
// travel by all-gather; dense payloads carry one code per element (float today; quantizers pack
// fewer bits, said by code_bits) and may be summed element-wise by all-reduce. The wire format below is what a
// transport without tensors sends.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace gs::compress {

enum class PayloadKind : std::uint8_t { sparse = 1, dense = 2 };

struct Payload {
  PayloadKind kind = PayloadKind::sparse;
  std::uint64_t n = 0;                // length of the vector this payload encodes
  std::vector<std::int32_t> indices;  // sparse: distinct positions in [0, n); dense: empty
  std::vector<float> values;          // sparse: value at each index; dense: n codes
  double scale = 1.0;                 // dense: decoded element = code * scale
  std::uint32_t code_bits = 32;       // dense: bits per code on the wire

  std::size_t count() const { return values.size(); }
  // Bytes this payload costs on the wire (headers excluded): for sparse, its indices as encode()
  // codes them (Rice-coded gaps, about log2(n / count) + 2 bits each, when they ascend; else 4
  // bytes each) plus 4 per value; for dense, n codes of code_bits bits (rounded up to bytes).
  std::uint64_t wire_bytes() const;
};

// Checks the payload's own consistency (sizes, index range; distinct indices when check_unique).
// gs::Error naming the fault.
void validate(const Payload& p, bool check_unique = false);

// Self-describing little-endian byte image: magic "GSP2", kind, n, count, scale, code_bits; for
// sparse payloads the index coding (int32s, or the Rice-coded gaps of ascending indices: the
// first index, then each index minus the previous one minus 1), its Rice parameter, its byte
// count, and the indices so coded; then the values as float32. docs/compressors.md.
std::vector<std::byte> encode(const Payload& p);
// The same, with p.wire_bytes() from the same index plan (the indices are read once).
std::vector<std::byte> encode(const Payload& p, std::uint64_t& wire_bytes);
// Inverse of encode; gs::Error on a wrong magic, a truncated buffer or inconsistent sizes.
Payload decode(std::span<const std::byte> bytes);

}  // namespace gs::compress
