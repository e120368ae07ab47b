// The loss of every training step (/losses): written by the recorder for recorded and unrecorded
// steps alike, in order, read back by SnapshotReader::losses; a file without it gives the recorded
// steps'. And what a writer refuses: a file this process holds open, a folder that is missing.
#include <hdf5.h>

#include "data_test_util.hpp"
#include "gs/data/step_recorder.hpp"

namespace gs::data::test {
namespace {

std::vector<LayerInfo> two_layers() { return {{"fc.weight", {4, 3}}, {"fc.bias", {4}}}; }

SnapshotWriter new_writer(const std::filesystem::path& path, bool force = false) {
  SnapshotMeta meta;
  meta.model = "mlp";
  WriterOptions o;
  o.force = force;
  return SnapshotWriter(path, meta, two_layers(), o);
}

double loss_of(std::int64_t step) { return 3.0 / (1.0 + 0.1 * double(step)); }

// Records `steps` training steps, every `every`-th with gradients, through a StepRecorder.
void record(const std::filesystem::path& path, std::int64_t steps, std::int64_t every) {
  StepRecorder rec(two_layers(), snapshot_sink(new_writer(path, true)), {every, 2});
  const std::vector<float> w(12, 0.5f), b(4, -0.25f);
  for (std::int64_t s = 0; s < steps; ++s) {
    if (rec.begin_step(s)) {
      rec.put(0, w);
      rec.put(1, b);
    }
    rec.end_step(loss_of(s), 0.01 * double(s));
  }
  rec.finish();
}

TEST(Losses, EveryStepRecordedOrNotInOrder) {
  ScratchDir dir;
  const auto path = dir / "run.h5";
  record(path, 75, 20);  // more unrecorded steps between two recorded ones than one batch
  const SnapshotReader r(path);
  ASSERT_EQ(r.step_count(), 4u);
  const auto losses = r.losses();
  ASSERT_EQ(losses.size(), 75u);
  for (std::int64_t s = 0; s < 75; ++s) {
    EXPECT_EQ(losses[std::size_t(s)].step, s);
    EXPECT_EQ(losses[std::size_t(s)].loss, loss_of(s));
    EXPECT_EQ(losses[std::size_t(s)].lr, 0.01 * double(s));
  }
  for (const auto& rec : r.steps()) EXPECT_EQ(losses[std::size_t(rec.step)].loss, rec.loss);
}

TEST(Losses, WriterKeepsThemInOrderAndRefusesAStepThatDoesNotFollow) {
  ScratchDir dir;
  const auto path = dir / "run.h5";
  SnapshotWriter w = new_writer(path);
  const std::vector<float> a(12, 1.0f), b(4, 2.0f);
  const std::vector<std::span<const float>> grads = {a, b};
  w.append({0, 1.0, 0.1}, grads);
  const std::vector<StepRecord> between = {{1, 0.9, 0.1}, {2, 0.8, 0.1}};
  w.append_losses(between);
  expect_error([&] { w.append({2, 0.7, 0.1}, grads); }, {"step 2 does not follow step 2 of /losses"});
  expect_error([&] { w.append_losses(between); }, {"loss of step 1 does not follow step 2"});
  w.append({3, 0.7, 0.1}, grads);
  w.close();
  const SnapshotReader r(path);
  EXPECT_EQ(r.step_count(), 2u);  // the refused step left nothing behind
  std::vector<std::int64_t> steps;
  for (const auto& l : r.losses()) steps.push_back(l.step);
  EXPECT_EQ(steps, (std::vector<std::int64_t>{0, 1, 2, 3}));
}

TEST(Losses, AFileWithoutThemGivesTheRecordedSteps) {
  ScratchDir dir;
  const auto path = dir / "old.h5";
  record(path, 7, 3);
  {  // as a file written before /losses was stored
    const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    ASSERT_GE(H5Ldelete(f, "losses", H5P_DEFAULT), 0);
    H5Fclose(f);
  }
  const SnapshotReader r(path);
  const auto losses = r.losses();
  ASSERT_EQ(losses.size(), 3u);
  for (std::size_t i = 0; i < losses.size(); ++i) {
    EXPECT_EQ(losses[i].step, r.steps()[i].step);
    EXPECT_EQ(losses[i].loss, r.steps()[i].loss);
  }
}

TEST(Losses, StepsAreDescribedForMessages) {
  EXPECT_EQ(describe_steps({}), "no steps are recorded");
  EXPECT_EQ(describe_steps({{5, 0, 0}}), "recorded steps run from 5 to 5 (1 step)");
  EXPECT_EQ(describe_steps({{0, 0, 0}, {10, 0, 0}, {20, 0, 0}}), "recorded steps run from 0 to 20, every 10 (3 steps)");
  EXPECT_EQ(describe_steps({{0, 0, 0}, {10, 0, 0}, {15, 0, 0}}), "recorded steps run from 0 to 15 (3 steps)");
}

TEST(Destination, AFileThisProcessHoldsOpenIsNotReplaced) {
  ScratchDir dir;
  const auto path = dir / "run.h5";
  {
    SnapshotWriter w = new_writer(path);
    expect_error([&] { new_writer(path, true); }, {path.string(), "a recorder of this process still writes it"});
  }
  {
    const SnapshotReader r(path);
    EXPECT_TRUE(open_for_reading(path));
    expect_error([&] { new_writer(path, true); }, {path.string(), "open for reading in this process", "close"});
  }
  EXPECT_FALSE(open_for_reading(path));
  new_writer(path, true).close();  // both closed: replaced
}

TEST(Destination, AMissingFileOrFolderIsAMissingFile) {
  ScratchDir dir;
  EXPECT_THROW(SnapshotReader(dir / "missing.h5"), MissingFile);
  EXPECT_THROW(new_writer(dir / "no" / "run.h5"), MissingFile);
  EXPECT_THROW(check_destination(dir / "no" / "run.h5", true), MissingFile);
}

}  // namespace
}  // namespace gs::data::test
