// The results store: incremental re-runs add only new steps, other options or sources are refused,
// nothing is overwritten without force, bad input files give clear errors, and rows of a step cut
// off before its commit are dropped.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <cmath>
#include <fstream>
#include <map>

#include "gs/analyzer/analyze.hpp"
#include "gs/base/error.hpp"
#include "synthetic_snapshot.hpp"
#include "common/temp_dir.hpp"
#include "error_text.hpp"

namespace gs::analyzer {
namespace {

namespace fs = std::filesystem;
using gs::testing::TempDir;

AnalyzeConfig config_for(const TempDir& dir) {
  AnalyzeConfig c;
  c.input = dir / "snap.h5";
  c.output = dir / "analysis.h5";
  c.backend = "cpu";
  c.densities = {0.1, 0.01};
  c.dists = {"exponential", "gamma"};
  c.methods = {"topk", "sidco-e", "dgc"};
  return c;
}

using test::error_of;

void expect_fit_rows_equal(const FitRow& a, const FitRow& b) {
  EXPECT_EQ(a.step, b.step);
  EXPECT_EQ(a.scope, b.scope);
  EXPECT_EQ(a.dist, b.dist);
  EXPECT_EQ(a.param1, b.param1);
  EXPECT_EQ(a.loglik, b.loglik);
  EXPECT_EQ(a.ks_D, b.ks_D);
}

TEST(Store, ReRunOnAGrownSnapshotAddsOnlyTheNewSteps) {
  TempDir dir;
  const std::string created = "2026-03-04T05:06:07Z";
  test::write_synthetic_snapshot(dir / "snap.h5", 3, 7, 10, created);
  const AnalyzeConfig c = config_for(dir);
  const AnalyzeResult first = analyze(c);
  EXPECT_TRUE(first.created);
  EXPECT_EQ(first.steps_analyzed, 3u);
  std::vector<FitRow> fits_before;
  std::vector<ThresholdRow> th_before;
  {
    const AnalysisReader r(c.output);
    fits_before = r.fits();
    th_before = r.thresholds();
  }

  // The run went on: the same run with two more steps (same data for the shared steps).
  test::write_synthetic_snapshot(dir / "grown.h5", 5, 7, 10, created);
  fs::copy_file(dir / "grown.h5", c.input, fs::copy_options::overwrite_existing);
  const AnalyzeResult second = analyze(c);
  EXPECT_FALSE(second.created);
  EXPECT_EQ(second.steps_selected, 5u);
  EXPECT_EQ(second.steps_skipped, 3u);
  EXPECT_EQ(second.steps_analyzed, 2u);

  std::vector<FitRow> fits;
  std::vector<ThresholdRow> th;
  {  // closed before the next run: HDF5 opens a file once per process (read-only or read-write)
    const AnalysisReader r(c.output);
    std::vector<std::int64_t> steps;
    for (const auto& s : r.steps()) steps.push_back(s.step);
    EXPECT_EQ(steps, (std::vector<std::int64_t>{0, 10, 20, 30, 40}));
    fits = r.fits();
    th = r.thresholds();
  }
  ASSERT_EQ(fits.size(), fits_before.size() * 5 / 3);
  ASSERT_EQ(th.size(), th_before.size() * 5 / 3);
  for (std::size_t i = 0; i < fits_before.size(); ++i) expect_fit_rows_equal(fits[i], fits_before[i]);
  for (std::size_t i = 0; i < th_before.size(); ++i) {
    EXPECT_EQ(th[i].threshold, th_before[i].threshold);
    EXPECT_EQ(th[i].seconds, th_before[i].seconds);  // old rows are left as they were
  }
  EXPECT_EQ(fits.back().step, 40);

  // Nothing new: nothing done.
  const AnalyzeResult third = analyze(c);
  EXPECT_EQ(third.steps_analyzed, 0u);
  EXPECT_EQ(AnalysisReader(c.output).fits().size(), fits.size());
}

TEST(Store, OtherOptionsNeedForce) {
  TempDir dir;
  test::write_synthetic_snapshot(dir / "snap.h5", 2);
  AnalyzeConfig c = config_for(dir);
  analyze(c);
  c.densities = {0.1, 0.001};
  const std::string e = error_of([&] { analyze(c); });
  EXPECT_NE(e.find("other options"), std::string::npos) << e;
  EXPECT_NE(e.find("--force"), std::string::npos) << e;
  EXPECT_EQ(AnalysisReader(c.output).options().densities, (std::vector<double>{0.1, 0.01}));

  c.force = true;
  const AnalyzeResult r = analyze(c);
  EXPECT_TRUE(r.created);
  EXPECT_EQ(r.steps_analyzed, 2u);
  const AnalysisReader reader(c.output);
  EXPECT_EQ(reader.options().densities, (std::vector<double>{0.1, 0.001}));
  for (const auto& t : reader.thresholds()) EXPECT_NE(t.density, 0.01);
}

TEST(Store, AnotherSnapshotNeedsForce) {
  TempDir dir;
  test::write_synthetic_snapshot(dir / "snap.h5", 2, 7, 10, "2026-01-01T00:00:00Z");
  AnalyzeConfig c = config_for(dir);
  analyze(c);
  test::write_synthetic_snapshot(dir / "snap.h5", 2, 7, 10, "2026-05-05T00:00:00Z");
  const std::string e = error_of([&] { analyze(c); });
  EXPECT_NE(e.find("another snapshot"), std::string::npos) << e;
  EXPECT_NE(e.find("--force"), std::string::npos) << e;
}

TEST(Store, NothingIsOverwrittenWithoutForce) {
  TempDir dir;
  test::write_synthetic_snapshot(dir / "snap.h5", 1);
  AnalyzeConfig c = config_for(dir);
  {  // a file of the user's that is not an analysis
    std::ofstream(c.output) << "my notes\n";
  }
  const std::string e = error_of([&] { analyze(c); });
  EXPECT_NE(e.find("not an HDF5 file"), std::string::npos) << e;
  std::ifstream in(c.output);
  std::string text;
  std::getline(in, text);
  EXPECT_EQ(text, "my notes");
  EXPECT_THROW(AnalysisWriter::create(c.output, {}, {}, 10, false), Error);

  // The snapshot itself, or another HDF5 file that is no analysis: refused too.
  AnalyzeConfig onto_snapshot = c;
  onto_snapshot.output = dir / "." / "snap.h5";
  const std::string e2 = error_of([&] { analyze(onto_snapshot); });
  EXPECT_NE(e2.find("is the snapshot itself"), std::string::npos) << e2;
  test::write_synthetic_snapshot(dir / "other.h5", 1);
  onto_snapshot.output = dir / "other.h5";
  const std::string e5 = error_of([&] { analyze(onto_snapshot); });
  EXPECT_NE(e5.find("not a gradscope analysis file"), std::string::npos) << e5;
  EXPECT_NO_THROW(data::SnapshotReader{dir / "other.h5"});
  EXPECT_NO_THROW(data::SnapshotReader{c.input});

  // CSV and report files.
  fs::remove(c.output);
  analyze(c);
  c.csv_dir = dir / "csv";
  c.report_dir = dir / "report";
  const AnalysisReader reader(c.output);
  export_outputs(c, reader);
  EXPECT_TRUE(fs::exists(dir / "csv" / "thresholds.csv"));
  EXPECT_TRUE(fs::exists(dir / "report" / "report.md"));
  {  // No plot hook (the build without Qt): the report says why it has no plots.
    std::ifstream md(dir / "report" / "report.md");
    const std::string text((std::istreambuf_iterator<char>(md)), std::istreambuf_iterator<char>());
    EXPECT_NE(text.find(std::string("## Plots\n\n- ") + kNoPlotsNote), std::string::npos) << text;
  }
  const std::string e3 = error_of([&] { export_outputs(c, reader); });
  EXPECT_NE(e3.find("fits.csv: already exists; pass --force"), std::string::npos) << e3;
  c.csv_dir.clear();
  const std::string e4 = error_of([&] { export_outputs(c, reader); });
  EXPECT_NE(e4.find("report.md: already exists"), std::string::npos) << e4;
  c.force = true;
  c.csv_dir = dir / "csv";
  EXPECT_NO_THROW(export_outputs(c, reader));
}

TEST(Store, BadSnapshotsGiveClearErrors) {
  TempDir dir;
  AnalyzeConfig c = config_for(dir);
  EXPECT_NE(error_of([&] { analyze(c); }).find("no such file"), std::string::npos);
  std::ofstream(c.input) << "not hdf5 at all\n";
  EXPECT_NE(error_of([&] { analyze(c); }).find("not an HDF5 file"), std::string::npos);

  // A copy cut off half-way.
  test::write_synthetic_snapshot(dir / "full.h5", 3);
  const auto size = fs::file_size(dir / "full.h5");
  {
    std::ifstream in(dir / "full.h5", std::ios::binary);
    std::string bytes(size / 2, '\0');
    in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    std::ofstream(c.input, std::ios::binary | std::ios::trunc) << bytes;
  }
  const std::string e = error_of([&] { analyze(c); });
  EXPECT_NE(e.find(c.input.string()), std::string::npos) << e;
  EXPECT_NE(e.find("truncated"), std::string::npos) << e;
  EXPECT_FALSE(fs::exists(c.output));

  // The analysis reader on wrong files.
  EXPECT_NE(error_of([&] { AnalysisReader{dir / "full.h5"}; }).find("not a gradscope analysis file"),
            std::string::npos);
  EXPECT_NE(error_of([&] { AnalysisReader{dir / "absent.h5"}; }).find("no such file"), std::string::npos);

  // A snapshot with no step yet: an empty analysis, no error.
  c.input = dir / "empty.h5";
  test::write_synthetic_snapshot(c.input, 0);
  const AnalyzeResult r = analyze(c);
  EXPECT_EQ(r.steps_analyzed, 0u);
  EXPECT_EQ(AnalysisReader(c.output).steps().size(), 0u);
}

// Attributes of the wrong shape or class (found by fuzz_analysis: an array where one integer was
// read into a one-integer buffer): refused by name before anything is read.
TEST(Store, AttributesOfTheWrongShapeOrClassAreRefused) {
  TempDir dir;
  AnalyzeConfig c = config_for(dir);
  test::write_synthetic_snapshot(c.input, 2);
  c.quiet = true;
  analyze(c);
  auto rewrite = [&](const char* name, hid_t type, hsize_t points, const void* values) {
    const hid_t f = H5Fopen(c.output.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    H5Adelete(f, name);
    const hid_t s = H5Screate_simple(1, &points, nullptr);
    const hid_t a = H5Acreate2(f, name, type, s, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, type, values);
    H5Aclose(a);
    H5Sclose(s);
    H5Fclose(f);
  };
  const std::int64_t versions[4] = {1, 1, 1, 1};
  rewrite("format_version", H5T_NATIVE_INT64, 4, versions);
  std::string e = error_of([&] { AnalysisReader{c.output}; });
  EXPECT_NE(e.find("attribute 'format_version' is not one integer"), std::string::npos) << e;
  const double stages = 2.0;
  rewrite("format_version", H5T_NATIVE_INT64, 1, versions);
  rewrite("stages", H5T_NATIVE_DOUBLE, 1, &stages);
  e = error_of([&] { (void)AnalysisReader{c.output}.options(); });
  EXPECT_NE(e.find("attribute 'stages' is not one integer"), std::string::npos) << e;
}

// The columns and attributes other languages read: the file's names and types, the rows' values.
TEST(Store, TablesAsColumnsAndAttributesAsStored) {
  TempDir dir;
  test::write_synthetic_snapshot(dir / "snap.h5", 2);
  const AnalyzeConfig c = config_for(dir);
  analyze(c);
  const AnalysisReader r(c.output);
  EXPECT_EQ(AnalysisReader::table_names(),
            (std::vector<std::string>{"steps", "vectors", "fits", "tails", "qq", "thresholds"}));
  const std::vector<Column> fits = r.table("fits");
  std::vector<std::string> names;
  for (const auto& col : fits) names.push_back(col.name);
  EXPECT_EQ(names, (std::vector<std::string>{"step", "scope", "kind", "dist", "param1", "param2", "loglik", "aic",
                                             "ks_D", "ks_p", "ad_A2", "ks_n", "ks_subsampled", "error"}));
  const auto rows = r.fits();
  const auto& scope = std::get<std::vector<std::string>>(fits[1].values);
  const auto& ks_D = std::get<std::vector<double>>(fits[8].values);
  const auto& subsampled = std::get<std::vector<std::uint8_t>>(fits[12].values);
  ASSERT_EQ(ks_D.size(), rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(scope[i], rows[i].scope);
    EXPECT_TRUE(ks_D[i] == rows[i].ks_D || (std::isnan(ks_D[i]) && std::isnan(rows[i].ks_D)));
    EXPECT_EQ(subsampled[i] != 0, rows[i].ks_subsampled);
  }
  EXPECT_EQ(std::get<std::vector<std::int32_t>>(r.table("thresholds")[6].values).size(), r.thresholds().size());
  EXPECT_EQ(std::get<std::vector<std::uint64_t>>(r.table("steps")[1].values), (std::vector<std::uint64_t>{0, 1}));
  const std::string e = error_of([&] { r.table("fit"); });
  EXPECT_NE(e.find("no analysis table 'fit': the tables are steps, vectors, fits"), std::string::npos) << e;

  std::map<std::string, AttributeValue> attrs;
  for (auto& a : r.attributes()) attrs[a.name] = a.value;
  EXPECT_EQ(std::get<std::string>(attrs.at("source_path")), r.source().path);
  EXPECT_EQ(std::get<std::string>(attrs.at("format")), kAnalysisFormat);
  EXPECT_EQ(std::get<std::int64_t>(attrs.at("format_version")), kAnalysisFormatVersion);
  EXPECT_EQ(std::get<std::uint64_t>(attrs.at("seed")), c.seed);
  EXPECT_EQ(std::get<std::vector<double>>(attrs.at("ratios")), c.densities);
  EXPECT_EQ(attrs.size(), 18u);
}

TEST(Store, RowsOfAnUncommittedStepAreDropped) {
  TempDir dir;
  test::write_synthetic_snapshot(dir / "snap.h5", 3);
  AnalyzeConfig c = config_for(dir);
  c.steps = StepSelection::parse("0:20");  // steps 0 and 10
  analyze(c);
  const std::size_t fits_committed = AnalysisReader(c.output).fits().size();
  {  // a crash after step 20's fits rows were written, before its /steps row: append a fits row
    hid_t f = H5Fopen(c.output.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    hid_t d = H5Dopen2(f, "fits", H5P_DEFAULT);
    hid_t type = H5Dget_type(d);
    hid_t space = H5Dget_space(d);
    hsize_t n = 0;
    H5Sget_simple_extent_dims(space, &n, nullptr);
    H5Sclose(space);
    std::vector<char> row(H5Tget_size(type), 0);
    const std::int64_t step = 20;
    std::memcpy(row.data() + H5Tget_member_offset(type, 0), &step, sizeof step);
    hsize_t grown = n + 1, one = 1;
    H5Dset_extent(d, &grown);
    space = H5Dget_space(d);
    H5Sselect_hyperslab(space, H5S_SELECT_SET, &n, nullptr, &one, nullptr);
    hid_t mem = H5Screate_simple(1, &one, nullptr);
    ASSERT_GE(H5Dwrite(d, type, mem, space, H5P_DEFAULT, row.data()), 0);
    H5Sclose(mem);
    H5Sclose(space);
    H5Tclose(type);
    H5Dclose(d);
    H5Fclose(f);
  }
  EXPECT_EQ(AnalysisReader(c.output).fits().size(), fits_committed);  // the reader skips it
  EXPECT_EQ(std::get<std::vector<std::int64_t>>(AnalysisReader(c.output).table("fits").front().values).size(),
            fits_committed);  // and so do its columns
  analyze(c);                 // opening for append truncates the cut-off rows
  hid_t f = H5Fopen(c.output.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  hid_t d = H5Dopen2(f, "fits", H5P_DEFAULT);
  hid_t space = H5Dget_space(d);
  hsize_t n = 0;
  H5Sget_simple_extent_dims(space, &n, nullptr);
  EXPECT_EQ(n, fits_committed);
  H5Sclose(space);
  H5Dclose(d);
  H5Fclose(f);
}

TEST(Store, ReRunsAddStepsWhateverTheOrderOfTheLists) {
  TempDir dir;
  test::write_synthetic_snapshot(dir / "snap.h5", 4);
  AnalyzeConfig c = config_for(dir);
  c.densities = {0.1, 0.01};
  c.dists = {"exponential", "gamma"};
  c.methods = {"topk", "dgc"};
  c.steps = StepSelection::parse("0:20");
  analyze(c);
  const auto first_rows = AnalysisReader(c.output).thresholds();
  // The same lists in another order and a wider step range: the new steps are added, their rows
  // in the stored order.
  AnalyzeConfig again = c;
  again.densities = {0.01, 0.1};
  again.dists = {"gamma", "exponential"};
  again.methods = {"dgc", "topk"};
  again.steps = StepSelection::parse("10:40");
  const AnalyzeResult r = analyze(again);
  EXPECT_EQ(r.steps_selected, 3u);
  EXPECT_EQ(r.steps_skipped, 1u);
  EXPECT_EQ(r.steps_analyzed, 2u);
  {
    const AnalysisReader reader(c.output);
    EXPECT_EQ(reader.options().densities, c.densities);
    EXPECT_EQ(reader.options().dists, c.dists);
    EXPECT_EQ(reader.options().steps, "0:40:1");  // the union of both selections
    std::vector<std::int64_t> steps;
    for (const auto& s : reader.steps()) steps.push_back(s.step);
    EXPECT_EQ(steps, (std::vector<std::int64_t>{0, 10, 20, 30}));
    const auto rows = reader.thresholds();
    ASSERT_EQ(rows.size(), 2 * first_rows.size());
    for (std::size_t i = 0; i < rows.size(); ++i) {  // each step's rows in the first run's order
      EXPECT_EQ(rows[i].method, first_rows[i % first_rows.size()].method) << i;
      EXPECT_EQ(rows[i].density, first_rows[i % first_rows.size()].density) << i;
    }
  }
  // Another option is another analysis.
  AnalyzeConfig other = c;
  other.densities = {0.1, 0.02};
  const std::string refused = error_of([&] { analyze(other); });
  EXPECT_NE(refused.find("other options"), std::string::npos) << refused;
}

}  // namespace
}  // namespace gs::analyzer
