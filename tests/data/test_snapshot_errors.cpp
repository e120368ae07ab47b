// Every way a snapshot can be bad gives gs::Error naming the file and the problem. Bad files are
// made from good ones with the HDF5 C API (or by cutting them).
#include <hdf5.h>

#include <fstream>

#include "data_test_util.hpp"

namespace gs::data::test {
namespace {

void write_valid(const std::filesystem::path& path, int steps) {
  SnapshotMeta meta;
  meta.model = "mlp";
  meta.seed = 1;
  SnapshotWriter writer(path, meta, {{"w", {4, 3}}, {"b", {4}}});
  for (int s = 0; s < steps; ++s) {
    const auto w = synthetic_grad(1, s, 0, 12), b = synthetic_grad(1, s, 1, 4);
    const std::vector<std::span<const float>> g{w, b};
    writer.append({s, 1.0 / (s + 1), 0.01}, g);
  }
}

// Opens a closed snapshot read-write for surgery; closes on scope exit.
class Surgery {
 public:
  explicit Surgery(const std::filesystem::path& path) {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    file_ = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    EXPECT_GE(file_, 0) << "cannot open " << path << " for surgery";
  }
  ~Surgery() { H5Fclose(file_); }
  hid_t file() const { return file_; }
  void set_rows(const char* dset, hsize_t rows, hsize_t cols = 0) {
    const hid_t d = H5Dopen2(file_, dset, H5P_DEFAULT);
    ASSERT_GE(d, 0) << dset;
    const hsize_t dims[2] = {rows, cols};
    EXPECT_GE(H5Dset_extent(d, dims), 0) << dset;
    H5Dclose(d);
  }

