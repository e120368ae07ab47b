// gradscope-gui [FILE] [--analysis A.h5] [--live]
// gradscope-gui FILE --screenshot OUT.png [--layer NAME] [--step S] [--ratio R] [--force]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <QApplication>
#include <QCommandLineParser>
#include <QPixmap>
#include <QTimer>

#include "gs/base/allocator.hpp"
#include "gs/version.hpp"
#include "main_window.hpp"

namespace {

int fail(const QString& message, int code = 1) {
  std::fprintf(stderr, "gradscope-gui: %s\n", message.toLocal8Bit().constData());
  return code;
}

// A screenshot needs no display: without a platform named in QT_QPA_PLATFORM, render it on Qt's
// offscreen platform (as `gradscope analyze --report` does), so that it works on a server, in CI
// or over ssh. Must run before QApplication exists.
void offscreen_for_screenshots(int argc, char** argv) {
  const char* chosen = std::getenv("QT_QPA_PLATFORM");
  if (chosen && *chosen) return;
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--screenshot") == 0 || std::strncmp(argv[i], "--screenshot=", 13) == 0) {
      setenv("QT_QPA_PLATFORM", "offscreen", 1);
      return;
    }
}

// The command line, parsed and checked.
struct Cli {
  QString file, analysis, screenshot, layer;
  bool live = false, shot = false, has_layer = false, has_step = false, has_ratio = false;
  double ratio = 0.0;
  qlonglong step = 0;
  std::string backend;
};

// Parses the command line into cli; a non-zero exit code (with the message said) when it is wrong.
int parse(QApplication& app, Cli& cli) {
  QCommandLineParser parser;
  parser.setApplicationDescription(
      "Gradient distributions and threshold estimates of a gradscope snapshot file.");
  parser.addHelpOption();
  parser.addVersionOption();
  parser.addPositionalArgument("FILE", "snapshot file (gradscope capture / train --record)", "[FILE]");
  const QCommandLineOption analysis("analysis", "analysis file of FILE (default: FILE's "
                                                "stem + .analysis.h5 when it exists)", "A.h5");
  const QCommandLineOption live("live", "follow FILE while it is being written");
  const QCommandLineOption shot("screenshot", "render the window offscreen to OUT.png and exit",
                                "OUT.png");
  const QCommandLineOption layer("layer", "layer to show (\"(model)\": the whole model)", "NAME");
  const QCommandLineOption step("step", "training step to show (default: the last)", "S");
  const QCommandLineOption ratio_option("ratio", "target density of the thresholds (default 0.01)", "R");
  const QCommandLineOption force("force", "overwrite the screenshot file");
  const QCommandLineOption backend("backend", "fitting backend: auto, cpu or cuda", "NAME", "auto");
  parser.addOptions({analysis, live, shot, layer, step, ratio_option, force, backend});
  parser.process(app);

  const QStringList files = parser.positionalArguments();
  if (files.size() > 1) return fail("give one snapshot file (got " + files.join(" ") + ")", 2);
  cli.file = files.isEmpty() ? QString() : files[0];
  cli.shot = parser.isSet(shot);
  cli.screenshot = parser.value(shot);
  if (cli.shot) {
    if (files.isEmpty()) return fail("--screenshot needs a snapshot FILE", 2);
    if (!cli.screenshot.endsWith(".png", Qt::CaseInsensitive))
      return fail("the screenshot file must end in .png (got " + cli.screenshot + ")", 2);
    if (std::filesystem::exists(cli.screenshot.toStdString()) && !parser.isSet(force))
      return fail(cli.screenshot + " exists; pass --force to overwrite it", 2);
  }
  bool ok = true;
  cli.has_ratio = parser.isSet(ratio_option);
  cli.ratio = cli.has_ratio ? parser.value(ratio_option).toDouble(&ok) : 0.0;
  if (!ok) return fail("--ratio needs a number such as 0.01 (got " + parser.value(ratio_option) + ")", 2);
  cli.has_step = parser.isSet(step);
  cli.step = cli.has_step ? parser.value(step).toLongLong(&ok) : 0;
  if (!ok) return fail("--step needs a recorded training step (got " + parser.value(step) + ")", 2);
  cli.analysis = parser.value(analysis);
  cli.live = parser.isSet(live);
  cli.has_layer = parser.isSet(layer);
  cli.layer = parser.value(layer);
  cli.backend = parser.value(backend).toStdString();
  return 0;
}

// Opens the snapshot and shows what the command line asks for; false when something asked for
// is not there (the window says what).
bool show_requested(gs::gui::MainWindow& window, const Cli& cli) {
  if (!window.openSnapshot(cli.file, cli.analysis)) return false;
  if (cli.has_layer && !window.selectScope(cli.layer)) return false;
  if (cli.has_ratio && !window.selectRatio(cli.ratio)) return false;
  if (cli.has_step && !window.selectStep(cli.step)) return false;
  if (cli.live) window.setLive(true);
  return true;
}

// Screenshot: waits until every plot is drawn, renders the window to cli.screenshot, exits.
int screenshot(QApplication& app, gs::gui::MainWindow& window, const Cli& cli) {
  int code = 0;
  QObject::connect(&window, &gs::gui::MainWindow::failed, &app, [&](const QString& message) {
    code = fail(message);
    app.exit(code);
  });
  QObject::connect(&window, &gs::gui::MainWindow::idle, &app, [&] {
    QTimer::singleShot(100, &app, [&] {
      if (window.busy()) return;  // a later idle() comes
      const QPixmap pixmap = window.grab();
      if (pixmap.isNull() || !pixmap.save(cli.screenshot, "PNG")) {
        code = fail("could not write " + cli.screenshot);
      } else {
        std::printf("%s: first plot after %.2f s, all plots after %.2f s; wrote %s (%dx%d)\n",
                    cli.file.toLocal8Bit().constData(), window.firstPlotSeconds(),
                    window.allPlotsSeconds(), cli.screenshot.toLocal8Bit().constData(), pixmap.width(),
                    pixmap.height());
      }
      app.exit(code);
    });
  });
  QTimer::singleShot(590'000, &app, [&] {
    code = fail("gave up after 590 s waiting for the plots");
    app.exit(code);
  });
  if (!window.busy()) emit window.idle();
  app.exec();
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  gs::tune_allocator();
  offscreen_for_screenshots(argc, argv);
  QApplication app(argc, argv);
  QApplication::setApplicationName("gradscope-gui");
  QApplication::setApplicationVersion(gs::kVersion);
  Cli cli;
  if (const int code = parse(app, cli)) return code;

  gs::gui::ViewOptions options;
  options.backend = cli.backend;
  gs::gui::MainWindow window(options);
  window.show();
  if (!cli.file.isEmpty() && !show_requested(window, cli) && cli.shot) return fail(window.errorText());
  if (!cli.shot) return app.exec();
  return screenshot(app, window, cli);
}
