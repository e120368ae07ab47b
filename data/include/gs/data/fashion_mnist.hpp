#pragma once
// Fashion-MNIST as shipped by Debian's dataset-fashion-mnist (/usr/share/datasets/fashion-mnist,
// gzip-compressed IDX files). Magic numbers, dimensions and file sizes are checked.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace gs::data {

struct IdxImages {
  std::int64_t count = 0, rows = 0, cols = 0;
  std::vector<std::uint8_t> pixels;  // count * rows * cols, row-major
};
struct IdxLabels {
  std::vector<std::uint8_t> labels;
};

// Reads an IDX file, gzip-compressed or raw. gs::Error on a bad magic, short file or wrong sizes.
IdxImages read_idx_images(const std::filesystem::path& path);
IdxLabels read_idx_labels(const std::filesystem::path& path);

struct FashionMnist {
  IdxImages images;
  IdxLabels labels;  // 0..9, one per image
};

// $GS_FASHION_MNIST_DIR if set, else /usr/share/datasets/fashion-mnist.
std::filesystem::path fashion_mnist_dir();
// split: "train" (60000) or "test" (10000). gs::Error, naming the package to install, when absent.
FashionMnist load_fashion_mnist(const std::string& split, const std::filesystem::path& dir = fashion_mnist_dir());
// Reads SPLIT now and keeps it for the next load_fashion_mnist of the same split and directory in
// this process, or in each fork of it made before that load: a launcher that forks its workers
// decodes the files once for all of them. The same errors as load_fashion_mnist.
void preload_fashion_mnist(const std::string& split, const std::filesystem::path& dir = fashion_mnist_dir());

}  // namespace gs::data
