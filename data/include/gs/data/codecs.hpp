#pragma once
// How a snapshot's gradient datasets are compressed on disk: one row per codec (name, summary,
// the HDF5 filter it needs). WriterOptions, the Python Recorder's `compression=`, the help texts
// and the recording benchmark read this table. The codecs beyond HDF5's own (shuffle, deflate)
// are HDF5 filter plugins from Debian's packages, loaded at run time from libhdf5's plugin folder;
// a reader of such a file needs the same plugin (h5py finds Debian's; see docs/snapshot-format.md).
#include <string>
#include <vector>

namespace gs::data {

struct SnapshotCodec {
  const char* name;
  const char* summary;
  int filter_id;        // the HDF5 filter it needs beyond the built-in ones; 0: none
  const char* package;  // the Debian package that provides that filter; "" for built-in
};

// Every codec, in the order help texts list them.
const std::vector<SnapshotCodec>& snapshot_codecs();
std::vector<std::string> snapshot_codec_names();
// The row named `name`; gs::Error listing the names when there is none.
const SnapshotCodec& snapshot_codec(const std::string& name);
// Whether libhdf5 can load the codec's filter on this machine (built-in codecs always).
bool codec_available(const SnapshotCodec& codec);

// What WriterOptions use when the caller names none: measured on ResNet-50 gradients
// (docs/BENCHMARKS.md, "Recording").
inline constexpr const char* kDefaultSnapshotCodec = "lz4";

}  // namespace gs::data
