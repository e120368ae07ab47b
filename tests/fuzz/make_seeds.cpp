// Writes the fuzz targets' seed corpus (tests/fuzz/corpus/<target>/): small valid inputs of every
// format, so that fuzzing starts from files the readers accept and mutates from there.
//   gs_fuzz_seeds DIR      (DIR: tests/fuzz/corpus; existing seeds are replaced)
#include <unistd.h>
#include <zlib.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "gs/analyzer/analyze.hpp"
#include "gs/compress/compressor.hpp"
#include "gs/compress/payload.hpp"
#include "gs/data/npy.hpp"
#include "gs/data/snapshot.hpp"
#include "gs/base/error.hpp"
#include "base_files.hpp"
#include "state_setups.hpp"

namespace fs = std::filesystem;

namespace {

fs::path root;

void put(const std::string& target, const std::string& name, const void* data, std::size_t size) {
  const fs::path dir = root / target;
  fs::create_directories(dir);
  std::ofstream out(dir / name, std::ios::binary | std::ios::trunc);
  out.write(static_cast<const char*>(data), std::streamsize(size));
  if (!out) throw gs::Error("cannot write " + (dir / name).string());
}
void put(const std::string& target, const std::string& name, const std::string& text) {
  put(target, name, text.data(), text.size());
}
using gs::fuzz::laplace;
using gs::fuzz::slurp;

// An .npy file by hand: any dtype text, shape and order, data as given.
std::string npy(const std::string& descr, const std::string& shape, bool fortran, const std::string& body) {
  std::string header =
      "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") + ", 'shape': " + shape + ", }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY";
  out += char(1);
  out += char(0);
  out += char(header.size() & 0xff);
  out += char(header.size() >> 8);
  return out + header + body;
}

void npy_seeds(const fs::path& tmp) {
  const auto g = laplace(64, 1);
  gs::data::write_npy(tmp / "a.npy", g, true);
  put("npy", "f4_1d.npy", slurp(tmp / "a.npy"));
  std::vector<double> d(12);
  for (std::size_t i = 0; i < d.size(); ++i) d[i] = 1e-3 * double(i) - 5e-3;
  put("npy", "f8_3x4.npy",
      npy("<f8", "(3, 4)", false, std::string(reinterpret_cast<const char*>(d.data()), d.size() * 8)));
  put("npy", "f4_fortran.npy", npy("<f4", "(2, 2)", true, std::string(16, '\0')));
  put("npy", "f4_scalar.npy", npy("<f4", "()", false, std::string(4, '\0')));
  put("npy", "f4_empty.npy", npy("<f4", "(0,)", false, ""));
}

std::string be32(std::uint32_t v) { return {char(v >> 24), char(v >> 16), char(v >> 8), char(v)}; }
std::string gzip(const std::string& raw) {
  z_stream z{};
  deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
  std::string out(compressBound(uLong(raw.size())) + 64, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(raw.data()));
  z.avail_in = uInt(raw.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = uInt(out.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

void idx_seeds() {
  std::string images = be32(0x803) + be32(2) + be32(4) + be32(4);
  for (int i = 0; i < 32; ++i) images += char(i * 7);
  const std::string labels = be32(0x801) + be32(3) + std::string("\x01\x07\x09", 3);
  put("idx", "images_raw", "\x00" + images);  // first byte: 0 images, 1 labels
  put("idx", "images_gz", "\x00" + gzip(images));
  put("idx", "labels_raw", "\x01" + labels);
  put("idx", "labels_gz", "\x01" + gzip(labels));
}

// The edit scripts of the structure-aware HDF5 targets (h5_edit.hpp, over base_files.hpp's
// files): none (the file as written), then one edit of each kind.
void snapshot_and_analysis_seeds() {
  for (const std::string target : {"snapshot_edits", "analysis_edits"}) {
    put(target, "as_written", "");
    put(target, "attribute_deleted", std::string("\x00\x00\x00", 3));
    put(target, "attribute_retyped", std::string("\x01\x00\x01\x01\x03\x02\x07\x00\x00\x00\x00\x00\x00\x00", 14));
    put(target, "dataset_replaced", std::string("\x03\x03\x00\x02\x04\x05\x04", 7) + std::string(80, '\x7f'));
    put(target, "dataset_resized", std::string("\x04\x04\x00\x05\x05\x05", 6));
    put(target, "values_overwritten", std::string("\x05\x05\x00", 3) + std::string(64, '\xff'));
  }
}

void payload_and_exchange_seeds() {
  const auto g = laplace(320, 3);
  const auto names = gs::compress::compressor_names();
  for (std::size_t i = 0; i < names.size(); ++i) {
    const std::string name(names[i]);
    auto c = gs::compress::make_compressor(name, gs::compress::density_based(name) ? 0.05 : 1.0);
    if (c->exchange() != gs::compress::Exchange::collective && name != "variance") {
      const auto bytes = gs::compress::encode(c->compress(g, "t").payload);
      put("payload", name, bytes.data(), bytes.size());
    }
    // exchange: the compressor's index, then the peers' data (here: changes to its own payload).
    std::string ex(1, char(i));
    for (int k = 0; k < 64; ++k) ex += char((k * 37 + int(i)) & 0xff);
    put("exchange", name, ex);
  }
}

// state: each core of state_setups.hpp after 30 steps (past every window it carries), saved.
void state_seeds() {
  const auto& setups = gs::fuzz::state_setups();
  for (std::size_t i = 0; i < setups.size(); ++i) {
    gs::fuzz::StateSubject subject(setups[i]);
    for (std::uint64_t s = 0; s < 30; ++s) subject.step(s);
    const std::string state = std::string(1, char(i)) + subject.save();
    put("state", std::to_string(i) + "-" + setups[i].method, state);
  }
}

void option_seeds() {
  put("fit_options", "json", "--json");
  put("fit_options", "ratios", "--ratios\n0.1,0.01\n--dists\ngamma,gpareto");
  put("fit_options", "methods", "--methods\ntopk,sidco-e,sidco-topk\n--stages\n2\n--backend\ncpu");
  put("fit_options", "ks", "--ks-max-points\n100\n--seed\n7\n--json");
  put("train_options", "sidco", "--model\ncnn\n--compressor\nsidco-e\n--ratio\n0.01\n--workers\n2");
  put("train_options", "warmup",
      "--compressor\ndgc\n--warmup-steps\n10\n--warmup-schedule\nexponential\n--warmup-start-ratio\n0.25");
  put("train_options", "quantizer",
      "--compressor\nqsgd-mn-ts\n--bits\n6,10\n--granularity\nbucket\n--bucket-size\n1000");
  put("train_options", "flags", "--momentum-correction\n--compressor\ntopk\n--json\n--quiet\n--lr-schedule\ncosine");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: gs_fuzz_seeds DIR   (DIR: tests/fuzz/corpus)\n");
    return 2;
  }
  try {
    root = argv[1];
    const fs::path tmp = fs::temp_directory_path() / ("gs-fuzz-seeds-" + std::to_string(::getpid()));
    fs::create_directories(tmp);
    npy_seeds(tmp);
    idx_seeds();
    snapshot_and_analysis_seeds();
    payload_and_exchange_seeds();
    option_seeds();
    state_seeds();
    fs::remove_all(tmp);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gs_fuzz_seeds: %s\n", e.what());
    return 1;
  }
  return 0;
}
