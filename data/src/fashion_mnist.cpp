// IDX reader (the format of MNIST and Fashion-MNIST): a big-endian header of magic number and
// dimensions, then unsigned bytes. zlib's gz* functions read gzip and plain files alike.
#include "gs/data/fashion_mnist.hpp"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "gs/base/error.hpp"

namespace gs::data {

namespace {

constexpr std::uint32_t kImagesMagic = 2051;  // 0x00000803: unsigned bytes, 3 dimensions
constexpr std::uint32_t kLabelsMagic = 2049;  // 0x00000801: unsigned bytes, 1 dimension
// Far above any real IDX file; guards against allocating from a corrupt header.
constexpr std::int64_t kMaxBytes = std::int64_t{1} << 32;

struct GzCloser {
  void operator()(gzFile_s* f) const { gzclose(f); }
};
using GzFile = std::unique_ptr<gzFile_s, GzCloser>;

class IdxStream {
 public:
  explicit IdxStream(const std::filesystem::path& path) : path_(path) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) throw gs::Error(path.string() + ": no such IDX file");
    file_.reset(gzopen(path.c_str(), "rb"));
    if (!file_) throw gs::Error(path.string() + ": cannot open the IDX file");
  }

  // Reads exactly n bytes or throws naming how many were missing.
  // n bytes; `before` and `total` place them in a longer read, for the message when it ends early.
  void read_exact(void* out, std::int64_t n, const char* what, std::int64_t before = 0, std::int64_t total = -1) {
    auto* p = static_cast<unsigned char*>(out);
    std::int64_t done = 0;
    while (done < n) {
      const auto want = static_cast<unsigned>(std::min<std::int64_t>(n - done, std::numeric_limits<int>::max() / 2));
      const int got = gzread(file_.get(), p + done, want);
      if (got < 0) {
        int code = 0;
        const char* msg = gzerror(file_.get(), &code);
        throw gs::Error(path_.string() + ": corrupt compressed data while reading " + what + " (" +
                        (msg ? msg : "zlib error") + ")");
      }
      if (got == 0)
        throw gs::Error(path_.string() + ": file ends early: " + what + " needs " +
                        std::to_string(total < 0 ? n : total) + " bytes, only " + std::to_string(before + done) +
                        " present");
      done += got;
    }
  }

  // n bytes into out, which grows with the data that arrives (at most 16 MiB ahead of it): a
  // header that claims gigabytes for a file of a few bytes fails with "file ends early" without
  // allocating them first.
  void read_growing(std::vector<std::uint8_t>& out, std::int64_t n, const char* what) {
    constexpr std::int64_t kBlock = std::int64_t{1} << 24;
    out.clear();
    while (std::int64_t(out.size()) < n) {
      const std::int64_t at = std::int64_t(out.size()), step = std::min(n - at, kBlock);
      out.resize(static_cast<std::size_t>(at + step));
      read_exact(out.data() + at, step, what, at, n);
    }
  }

  std::uint32_t read_be32(const char* what) {
    std::array<unsigned char, 4> b{};
    read_exact(b.data(), 4, what);
    return (std::uint32_t{b[0]} << 24) | (std::uint32_t{b[1]} << 16) | (std::uint32_t{b[2]} << 8) | std::uint32_t{b[3]};
  }

  void expect_end() {
    unsigned char extra = 0;
    const int got = gzread(file_.get(), &extra, 1);
    if (got != 0) throw gs::Error(path_.string() + ": data continues past the size its header gives");
  }

  void expect_magic(std::uint32_t expected, const char* kind) {
    const std::uint32_t magic = read_be32("the magic number");
    if (magic != expected)
      throw gs::Error(path_.string() + ": magic number " + std::to_string(magic) + " is not that of an IDX " + kind +
                      " file (" + std::to_string(expected) + ")");
  }

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  GzFile file_;
};

}  // namespace

IdxImages read_idx_images(const std::filesystem::path& path) {
  IdxStream in(path);
  in.expect_magic(kImagesMagic, "images");
  IdxImages images;
  images.count = in.read_be32("the image count");
  images.rows = in.read_be32("the row count");
  images.cols = in.read_be32("the column count");
  if (images.rows == 0 || images.cols == 0)
    throw gs::Error(path.string() + ": images of " + std::to_string(images.rows) + "x" + std::to_string(images.cols) +
                    " pixels hold nothing");
  // Each factor is below 2^32: the product is checked one factor at a time, before it can overflow.
  const bool too_many = images.cols > kMaxBytes / images.rows ||
                        (images.count > 0 && images.rows * images.cols > kMaxBytes / images.count);
  if (too_many)
    throw gs::Error(path.string() + ": header claims " + std::to_string(images.count) + " images of " +
                    std::to_string(images.rows) + "x" + std::to_string(images.cols) +
                    " pixels, more than 4 GiB; the file is corrupt");
  const std::int64_t bytes = images.count * images.rows * images.cols;
  in.read_growing(images.pixels, bytes, "the pixels");
  in.expect_end();
  return images;
}

