#pragma once
// Gradient snapshot store, format v1 (docs/snapshot-format.md). One HDF5 file per run:
//   root attributes: format="gradscope-snapshot", format_version=1, model, dataset, seed,
//                    created (ISO 8601 UTC), gradscope_version
//   /layers/<name>/grad  float32 [steps (unlimited) x numel], chunked, compressed by a codec,
//                        attribute shape (int64[]) = the parameter's shape
//   /layers/<name>/step  int64 [steps]
//   /steps               compound {step int64, loss float64, lr float64} [steps]
//   /losses              the same compound, one row per training step, recorded or not (files
//                        written before it was added lack it: the reader then gives /steps)
// The writer runs in SWMR mode and flushes after every appended step, so a concurrent reader sees
// new steps and a crash leaves every earlier step readable.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gs/data/codecs.hpp"

namespace gs::data {

inline constexpr const char* kSnapshotFormat = "gradscope-snapshot";
inline constexpr int kSnapshotFormatVersion = 1;

struct LayerInfo {
  std::string name;                 // parameter name, e.g. "conv1.weight" (no '/')
  std::vector<std::int64_t> shape;  // empty for a 0-d tensor
  std::int64_t numel() const;       // product of shape (1 for 0-d)
};

struct StepRecord {
  std::int64_t step = 0;  // training step the gradients belong to
  double loss = 0.0;
  double lr = 0.0;
};

struct SnapshotMeta {
  std::string model;
  std::string dataset;
  std::uint64_t seed = 0;
  std::string created;            // filled by the writer when empty
  std::string gradscope_version;  // filled by the writer when empty
  int format_version = kSnapshotFormatVersion;
};

struct WriterOptions {
  bool force = false;  // overwrite an existing file; otherwise refuse with gs::Error
  // How gradients are compressed on disk: a name of snapshot_codecs() (gs/data/codecs.hpp).
  std::string compression = kDefaultSnapshotCodec;
  int deflate_level = 4;  // 0..9, for compression "deflate"; 0 stores raw floats whatever the codec
  // A grad chunk is one step's row of a layer, capped at this many floats (default 256 Ki = 1 MiB,
  // the size of HDF5's default chunk cache) so huge layers span several chunks.
  std::int64_t max_chunk_elements = std::int64_t{1} << 18;
};

class SnapshotWriter {
 public:
  // Creates path with every layer's datasets, then enters SWMR write mode. Throws gs::Error when
  // the file exists (and !force), a layer name is empty, repeated or holds '/', or HDF5 fails.
  SnapshotWriter(const std::filesystem::path& path, SnapshotMeta meta, std::vector<LayerInfo> layers,
                 WriterOptions options = {});
  ~SnapshotWriter();
  SnapshotWriter(SnapshotWriter&&) noexcept;
  SnapshotWriter& operator=(SnapshotWriter&&) noexcept;

  // Appends one step: grads[i] holds layers()[i].numel() floats, and its /losses row. Flushes
  // before returning.
  void append(const StepRecord& record, std::span<const std::span<const float>> grads);
  // Appends the /losses rows of steps that are not recorded (each after every step appended so
  // far, recorded or not); flushes. gs::Error for a step that does not follow.
  void append_losses(std::span<const StepRecord> records);
  std::size_t steps_written() const;
  const std::vector<LayerInfo>& layers() const;
  const std::filesystem::path& path() const;
  void close();  // idempotent; the destructor calls it

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The spacing of evenly spaced steps; none for fewer than two steps or uneven ones.
std::optional<std::int64_t> even_spacing(const std::vector<StepRecord>& steps);
// Which steps a snapshot holds, for messages: "recorded steps run from 0 to 18, every 2 (10
// steps)", or "no steps are recorded".
std::string describe_steps(const std::vector<StepRecord>& steps);

// Whether a SnapshotReader of this process has the file open (it cannot then be replaced).
bool open_for_reading(const std::filesystem::path& path);

// Where a new file may be written: gs::Error, one line, when path is a directory, its directory
// does not exist (gs::MissingFile), it exists and !force (the message suggests force_words, the
// caller's way of saying force: "--force" on the command line, "force=True" in Python), or a
// reader or a writer of this process has it open (the message says which, and to close it).
void check_destination(const std::filesystem::path& path, bool force, const std::string& force_words = "--force");

// An HDF5 file's bytes in memory (received over a network, or fed by a fuzzer), read through
// HDF5's core driver, which copies them; `name` stands for the file in messages.
struct FileImage {
  std::span<const std::byte> bytes;
  std::filesystem::path name = "(in memory)";
};

class SnapshotReader {
 public:
  // Opens for SWMR reading (works while a writer appends). Throws gs::Error naming the file and the
  // problem: missing, not HDF5, not a gradscope snapshot, unknown version, inconsistent sizes.
  explicit SnapshotReader(const std::filesystem::path& path);
  // The same over a file image (no SWMR: an image does not grow).
  explicit SnapshotReader(const FileImage& image);
  ~SnapshotReader();
  SnapshotReader(SnapshotReader&&) noexcept;
  SnapshotReader& operator=(SnapshotReader&&) noexcept;

  const SnapshotMeta& meta() const;
  const std::vector<LayerInfo>& layers() const;
  const std::filesystem::path& path() const;
  std::size_t layer_index(const std::string& name) const;  // gs::Error if absent, listing names
  std::int64_t total_numel() const;                        // sum over layers

  // Re-reads the step count (new steps appended by a live writer become visible); returns it.
  std::size_t refresh();
  std::size_t step_count() const;  // as of the last refresh (or open)
  const std::vector<StepRecord>& steps() const;
  std::size_t step_index(std::int64_t step) const;  // gs::Error if not recorded
  // The loss and learning rate of every training step, recorded or not, read again on each call
  // (a live writer's new rows included); for a file without /losses, the recorded steps'.
  std::vector<StepRecord> losses() const;

  // One layer at one recorded step (by index into steps()); out.size() must equal numel.
  void read(std::size_t step_index, std::size_t layer_index, std::span<float> out) const;
  std::vector<float> read(std::size_t step_index, std::size_t layer_index) const;
  // Every layer of one step, concatenated in layers() order (total_numel() floats).
  std::vector<float> read_model(std::size_t step_index) const;
  // Streams steps [first, last) one at a time without loading the file: fn(index, record, flat).
  void for_each_step(std::size_t first, std::size_t last,
                     const std::function<void(std::size_t, const StepRecord&, std::span<const float>)>& fn) const;

  // Bytes the grad datasets occupy on disk (after compression); see storage_info().
  std::uint64_t stored_grad_bytes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Size of the file on disk and the raw (uncompressed) bytes of gradient data it holds.
struct StorageInfo {
  std::uint64_t file_bytes = 0;
  std::uint64_t raw_grad_bytes = 0;
  std::uint64_t stored_grad_bytes = 0;  // sum of H5Dget_storage_size over grad datasets
};
StorageInfo storage_info(const SnapshotReader& reader);

}  // namespace gs::data
