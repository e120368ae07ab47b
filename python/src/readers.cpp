// Reading back, for gradscope.open_snapshot, gradscope.analyze and gradscope.load_analysis
// (gradscope/readers.py): the snapshot reader (gs::data::SnapshotReader, live files included),
// the analysis pipeline of `gradscope analyze` (gs::analyzer::analyze) and the analysis store's
// reader (gs::analyzer::AnalysisReader), each as the C++ has it.
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "gs/analyzer/analyze.hpp"
#include "gs/analyzer/store.hpp"
#include "gs/analyzer/vectors.hpp"
#include "gs/data/snapshot.hpp"
#include "gs/base/error.hpp"
#include "gs/fitting/distributions.hpp"
#include "options.hpp"

namespace py = pybind11;

namespace gs::python {
namespace {

// A snapshot open for reading. Python threads may share it: every use of the reader holds the
// lock, with the GIL released while HDF5 reads.
class Snapshot {
 public:
  explicit Snapshot(const std::string& path) : path_(path), reader_(std::in_place, path) {}

  const data::SnapshotReader& reader() const {
    if (!reader_) throw Error(path_ + ": the snapshot is closed; open it again with gradscope.open_snapshot");
    return *reader_;
  }

  // Closes the file (this reader's part of it: readers of one file share its HDF5 handles, which
  // close with the last one). Idempotent.
  void close() {
    py::gil_scoped_release free;
    std::lock_guard lock(mutex_);
    reader_.reset();
  }
  bool closed() const { return !reader_; }

  // Steps a live writer appended since the last refresh become visible; returns the count.
  std::size_t refresh() {
    py::gil_scoped_release free;
    std::lock_guard lock(mutex_);
    return writable().refresh();
  }

  // (step, loss, lr) of every recorded step, as of the last refresh.
  std::vector<std::tuple<std::int64_t, double, double>> steps() {
    py::gil_scoped_release free;  // another thread may hold the lock for a read
    std::lock_guard lock(mutex_);
    return rows(reader().steps());
  }

  // (step, loss, lr) of every training step, recorded or not (data::SnapshotReader::losses).
  std::vector<std::tuple<std::int64_t, double, double>> losses() {
    py::gil_scoped_release free;
    std::lock_guard lock(mutex_);
    return rows(reader().losses());
  }

  // (name, shape, numel, kind) of every layer, in the snapshot's order.
  py::list layers() const {
    py::list out;
    const auto& layers = reader().layers();
    const std::vector<std::string> kinds = analyzer::layer_kinds(layers);
    for (std::size_t i = 0; i < kinds.size(); ++i)
      out.append(py::make_tuple(layers[i].name, layers[i].shape, layers[i].numel(), kinds[i]));
    return out;
  }

  // One layer's gradient at training step `step` (none: the last recorded), or with no layer the
  // whole model flattened in layer order (analyzer::choose_vector's rules and messages). A step
  // not seen yet refreshes first: a live file may hold it by now.
  py::array_t<float> grad(std::optional<std::int64_t> step, const std::optional<std::string>& layer) {
    std::vector<float> values;
    {
      py::gil_scoped_release free;
      std::lock_guard lock(mutex_);
      data::SnapshotReader& r = writable();
      const auto& steps = r.steps();
      if (!step || std::none_of(steps.begin(), steps.end(), [&](const auto& s) { return s.step == *step; }))
        r.refresh();
      values = analyzer::read_vector(r, analyzer::choose_vector(r, step, layer));
    }
    return owned_array(std::move(values));
  }

 private:
  data::SnapshotReader& writable() {
    reader();  // gs::Error when closed
    return *reader_;
  }
  static std::vector<std::tuple<std::int64_t, double, double>> rows(const std::vector<data::StepRecord>& records) {
    std::vector<std::tuple<std::int64_t, double, double>> out;
    for (const auto& s : records) out.emplace_back(s.step, s.loss, s.lr);
    return out;
  }

