#pragma once
// Checkpoints of `gradscope train` (docs/training.md, "Checkpoints"). A checkpoint taken after S
// steps is the directory DIR/step-<S, 8 digits>/ holding
//   rank-<r>.ckpt   one per worker: "GSCKPT02", the payload's length (u64) and SHA-256 (32 bytes),
//                   then the payload (the worker's whole state, written by the trainer);
//   manifest.json   written once every worker's file is in place: what the run was (step, world
//                   size, model, compressor, the shared configuration line).
// Every file is written to a temporary name, flushed and renamed, so a checkpoint is either
// complete (a manifest) or ignored. Only the last --keep-checkpoints complete checkpoints are kept,
// and older ones go only once the new one is complete and this worker's file of it reads back.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "gs/distributed/config.hpp"

namespace gs::distributed {

// The SHA-256 of bytes, as 64 lowercase hex digits (OpenSSL).
std::string sha256_hex(std::string_view bytes);

// Writes bytes to path through a temporary file in the same directory (temporary_path), flushed,
// then renamed.
void write_atomically(const std::filesystem::path& path, std::string_view bytes);
// The temporary name this process writes path under: path.tmp.<pid>.
std::filesystem::path temporary_path(const std::filesystem::path& path);

struct CheckpointInfo {
  std::filesystem::path dir;  // DIR/step-<S>
  std::int64_t step = 0;      // steps done
  int workers = 0;
  std::string model, compressor;
  std::string description;  // TrainConfig::shared_description() of the run that wrote it
};

// The directory of the checkpoint after `step` steps under root.
std::filesystem::path checkpoint_dir(const std::filesystem::path& root, std::int64_t step);

// The latest complete checkpoint under root (root itself when it is one); nullopt when root holds
// none. gs::Error for a manifest that does not read.
std::optional<CheckpointInfo> latest_checkpoint(const std::filesystem::path& root);

// What `--resume DIR` continues from: the latest complete checkpoint, written by a run whose
// world size, model, compressor and shared options match this one's. gs::Error in one line
// otherwise, naming the setting that differs.
CheckpointInfo matching_checkpoint(const std::filesystem::path& dir, const TrainConfig& config);
// Reads and verifies every worker's file of info (present, whole, its SHA-256 right), or only rank
// `only_rank`'s when it is >= 0, as on a machine that holds one worker's files: gs::Error in one
// line naming the first bad file.
void verify_rank_files(const CheckpointInfo& info, int only_rank = -1);

// The file of worker `rank` in a checkpoint directory: rank-<rank>.ckpt.
std::filesystem::path rank_file(const std::filesystem::path& dir, int rank);
// One worker's part: its payload, written atomically into info.dir as rank-<rank>.ckpt.
void write_rank_state(const std::filesystem::path& dir, int rank, std::string_view payload);
// Its payload back, verified (gs::Error naming the file when missing, truncated or corrupt).
std::string read_rank_state(const std::filesystem::path& dir, int rank);

// The manifest, once every worker's file is written (each worker may write it: same content).
void write_manifest(const CheckpointInfo& info);
// Removes what lies under root older than the `keep` latest complete checkpoints (keep >= 1):
// complete ones and those a killed run left incomplete alike. The manifest goes first (the
// checkpoint is then incomplete), then this worker's file and its unfinished temporary files, then
// the directory once empty (the last worker to prune removes it).
void prune_checkpoints(const std::filesystem::path& root, int rank, int keep);

// `--checkpoint DIR` on a run that does not resume: gs::Error when DIR already holds checkpoints
// (they would be mixed with this run's), unless force, which removes them.
void prepare_checkpoint_root(const TrainConfig& config);

}  // namespace gs::distributed
