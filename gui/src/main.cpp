// gradscope-gui [FILE] [--analysis A.h5] [--live]
// gradscope-gui FILE [--screenshot OUT.png] [--export-csv DIR] [--layer NAME] [--step S] [--ratio R]
//               [--force]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <QApplication>
#include <QCommandLineParser>
#include <QDir>
#include <QFileInfo>
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

// A screenshot or a CSV export needs no display: without a platform named in QT_QPA_PLATFORM,
// render on Qt's offscreen platform (as `gradscope analyze --report` does), so that it works on a
// server, in CI or over ssh. Must run before QApplication exists.
void offscreen_for_batch(int argc, char** argv) {
  const char* chosen = std::getenv("QT_QPA_PLATFORM");
  if (chosen && *chosen) return;
  for (int i = 1; i < argc; ++i)
    for (const char* flag : {"--screenshot", "--export-csv"}) {
      const std::size_t n = std::strlen(flag);
      if (std::strncmp(argv[i], flag, n) == 0 && (argv[i][n] == '\0' || argv[i][n] == '=')) {
        setenv("QT_QPA_PLATFORM", "offscreen", 1);
        return;
      }
    }
}

// The command line, parsed and checked.
struct Cli {
  QString file, analysis, screenshot, layer, csv_dir;
  bool live = false, shot = false, csv = false, force = false, has_layer = false, has_step = false, has_ratio = false;
  double ratio = 0.0;
  qlonglong step = 0;
  std::string backend;
  bool batch() const { return shot || csv; }
};

void add_options(QCommandLineParser& parser) {
  parser.setApplicationDescription("Gradient distributions and threshold estimates of a gradscope snapshot file.");
  parser.addHelpOption();
  parser.addVersionOption();
  parser.addPositionalArgument("FILE", "snapshot file (gradscope capture / train --record)", "[FILE]");
  parser.addOptions({
      {"analysis",
       "analysis file of FILE (default: FILE's stem + .analysis.h5 when it exists); "
       "refused when it is not an analysis of FILE",
       "A.h5"},
      {"live", "follow FILE while it is being written"},
      {"screenshot", "render the window offscreen to OUT.png and exit", "OUT.png"},
      {"export-csv",
       "write the threshold table and every plotted series as CSV files "
       "(FILESTEM-LAYER-stepS-rR-NAME.csv) into DIR and exit",
       "DIR"},
      {"layer", "layer to show (\"(model)\": the whole model)", "NAME"},
      {"step", "training step to show (default: the last)", "S"},
      {"ratio", "target density of the thresholds (default 0.01)", "R"},
      {"force", "overwrite the screenshot and CSV files"},
      {"backend", "fitting backend: auto, cpu or cuda", "NAME", "auto"},
  });
}

// Reads the parsed command line into cli; a non-zero exit code (with the message said) when it is
// wrong.
int read_cli(const QCommandLineParser& parser, Cli& cli) {
  const QStringList files = parser.positionalArguments();
  if (files.size() > 1) return fail("give one snapshot file (got " + files.join(" ") + ")", 2);
  cli.file = files.isEmpty() ? QString() : files[0];
  cli.force = parser.isSet("force");
  cli.shot = parser.isSet("screenshot");
  cli.screenshot = parser.value("screenshot");
  cli.csv = parser.isSet("export-csv");
  cli.csv_dir = parser.value("export-csv");
  if (cli.batch() && files.isEmpty())
    return fail(QString(cli.shot ? "--screenshot" : "--export-csv") + " needs a snapshot FILE", 2);
  if (cli.shot) {
    if (!cli.screenshot.endsWith(".png", Qt::CaseInsensitive))
      return fail("the screenshot file must end in .png (got " + cli.screenshot + ")", 2);
    if (std::filesystem::exists(cli.screenshot.toStdString()) && !cli.force)
      return fail(cli.screenshot + " exists; pass --force to overwrite it", 2);
  }
  if (cli.csv && cli.csv_dir.isEmpty()) return fail("--export-csv needs a folder", 2);
  bool ok = true;
  cli.has_ratio = parser.isSet("ratio");
  if (cli.has_ratio) {
    QString error;  // the window's chooser says the same of a typed ratio
    const std::optional<double> ratio = gs::gui::parse_ratio(parser.value("ratio"), &error);
    if (!ratio) return fail("--ratio: " + error, 2);
    cli.ratio = *ratio;
  }
  cli.has_step = parser.isSet("step");
  cli.step = cli.has_step ? parser.value("step").toLongLong(&ok) : 0;
  if (!ok) return fail("--step needs a recorded training step (got " + parser.value("step") + ")", 2);
  cli.analysis = parser.value("analysis");
  cli.live = parser.isSet("live");
  cli.has_layer = parser.isSet("layer");
  cli.layer = parser.value("layer");
  cli.backend = parser.value("backend").toStdString();
  return 0;
}

