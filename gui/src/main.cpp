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

}  // namespace

int main(int argc, char** argv) {
  gs::tune_allocator();
  offscreen_for_screenshots(argc, argv);
  QApplication app(argc, argv);
  QApplication::setApplicationName("gradscope-gui");
  QApplication::setApplicationVersion(gs::kVersion);
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
  const QString out = parser.value(shot);
  if (parser.isSet(shot)) {
    if (files.isEmpty()) return fail("--screenshot needs a snapshot FILE", 2);
    if (!out.endsWith(".png", Qt::CaseInsensitive))
      return fail("the screenshot file must end in .png (got " + out + ")", 2);
    if (std::filesystem::exists(out.toStdString()) && !parser.isSet(force))
      return fail(out + " exists; pass --force to overwrite it", 2);
  }
  bool ok = true;
  const double r = parser.isSet(ratio_option) ? parser.value(ratio_option).toDouble(&ok) : 0.0;
  if (!ok) return fail("--ratio needs a number such as 0.01 (got " + parser.value(ratio_option) + ")", 2);
  const qlonglong s = parser.isSet(step) ? parser.value(step).toLongLong(&ok) : 0;
  if (!ok) return fail("--step needs a recorded training step (got " + parser.value(step) + ")", 2);

  gs::gui::ViewOptions options;
  options.backend = parser.value(backend).toStdString();
  gs::gui::MainWindow window(options);
  window.show();
  if (!files.isEmpty()) {
    const bool opened = window.openSnapshot(files[0], parser.value(analysis));
    if (!opened && parser.isSet(shot)) return fail(window.errorText());
    if (opened) {
      if (parser.isSet(layer) && !window.selectScope(parser.value(layer)))
        return parser.isSet(shot) ? fail(window.errorText()) : app.exec();
      if (parser.isSet(ratio_option) && !window.selectRatio(r))
        return parser.isSet(shot) ? fail(window.errorText()) : app.exec();
      if (parser.isSet(step) && !window.selectStep(s))
        return parser.isSet(shot) ? fail(window.errorText()) : app.exec();
      if (parser.isSet(live)) window.setLive(true);
    }
  }
  if (!parser.isSet(shot)) return app.exec();

  // Screenshot: wait until every plot is drawn, render the window, exit.
  int code = 0;
  QObject::connect(&window, &gs::gui::MainWindow::failed, &app, [&](const QString& message) {
    code = fail(message);
    app.exit(code);
  });
  QObject::connect(&window, &gs::gui::MainWindow::idle, &app, [&] {
    QTimer::singleShot(100, &app, [&] {
      if (window.busy()) return;  // a later idle() comes
      const QPixmap pixmap = window.grab();
      if (pixmap.isNull() || !pixmap.save(out, "PNG")) {
        code = fail("could not write " + out);
      } else {
        std::printf("%s: first plot after %.2f s, all plots after %.2f s; wrote %s (%dx%d)\n",
                    files[0].toLocal8Bit().constData(), window.firstPlotSeconds(),
                    window.allPlotsSeconds(), out.toLocal8Bit().constData(), pixmap.width(),
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
