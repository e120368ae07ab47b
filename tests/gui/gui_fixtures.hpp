#pragma once
// Shared by the GUI suites: a small synthetic heavy-tailed snapshot (no torch needed), the
// QApplication every widget needs, and waiting for the window's worker jobs.
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <QApplication>
#include <QProcess>
#include <QProcessEnvironment>

#include "common/temp_dir.hpp"
#include "gs/data/snapshot.hpp"
#include "main_window.hpp"

namespace gs::gui::testing {

// Laplace-like conv weights, gamma(0.6)-like linear weights, normal biases, ~5% exact zeros.
inline std::vector<data::LayerInfo> synthetic_layers() {
  return {{"conv1.weight", {16, 8, 3, 3}}, {"fc.weight", {64, 100}}, {"fc.bias", {64}}};
}

// What a snapshot records besides its values: model name, layers, creation time (empty: now).
struct SnapshotSpec {
  std::string model = "synthetic";
  std::vector<data::LayerInfo> layers = synthetic_layers();
  std::string created;
};

// Writes steps 0, 10, 20, ... and returns every step's flattened model (layers in order).
inline std::vector<std::vector<float>> write_snapshot(const std::filesystem::path& path, int steps, std::uint64_t seed,
                                                      const SnapshotSpec& spec = {}) {
  const auto& layers = spec.layers;
  data::SnapshotMeta meta;
  meta.model = spec.model;
  meta.dataset = "none";
  meta.seed = seed;
  meta.created = spec.created;
  data::WriterOptions wo;
  wo.force = true;
  data::SnapshotWriter writer(path, meta, layers, wo);
  std::mt19937_64 rng(seed);
  std::exponential_distribution<float> expo(1.0f);
  std::gamma_distribution<float> gamma(0.6f, 1.0f);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::vector<std::vector<float>> models;
  for (int s = 0; s < steps; ++s) {
    std::vector<std::vector<float>> grads(layers.size());
    std::vector<std::span<const float>> spans;
    std::vector<float> model;
    for (std::size_t l = 0; l < layers.size(); ++l) {
      const float scale = 1e-3f * float(1 + s);
      for (std::int64_t i = 0; i < layers[l].numel(); ++i) {
        const float sign = (rng() & 1) ? 1.0f : -1.0f;
        float v = l % 3 == 0 ? expo(rng) : l % 3 == 1 ? gamma(rng) : normal(rng);
        v = u(rng) < 0.05f ? 0.0f : sign * scale * v;
        grads[l].push_back(v);
      }
      spans.emplace_back(grads[l]);
      model.insert(model.end(), grads[l].begin(), grads[l].end());
    }
    writer.append({std::int64_t(10 * s), 2.0 / (1 + s), 0.1}, spans);
    models.push_back(std::move(model));
  }
  return models;
}

inline QApplication& app() {
  if (qgetenv("QT_QPA_PLATFORM").isEmpty()) qputenv("QT_QPA_PLATFORM", "offscreen");
  static int argc = 1;
  static char name[] = "gs_gui_tests";
  static char* argv[] = {name, nullptr};
  // Never destroyed: once a window was shown or a key event sent, Qt's input devices belong to
  // it, and a static QApplication's destructor at exit would run after theirs and crash.
  static QApplication* instance = new QApplication(argc, argv);
  return *instance;
}

// Runs the event loop until the window has no job running or waiting (true), or 120 s pass.
inline bool wait_idle(MainWindow& w, double seconds = 120.0) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  // Let queued requests start before judging idleness.
  QApplication::processEvents();
  while (std::chrono::steady_clock::now() < deadline) {
    QApplication::processEvents(QEventLoop::AllEvents, 20);
    if (!w.busy()) {
      QApplication::processEvents();
      if (!w.busy()) return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

// Runs the gradscope-gui executable; its exit code (-1: it did not finish, -2: it crashed) and its
// stdout and stderr together in *output. env: the child's environment (default: this process's,
// which names the offscreen platform).
inline int run_gui(const QStringList& args, QString* output,
                   const QProcessEnvironment& env = QProcessEnvironment::systemEnvironment()) {
  QProcess p;
  p.setProcessChannelMode(QProcess::MergedChannels);
  p.setProcessEnvironment(env);
  p.start(GS_GUI_EXECUTABLE, args);
  if (!p.waitForFinished(300'000)) return -1;
  *output = QString::fromLocal8Bit(p.readAll());
  return p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -2;
}

inline QString qpath(const std::filesystem::path& p) { return QString::fromStdString(p.string()); }

using TempDir = ::gs::testing::TempDir;

}  // namespace gs::gui::testing