// Whether the command line holds one of the options QApplication takes for itself (-style NAME,
// -platform NAME, ...): only QApplication can tell those from mistakes.
bool has_qt_option(int argc, char** argv) {
  static const char* const qt_options[] = {"platform",        "platformpluginpath",
                                           "platformtheme",   "plugin",
                                           "qwindowgeometry", "qwindowicon",
                                           "qwindowtitle",    "reverse",
                                           "session",         "style",
                                           "stylesheet",      "widgetcount",
                                           "display",         "geometry",
                                           "qmljsdebugger",   "nograb",
                                           "dograb",          "name",
                                           "title",           "visual"};
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    if (a[0] != '-') continue;
    a += a[1] == '-' ? 2 : 1;
    for (const char* o : qt_options) {
      const std::size_t n = std::strlen(o);
      if (std::strncmp(a, o, n) == 0 && (a[n] == '\0' || a[n] == '=')) return true;
    }
  }
  return false;
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

// --screenshot and --export-csv: waits until every plot is drawn, writes the files, exits.
int batch(QApplication& app, gs::gui::MainWindow& window, const Cli& cli) {
  if (cli.csv) {
    if (!QDir().mkpath(cli.csv_dir)) return fail("could not create the folder " + cli.csv_dir);
    for (const QString& path : window.csvExportPaths(cli.csv_dir))
      if (QFileInfo::exists(path) && !cli.force) return fail(path + " exists; pass --force to overwrite it", 2);
  }
  int code = 0;
  QObject::connect(&window, &gs::gui::MainWindow::failed, &app, [&](const QString& message) {
    code = fail(message);
    app.exit(code);
  });
  QObject::connect(&window, &gs::gui::MainWindow::idle, &app, [&] {
    QTimer::singleShot(100, &app, [&] {
      if (window.busy()) return;  // a later idle() comes
      if (cli.shot) {
        const QPixmap pixmap = window.grab();
        if (pixmap.isNull() || !pixmap.save(cli.screenshot, "PNG")) {
          code = fail("could not write " + cli.screenshot);
        } else {
          std::printf("%s: first plot after %.2f s, all plots after %.2f s; wrote %s (%dx%d)\n",
                      cli.file.toLocal8Bit().constData(), window.firstPlotSeconds(), window.allPlotsSeconds(),
                      cli.screenshot.toLocal8Bit().constData(), pixmap.width(), pixmap.height());
        }
      }
      if (cli.csv && code == 0) {
        if (window.exportCsv(cli.csv_dir, true))
          std::printf("wrote %d CSV files to %s\n", int(window.csvExportPaths(cli.csv_dir).size()),
                      cli.csv_dir.toLocal8Bit().constData());
        else
          code = 1;  // failed() said why
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
  QCoreApplication::setApplicationName("gradscope-gui");
  QCoreApplication::setApplicationVersion(gs::kVersion);
  // Parsed before any QApplication exists, so --help, --version and a mistaken command line need
  // no display (nor a Qt platform plugin).
  QStringList args;
  for (int i = 0; i < argc; ++i) args << QString::fromLocal8Bit(argv[i]);
  QCommandLineParser parser;
  add_options(parser);
  Cli cli;
  const bool parsed = parser.parse(args);
  if (parsed) {
    if (parser.isSet("help") || parser.isSet("help-all")) {
      std::fputs(parser.helpText().replace("<executable_name>", "gradscope-gui").toLocal8Bit().constData(), stdout);
      return 0;
    }
    if (parser.isSet("version")) {
      std::printf("gradscope-gui %s\n", gs::kVersion);
      return 0;
    }
    if (const int code = read_cli(parser, cli)) return code;
  } else if (!has_qt_option(argc, argv)) {
    return fail(parser.errorText() + " (see gradscope-gui --help)", 2);
  }
  offscreen_for_batch(argc, argv);
  QApplication app(argc, argv);
  if (!parsed) {
    // An option unknown here may be one of Qt's own (-style, -platform), which QApplication has
    // taken out of the arguments by now; anything else ends here with Qt's message.
    parser.process(app);
    if (const int code = read_cli(parser, cli)) return code;
  }

  gs::gui::ViewOptions options;
  options.backend = cli.backend;
  gs::gui::MainWindow window(options);
  window.show();
  if (!cli.file.isEmpty()) {
    const bool shown = show_requested(window, cli);
    // An analysis file asked for by name that is not FILE's is refused outright; one found beside
    // FILE is only reported (the window computes the series from FILE instead).
    if (!cli.analysis.isEmpty() && !window.analysisError().isEmpty()) return fail(window.analysisError());
    if (!window.analysisError().isEmpty()) fail(window.analysisError());
    if (!window.analysisNote().isEmpty())
      fail("analysis file " + QFileInfo(window.analysisFile()).fileName() + " " + window.analysisNote());
    if (!shown && cli.batch()) return fail(window.errorText());
  }
  if (!cli.batch()) return app.exec();
  return batch(app, window, cli);
}