IdxLabels read_idx_labels(const std::filesystem::path& path) {
  IdxStream in(path);
  in.expect_magic(kLabelsMagic, "labels");
  const std::int64_t count = in.read_be32("the label count");
  if (count > kMaxBytes) throw gs::Error(path.string() + ": label count is corrupt");
  IdxLabels labels;
  in.read_growing(labels.labels, count, "the labels");
  in.expect_end();
  return labels;
}

std::filesystem::path fashion_mnist_dir() {
  if (const char* env = std::getenv("GS_FASHION_MNIST_DIR"); env != nullptr && *env != '\0') return env;
  return "/usr/share/datasets/fashion-mnist";
}

namespace {
// Debian ships the files gzip-compressed; an unpacked copy works too.
std::filesystem::path idx_file(const std::filesystem::path& dir, const std::string& stem) {
  std::error_code ec;
  const auto gz = dir / (stem + ".gz");
  if (std::filesystem::exists(gz, ec)) return gz;
  const auto raw = dir / stem;
  if (std::filesystem::exists(raw, ec)) return raw;
  throw gs::Error((dir / (stem + ".gz")).string() +
                  ": Fashion-MNIST file missing; install the Debian package dataset-fashion-mnist "
                  "(apt-get install dataset-fashion-mnist) or point GS_FASHION_MNIST_DIR at a "
                  "directory holding it");
}
}  // namespace

namespace {
struct Preloaded {
  std::mutex mutex;
  std::map<std::pair<std::string, std::filesystem::path>, FashionMnist> sets;
};
Preloaded& preloaded() {
  static Preloaded p;
  return p;
}
FashionMnist read_fashion_mnist(const std::string& split, const std::filesystem::path& dir);
}  // namespace

void preload_fashion_mnist(const std::string& split, const std::filesystem::path& dir) {
  auto& p = preloaded();
  {
    const std::lock_guard<std::mutex> lock(p.mutex);
    if (p.sets.count({split, dir})) return;
  }
  FashionMnist data = read_fashion_mnist(split, dir);
  const std::lock_guard<std::mutex> lock(p.mutex);
  p.sets.emplace(std::make_pair(split, dir), std::move(data));
}

FashionMnist load_fashion_mnist(const std::string& split, const std::filesystem::path& dir) {
  {
    auto& p = preloaded();
    const std::lock_guard<std::mutex> lock(p.mutex);
    const auto it = p.sets.find({split, dir});
    if (it != p.sets.end()) {
      FashionMnist data = std::move(it->second);
      p.sets.erase(it);
      return data;
    }
  }
  return read_fashion_mnist(split, dir);
}

namespace {
FashionMnist read_fashion_mnist(const std::string& split, const std::filesystem::path& dir) {
  std::string prefix;
  if (split == "train") {
    prefix = "train";
  } else if (split == "test") {
    prefix = "t10k";
  } else {
    throw gs::Error("Fashion-MNIST split '" + split + "' is unknown; use 'train' or 'test'");
  }
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    throw gs::Error(dir.string() +
                    ": no Fashion-MNIST directory; install the Debian package "
                    "dataset-fashion-mnist (apt-get install dataset-fashion-mnist) or set "
                    "GS_FASHION_MNIST_DIR");
  const auto images_path = idx_file(dir, prefix + "-images-idx3-ubyte");
  const auto labels_path = idx_file(dir, prefix + "-labels-idx1-ubyte");
  FashionMnist data{read_idx_images(images_path), read_idx_labels(labels_path)};
  if (data.images.rows != 28 || data.images.cols != 28)
    throw gs::Error(images_path.string() + ": Fashion-MNIST images are 28x28, these are " +
                    std::to_string(data.images.rows) + "x" + std::to_string(data.images.cols));
  if (static_cast<std::int64_t>(data.labels.labels.size()) != data.images.count)
    throw gs::Error(labels_path.string() + ": holds " + std::to_string(data.labels.labels.size()) + " labels but " +
                    images_path.string() + " holds " + std::to_string(data.images.count) + " images");
  for (std::size_t i = 0; i < data.labels.labels.size(); ++i)
    if (data.labels.labels[i] > 9)
      throw gs::Error(labels_path.string() + ": label " + std::to_string(data.labels.labels[i]) + " at index " +
                      std::to_string(i) + " is outside 0..9");
  return data;
}
}  // namespace

}  // namespace gs::data