 private:
  hid_t file_ = -1;
};

// After every case no HDF5 identifier may remain open: errors thrown half-way must release all.
class SnapshotErrors : public ::testing::Test {
 protected:
  void TearDown() override {
    EXPECT_EQ(H5Fget_obj_count(static_cast<hid_t>(H5F_OBJ_ALL), H5F_OBJ_ALL), 0) << "HDF5 identifiers leaked";
  }
};

TEST_F(SnapshotErrors, MissingFile) {
  ScratchDir dir;
  const auto path = dir / "absent.h5";
  expect_error([&] { SnapshotReader r(path); }, {path.string(), "no such file"});
}

TEST_F(SnapshotErrors, TextFileIsNotHdf5) {
  ScratchDir dir;
  const auto path = dir / "notes.h5";
  std::ofstream(path) << "step,loss\n0,2.3\n1,2.1\n";
  expect_error([&] { SnapshotReader r(path); }, {path.string(), "not an HDF5 file"});
}

TEST_F(SnapshotErrors, Hdf5WithoutOurLayout) {
  ScratchDir dir;
  const auto path = dir / "other.h5";
  {
    const hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    const hsize_t dims[1] = {3};
    const hid_t space = H5Screate_simple(1, dims, nullptr);
    const hid_t d = H5Dcreate2(f, "temperature", H5T_IEEE_F64LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    const double t[3] = {20.5, 21.0, 19.8};
    H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, t);
    H5Dclose(d);
    H5Sclose(space);
    H5Fclose(f);
  }
  expect_error([&] { SnapshotReader r(path); }, {path.string(), "not a gradscope snapshot"});
}

TEST_F(SnapshotErrors, WrongFormatName) {
  ScratchDir dir;
  const auto path = dir / "run.h5";
  write_valid(path, 2);
  {
    Surgery s(path);
    H5Adelete(s.file(), "format");
    const hid_t type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, H5T_VARIABLE);
    const hid_t space = H5Screate(H5S_SCALAR);
    const hid_t a = H5Acreate2(s.file(), "format", type, space, H5P_DEFAULT, H5P_DEFAULT);
    const char* other = "someone-elses-format";
    H5Awrite(a, type, &other);
    H5Aclose(a);
    H5Sclose(space);
    H5Tclose(type);
  }
  expect_error([&] { SnapshotReader r(path); }, {path.string(), "someone-elses-format"});
}

TEST_F(SnapshotErrors, UnknownFormatVersion) {
  ScratchDir dir;
  const auto path = dir / "run.h5";
  write_valid(path, 2);
  {
    Surgery s(path);
    const hid_t a = H5Aopen(s.file(), "format_version", H5P_DEFAULT);
    ASSERT_GE(a, 0);
    const std::int32_t v = 7;
    EXPECT_GE(H5Awrite(a, H5T_NATIVE_INT32, &v), 0);
    H5Aclose(a);
  }
  expect_error([&] { SnapshotReader r(path); }, {path.string(), "version 7", "version 1"});
}

TEST_F(SnapshotErrors, TruncatedFile) {
  ScratchDir dir;
  const auto good = dir / "run.h5";
  write_valid(good, 5);
  const auto cut = dir / "cut.h5";
  std::filesystem::copy_file(good, cut);
  std::filesystem::resize_file(cut, std::filesystem::file_size(good) / 2);
  expect_error([&] { SnapshotReader r(cut); }, {cut.string(), "truncated"});
  // The original still reads.
  SnapshotReader r(good);
  EXPECT_EQ(r.step_count(), 5u);
}

TEST_F(SnapshotErrors, GradRowsDisagreeWithSteps) {
  ScratchDir dir;
  const auto path = dir / "run.h5";
  write_valid(path, 5);
  {
    Surgery s(path);
    s.set_rows("/layers/b/grad", 2, 4);
  }
  expect_error([&] { SnapshotReader r(path); },
               {path.string(), "sizes disagree", "/steps has 5 rows", "/layers/b has 2 grad rows"});
}

TEST_F(SnapshotErrors, OneStepBehindIsAPartialStepNotAnError) {
  // What a crash mid-append leaves: one layer already has the next row, /steps does not.
  ScratchDir dir;
  const auto path = dir / "run.h5";
  write_valid(path, 4);
  {
    Surgery s(path);
    s.set_rows("/steps", 3);
  }
  SnapshotReader r(path);
  EXPECT_EQ(r.step_count(), 3u);
  EXPECT_EQ(r.steps().back().step, 2);
}

TEST_F(SnapshotErrors, NumelDisagreesWithShape) {
  ScratchDir dir;
  const auto path = dir / "run.h5";
  write_valid(path, 2);
  {
    Surgery s(path);
    const hid_t d = H5Dopen2(s.file(), "/layers/w/grad", H5P_DEFAULT);
    const hid_t a = H5Aopen(d, "shape", H5P_DEFAULT);
    const std::int64_t shape[2] = {5, 3};
    EXPECT_GE(H5Awrite(a, H5T_NATIVE_INT64, shape), 0);
    H5Aclose(a);
    H5Dclose(d);
  }
  expect_error([&] { SnapshotReader r(path); }, {path.string(), "sizes disagree", "/layers/w/grad", "12", "15"});
}

TEST_F(SnapshotErrors, LayerStepNumbersDisagreeWithSteps) {
  ScratchDir dir;
  const auto path = dir / "run.h5";
  write_valid(path, 3);
  {
    Surgery s(path);
    const hid_t d = H5Dopen2(s.file(), "/layers/w/step", H5P_DEFAULT);
    const std::int64_t steps[3] = {0, 1, 99};
    EXPECT_GE(H5Dwrite(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, steps), 0);
    H5Dclose(d);
  }
  expect_error([&] { SnapshotReader r(path); }, {path.string(), "/layers/w/step", "99"});
}

TEST_F(SnapshotErrors, MissingLayerDatasetAndMissingSteps) {
  ScratchDir dir;
  const auto path = dir / "run.h5";
  write_valid(path, 2);
  {
    Surgery s(path);
    EXPECT_GE(H5Ldelete(s.file(), "/layers/b/step", H5P_DEFAULT), 0);
  }
  expect_error([&] { SnapshotReader r(path); }, {path.string(), "/layers/b", "'step'"});

  const auto path2 = dir / "run2.h5";
  write_valid(path2, 2);
  {
    Surgery s(path2);
    EXPECT_GE(H5Ldelete(s.file(), "/steps", H5P_DEFAULT), 0);
  }
  expect_error([&] { SnapshotReader r(path2); }, {path2.string(), "/steps"});

  const auto path3 = dir / "run3.h5";
  write_valid(path3, 2);
  {
    Surgery s(path3);
    EXPECT_GE(H5Adelete(s.file(), "seed"), 0);
  }
  expect_error([&] { SnapshotReader r(path3); }, {path3.string(), "'seed'"});
}

}  // namespace
}  // namespace gs::data::test
