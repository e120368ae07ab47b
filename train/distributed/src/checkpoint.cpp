// Checkpoint files: atomic writes, the rank files' header and digest, the manifest, finding the
// latest complete checkpoint and refusing one that does not belong to this run.
#include "gs/distributed/checkpoint.hpp"

#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "gs/base/error.hpp"

namespace fs = std::filesystem;

namespace gs::distributed {

namespace {

// The payload's format: 02 added the density schedule's state and the steps' critical flags; 03
// SIDCo's carried estimate and the steps' estimate, correction and exact top-k counts.
constexpr std::string_view kMagic = "GSCKPT03";
constexpr std::size_t kDigestBytes = 32;
constexpr std::size_t kHeaderBytes = 8 + 8 + kDigestBytes;
constexpr int kManifestFormat = 1;
// Options a resumed run may change: how often it checkpoints and how many it keeps.
constexpr std::string_view kMayDiffer[] = {"checkpoint-every", "keep-checkpoints"};

std::string sha256_raw(std::string_view bytes) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), md, &len, EVP_sha256(), nullptr) != 1 || len != kDigestBytes)
    throw Error("SHA-256 failed (OpenSSL)");
  return std::string(reinterpret_cast<const char*>(md), len);
}

std::string hex(std::string_view raw) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string s;
  for (unsigned char c : raw) {
    s += digits[c >> 4];
    s += digits[c & 15];
  }
  return s;
}

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) throw Error("cannot read " + p.string() + ": " + std::strerror(errno));
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// step-<digits> directories under root, by step.
std::map<std::int64_t, fs::path> step_dirs(const fs::path& root) {
  std::map<std::int64_t, fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    const std::string name = e.path().filename().string();
    if (!e.is_directory() || name.rfind("step-", 0) != 0 || name.size() == 5 || name.size() > 5 + 18) continue;
    if (!std::all_of(name.begin() + 5, name.end(), [](char c) { return c >= '0' && c <= '9'; })) continue;
    out[std::stoll(name.substr(5))] = e.path();
  }
  return out;
}

CheckpointInfo read_manifest(const fs::path& dir) {
  const fs::path p = dir / "manifest.json";
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(slurp(p));
    CheckpointInfo info;
    if (j.at("format").get<int>() != kManifestFormat)
      throw Error("checkpoint " + p.string() + " has format " + j.at("format").dump() +
                  ", this gradscope reads format " + std::to_string(kManifestFormat));
    info.dir = dir;
    info.step = j.at("step").get<std::int64_t>();
    info.workers = j.at("workers").get<int>();
    info.model = j.at("model").get<std::string>();
    info.compressor = j.at("compressor").get<std::string>();
    info.description = j.at("config").get<std::string>();
    return info;
  } catch (const nlohmann::json::exception& e) {
    throw Error("checkpoint manifest " + p.string() + " is damaged: " + e.what());
  }
}

// "key=value key=value" -> map (values hold no spaces: the option table's text forms).
std::map<std::string, std::string> settings(const std::string& description) {
  std::map<std::string, std::string> m;
  std::istringstream s(description);
  std::string kv;
  while (s >> kv) {
    const auto eq = kv.find('=');
    m[kv.substr(0, eq)] = eq == std::string::npos ? "" : kv.substr(eq + 1);
  }
  return m;
}

// The first setting of the checkpoint's run that this one has otherwise, or "". A setting only
// this run names is an option newer than the checkpoint (or one that matters only here, which a
// setting both name tells apart): a checkpoint of an earlier version resumes.
std::string first_difference(const std::string& theirs, const std::string& ours) {
  auto a = settings(theirs), b = settings(ours);
  for (auto k : kMayDiffer) a.erase(std::string(k)), b.erase(std::string(k));
  for (const auto& [k, v] : a) {
    const auto it = b.find(k);
    const std::string mine = it == b.end() ? "(not set)" : it->second;
    if (mine != v) return "--" + k + " " + v + " (this run: " + mine + ")";
  }
  return "";
}

}  // namespace

std::string sha256_hex(std::string_view bytes) { return hex(sha256_raw(bytes)); }

fs::path temporary_path(const fs::path& path) { return path.string() + ".tmp." + std::to_string(::getpid()); }

fs::path rank_file(const fs::path& dir, int rank) { return dir / ("rank-" + std::to_string(rank) + ".ckpt"); }

void write_atomically(const fs::path& path, std::string_view bytes) {
  const fs::path tmp = temporary_path(path);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error("cannot write " + tmp.string() + ": " + std::strerror(errno));
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      const int err = errno;
      ::close(fd);
      fs::remove(tmp);
      throw Error("cannot write " + tmp.string() + ": " + std::strerror(err));
    }
    done += std::size_t(w);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const int err = errno;
    fs::remove(tmp);
    throw Error("cannot write " + tmp.string() + ": " + std::strerror(err));
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp);
    throw Error("cannot rename " + tmp.string() + " to " + path.string() + ": " + ec.message());
  }
}

fs::path checkpoint_dir(const fs::path& root, std::int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%08lld", static_cast<long long>(step));
  return root / name;
}

std::optional<CheckpointInfo> latest_checkpoint(const fs::path& root) {
  if (fs::exists(root / "manifest.json")) return read_manifest(root);
  const auto dirs = step_dirs(root);
  for (auto it = dirs.rbegin(); it != dirs.rend(); ++it)
    if (fs::exists(it->second / "manifest.json")) return read_manifest(it->second);
  return std::nullopt;
}

