// The snapshot codecs: the table and the HDF5 filters each sets on a gradient dataset.
#include "gs/data/codecs.hpp"

#include <algorithm>

#include "gs/base/join.hpp"
#include "gs/data/h5_handles.hpp"

namespace gs::data {
namespace {

// Filter ids registered with The HDF Group, and the plugins' parameters (cd_values).
constexpr int kLz4Filter = 32004;    // hdf5-filter-plugin's libh5lz4: cd[0] block bytes (0: 1 GiB)
constexpr int kBloscFilter = 32001;  // hdf5-filter-plugin-blosc-serial: cd[4] level, cd[5]
                                     // shuffle (1 byte, 2 bit), cd[6] codec (1 lz4); cd[0..3] its own
constexpr unsigned kBloscByteShuffle = 1, kBloscBitShuffle = 2, kBloscLz4 = 1;

const std::vector<SnapshotCodec> kCodecs = {
    {"none", "raw floats, no filter: the least work for the writer", 0, ""},
    {"shuffle", "HDF5's byte shuffle alone (it reorders bytes; the file is as large as raw)", 0, ""},
    {"deflate", "byte shuffle then deflate (zlib) at deflate_level: the smallest file, the most work", 0, ""},
    {"lz4", "byte shuffle then LZ4", kLz4Filter, "hdf5-filter-plugin"},
    {"blosc-lz4", "Blosc with its byte shuffle and LZ4", kBloscFilter, "hdf5-filter-plugin-blosc-serial"},
    {"blosc-bitshuffle", "Blosc with its bit shuffle and LZ4", kBloscFilter, "hdf5-filter-plugin-blosc-serial"},
};

}  // namespace

const std::vector<SnapshotCodec>& snapshot_codecs() { return kCodecs; }

std::vector<std::string> snapshot_codec_names() {
  std::vector<std::string> names;
  for (const auto& c : kCodecs) names.emplace_back(c.name);
  return names;
}

const SnapshotCodec& snapshot_codec(const std::string& name) {
  const auto it = std::find_if(kCodecs.begin(), kCodecs.end(), [&](const SnapshotCodec& c) { return name == c.name; });
  if (it == kCodecs.end())
    throw Error("unknown snapshot compression '" + name + "': use " + join(snapshot_codec_names(), ", "));
  return *it;
}

bool codec_available(const SnapshotCodec& codec) {
  h5::silence_errors();
  return codec.filter_id == 0 || H5Zfilter_avail(static_cast<H5Z_filter_t>(codec.filter_id)) > 0;
}

namespace h5 {

void set_codec_filters(hid_t dcpl, const SnapshotCodec& codec, int deflate_level, const std::filesystem::path& file,
                       const std::string& where) {
  const std::string name = codec.name;
  if (name == "none") return;
  if (!codec_available(codec))
    throw Error(file.string() + ": compression '" + name + "' needs HDF5's filter " + std::to_string(codec.filter_id) +
                " (Debian package " + codec.package +
                "), which libhdf5 cannot load here: install it, or choose another compression (" +
                join(snapshot_codec_names(), ", ") + ")");
  // Blosc shuffles inside its own filter; the others get HDF5's byte shuffle first, which groups
  // each float's bytes by significance so the compressor finds the repeated exponents.
  if (codec.filter_id != kBloscFilter) check(H5Pset_shuffle(dcpl), file, where);
  // The plugins' filters are optional, as h5py sets them: a chunk a plugin cannot shrink (Blosc
  // gives up on a few bytes of noise) is stored as it is instead of failing the write.
  if (name == "deflate") {
    check(H5Pset_deflate(dcpl, static_cast<unsigned>(deflate_level)), file, where);
  } else if (name == "lz4") {
    const unsigned cd[1] = {0};
    check(H5Pset_filter(dcpl, kLz4Filter, H5Z_FLAG_OPTIONAL, 1, cd), file, where);
  } else if (codec.filter_id == kBloscFilter) {
    const unsigned shuffle = name == "blosc-bitshuffle" ? kBloscBitShuffle : kBloscByteShuffle;
    const unsigned cd[7] = {0, 0, 0, 0, 5, shuffle, kBloscLz4};
    check(H5Pset_filter(dcpl, kBloscFilter, H5Z_FLAG_OPTIONAL, 7, cd), file, where);
  }
}

}  // namespace h5
}  // namespace gs::data