  std::string path_;
  std::optional<data::SnapshotReader> reader_;  // none once closed
  std::mutex mutex_;
};

// The law `dist` with `params` (fitting::make_sid) at every x of `values`: its density ("pdf"),
// its distribution function ("cdf") or, for tail probabilities q, the x with P(X > x) = q ("isf").
py::array_t<double> law_values(const std::string& dist, const std::vector<double>& params, const std::string& what,
                               const py::array_t<double, py::array::c_style | py::array::forcecast>& values) {
  const fitting::Sid law = fitting::make_sid(dist, params);
  double (*f)(const fitting::Sid&, double) = nullptr;
  if (what == "pdf") f = fitting::pdf;
  if (what == "cdf") f = fitting::cdf;
  if (what == "isf") f = fitting::quantile_c;
  if (!f) throw Error("unknown function '" + what + "' of a law: use pdf, cdf or isf");
  std::vector<double> out(std::size_t(values.size()));
  const double* in = values.data();
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = f(law, in[i]);
  return owned_array(std::move(out));
}

// `gradscope analyze input --out output` with options {key: text} of analyzer::analyze_options(),
// its exports (CSV, report without plots) included; returns the JSON `--json` prints. The work
// runs without the GIL; `progress(done, total, note)` (or None) is called with it held, and an
// exception it raises (or Ctrl-C, checked there) stops the analysis, the steps written so far kept.
std::string analyze(const std::string& input, const std::string& output,
                    const std::map<std::string, std::string>& options, const py::object& progress) {
  const auto& rows = analyzer::analyze_options();
  analyzer::AnalyzeConfig config;
  config.input = input;
  config.output = output;
  set_options(config, rows, options, "analyze option");
  const analyzer::ProgressFn tick = [&progress](std::int64_t done, std::int64_t total, const std::string& note) {
    py::gil_scoped_acquire held;
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    if (!progress.is_none()) progress(done, total, note);
  };
  const std::vector<std::pair<std::string, std::string>> words = {{"--out", "out"}};
  try {
    py::gil_scoped_release free;
    config.validate();
    const analyzer::AnalyzeResult result = analyzer::analyze(config, tick);
    const analyzer::AnalysisReader reader(config.output);
    analyzer::export_outputs(config, reader);
    return analyzer::analyze_json(result, reader, analyzer::summarize(reader)).dump();
  } catch (const DeviceFailure& e) {
    throw DeviceFailure(in_python_words(e.what(), rows, words));
  } catch (const MissingFile& e) {
    throw MissingFile(in_python_words(e.what(), rows, words));
  } catch (const Error& e) {
    throw Error(in_python_words(e.what(), rows, words));
  }
}

py::object attribute_value(const analyzer::AttributeValue& value) {
  return std::visit(
      [](const auto& v) -> py::object {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::vector<double>>)
          return owned_array(std::vector<double>(v));
        else
          return py::cast(v);
      },
      value);
}

// Every root attribute ({name: value}) and every table ({name: [(column, values)]}) of an
// analysis store, as AnalysisReader reads them: numbers as NumPy arrays of the stored type (the
// uint8 flags as bool), strings as lists of str.
py::tuple read_analysis(const std::string& path) {
  std::vector<analyzer::Attribute> attributes;
  std::vector<std::vector<analyzer::Column>> tables;
  {
    py::gil_scoped_release free;
    const analyzer::AnalysisReader reader(path);
    attributes = reader.attributes();
    for (const auto& name : analyzer::AnalysisReader::table_names()) tables.push_back(reader.table(name));
  }
  py::dict attrs;
  for (const auto& a : attributes) attrs[py::str(a.name)] = attribute_value(a.value);
  py::dict out;
  for (std::size_t t = 0; t < tables.size(); ++t) {
    py::list columns;
    for (auto& c : tables[t]) {
      py::object values = std::visit(
          [](auto& v) -> py::object {
            using T = typename std::decay_t<decltype(v)>::value_type;
            if constexpr (std::is_same_v<T, std::string>)
              return py::cast(v);
            else if constexpr (std::is_same_v<T, std::uint8_t>)  // the store's flags
              return owned_array(std::move(v)).attr("astype")("bool");
            else
              return owned_array(std::move(v));
          },
          c.values);
      columns.append(py::make_tuple(c.name, values));
    }
    out[py::str(analyzer::AnalysisReader::table_names()[t])] = columns;
  }
  return py::make_tuple(attrs, out);
}

}  // namespace

void bind_readers(py::module_& m) {
  py::class_<Snapshot>(m, "SnapshotReader")
      .def(py::init([](const std::string& path) {
             py::gil_scoped_release free;
             return std::make_unique<Snapshot>(path);
           }),
           py::arg("path"))
      .def("refresh", &Snapshot::refresh)
      .def("close", &Snapshot::close)
      .def_property_readonly("closed", &Snapshot::closed)
      .def("steps", &Snapshot::steps)
      .def("losses", &Snapshot::losses)
      .def("layers", &Snapshot::layers)
      .def("grad", &Snapshot::grad, py::arg("step"), py::arg("layer"))
      .def_property_readonly("path", [](const Snapshot& s) { return s.reader().path().string(); })
      .def_property_readonly("total_numel", [](const Snapshot& s) { return s.reader().total_numel(); })
      .def_property_readonly("meta", [](const Snapshot& s) {
        const auto& meta = s.reader().meta();
        py::dict d;
        d["model"] = meta.model;
        d["dataset"] = meta.dataset;
        d["seed"] = meta.seed;
        d["created"] = meta.created;
        d["gradscope_version"] = meta.gradscope_version;
        d["format_version"] = meta.format_version;
        return d;
      });
  m.def("analyze", &analyze, py::arg("input"), py::arg("output"), py::arg("options"), py::arg("progress"));
  m.def("analyze_options", [] { return option_row_dicts(analyzer::analyze_options()); });
  m.def("read_analysis", &read_analysis, py::arg("path"));
  m.def("law_values", &law_values, py::arg("dist"), py::arg("params"), py::arg("what"), py::arg("values"));
  m.def(
      "parameter_names", [](const std::string& dist) { return fitting::parameter_names(dist); }, py::arg("dist"));
  // The layer kind of each (name, shape), in order (analyzer::layer_kinds).
  m.def(
      "layer_kinds",
      [](const std::vector<std::pair<std::string, std::vector<std::int64_t>>>& layers) {
        std::vector<data::LayerInfo> infos;
        for (const auto& [name, shape] : layers) infos.push_back({name, shape});
        return analyzer::layer_kinds(infos);
      },
      py::arg("layers"));
}

}  // namespace gs::python