CheckpointInfo matching_checkpoint(const fs::path& dir, const TrainConfig& config) {
  if (!fs::is_directory(dir)) throw Error("--resume " + dir.string() + ": no such directory");
  const auto found = latest_checkpoint(dir);
  if (!found) throw Error("--resume " + dir.string() + " holds no complete checkpoint (no step-*/manifest.json)");
  const CheckpointInfo& info = *found;
  const std::string where = "checkpoint " + info.dir.string();
  if (info.workers != config.workers)
    throw Error(where + " was written by " + std::to_string(info.workers) + " workers; this run has --workers " +
                std::to_string(config.workers));
  if (info.model != config.model)
    throw Error(where + " is of model " + info.model + "; this run trains --model " + config.model);
  if (info.compressor != config.compressor)
    throw Error(where + " is of compressor " + info.compressor + "; this run uses --compressor " + config.compressor);
  if (const auto d = first_difference(info.description, config.shared_description()); !d.empty())
    throw Error(where + " was written with " + d);
  return info;
}

void verify_rank_files(const CheckpointInfo& info, int only_rank) {
  for (int r = 0; r < info.workers; ++r)
    if (only_rank < 0 || r == only_rank) (void)read_rank_state(info.dir, r);
}

void write_rank_state(const fs::path& dir, int rank, std::string_view payload) {
  std::string bytes(kMagic);
  const std::uint64_t n = payload.size();
  bytes.append(reinterpret_cast<const char*>(&n), sizeof n);
  bytes += sha256_raw(payload);
  bytes += payload;
  write_atomically(rank_file(dir, rank), bytes);
}

std::string read_rank_state(const fs::path& dir, int rank) {
  const fs::path p = rank_file(dir, rank);
  if (!fs::exists(p)) throw Error("checkpoint file " + p.string() + " is missing");
  std::string bytes = slurp(p);
  if (bytes.size() >= kHeaderBytes && bytes.starts_with("GSCKPT") && std::string_view(bytes).substr(0, 8) != kMagic)
    throw Error("checkpoint file " + p.string() + " is of another gradscope version (" + bytes.substr(0, 8) +
                ", this one reads " + std::string(kMagic) + "): resume it with the gradscope that wrote it");
  if (bytes.size() < kHeaderBytes || std::string_view(bytes).substr(0, 8) != kMagic)
    throw Error("checkpoint file " + p.string() + " is not a gradscope checkpoint (bad header)");
  std::uint64_t n = 0;
  std::memcpy(&n, bytes.data() + 8, sizeof n);
  if (bytes.size() - kHeaderBytes != n)
    throw Error("checkpoint file " + p.string() +
                " is truncated or padded: " + std::to_string(bytes.size() - kHeaderBytes) +
                " bytes of payload, its header says " + std::to_string(n));
  const std::string_view payload = std::string_view(bytes).substr(kHeaderBytes);
  if (sha256_raw(payload) != std::string_view(bytes).substr(16, kDigestBytes))
    throw Error("checkpoint file " + p.string() + " is corrupt: its SHA-256 does not match");
  return std::string(payload);
}

void write_manifest(const CheckpointInfo& info) {
  const nlohmann::json j = {{"format", kManifestFormat},     {"step", info.step},
                            {"workers", info.workers},       {"model", info.model},
                            {"compressor", info.compressor}, {"config", info.description}};
  write_atomically(info.dir / "manifest.json", j.dump(2) + "\n");
}

void prune_checkpoints(const fs::path& root, int rank, int keep) {
  if (keep < 1) throw Error("--keep-checkpoints must be at least 1");
  const auto dirs = step_dirs(root);
  // The oldest step kept: that of the keep-th latest complete checkpoint.
  std::int64_t oldest_kept = -1;
  int found = 0;
  for (auto it = dirs.rbegin(); it != dirs.rend() && found < keep; ++it)
    if (fs::exists(it->second / "manifest.json")) oldest_kept = it->first, ++found;
  if (found < keep) return;
  const std::string own = rank_file(fs::path(), rank).string();
  std::error_code ec;
  for (const auto& [step, dir] : dirs) {
    if (step >= oldest_kept) break;
    fs::remove(dir / "manifest.json", ec);
    std::vector<fs::path> mine;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      const std::string name = e.path().filename().string();
      if (name == own || name.starts_with(own + ".tmp.")) mine.push_back(e.path());
    }
    for (const auto& p : mine) fs::remove(p, ec);
    fs::remove(dir, ec);  // once empty
  }
}

void prepare_checkpoint_root(const TrainConfig& config) {
  if (config.checkpoint.empty()) return;
  const fs::path root = config.checkpoint;
  if (fs::exists(root) && !fs::is_directory(root))
    throw Error("--checkpoint " + root.string() + " exists and is not a directory");
  const auto dirs = step_dirs(root);
  if (!dirs.empty() && config.resume.empty()) {
    if (!config.force)
      throw Error("--checkpoint " + root.string() + " already holds checkpoints (" +
                  dirs.rbegin()->second.filename().string() + "); continue with --resume " + root.string() +
                  ", or pass --force to delete them");
    for (const auto& [step, dir] : dirs) fs::remove_all(dir);
  }
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec) throw Error("cannot create --checkpoint " + root.string() + ": " + ec.message());
}

}  // namespace gs::distributed
