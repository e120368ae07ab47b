// gradscope.Recorder's core: a gs::data::StepRecorder writing a snapshot, fed by Python's
// gradient hooks with (address, count) of host float32 gradients.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "gs/data/codecs.hpp"
#include "gs/data/snapshot.hpp"
#include "gs/data/step_recorder.hpp"
#include "gs/base/error.hpp"

namespace py = pybind11;

namespace gs::python {

void bind_recorder(py::module_& m) {
  using data::StepRecorder;
  py::class_<StepRecorder>(m, "StepRecorder")
      .def(py::init([](const std::string& path,
                       const std::vector<std::pair<std::string, std::vector<std::int64_t>>>& layers,
                       const std::string& model, const std::string& dataset, std::uint64_t seed, std::int64_t every,
                       std::size_t queue_depth, bool force, const std::string& compression, int deflate_level) {
             // Python's words for force, checked before the writer's own check would say --force.
             data::check_destination(path, force, "force=True");
             std::vector<data::LayerInfo> infos;
             for (const auto& [name, shape] : layers) infos.push_back({name, shape});
             data::SnapshotMeta meta;
             meta.model = model;
             meta.dataset = dataset;
             meta.seed = seed;
             data::WriterOptions wo;
             wo.force = force;
             wo.compression = compression;
             wo.deflate_level = deflate_level;
             return std::make_unique<StepRecorder>(infos,
                                                   data::snapshot_sink(data::SnapshotWriter(path, meta, infos, wo)),
                                                   data::RecorderOptions{every, queue_depth});
           }),
           py::arg("path"), py::arg("layers"), py::arg("model"), py::arg("dataset"), py::arg("seed"), py::arg("every"),
           py::arg("queue_depth"), py::arg("force"), py::arg("compression"), py::arg("deflate_level"))
      .def("begin_step", &StepRecorder::begin_step, py::call_guard<py::gil_scoped_release>())
      .def("put",
           [](StepRecorder& r, std::size_t layer, std::uintptr_t address, std::uint64_t n) {
             if (n > 0 && address == 0) throw Error("gradient recorder: a null address");
             r.put(layer, std::span<const float>(reinterpret_cast<const float*>(address), n));
           })
      .def("end_step", &StepRecorder::end_step, py::call_guard<py::gil_scoped_release>())
      .def("finish", &StepRecorder::finish, py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("capturing", &StepRecorder::capturing)
      .def_property_readonly("steps_recorded", &StepRecorder::steps_recorded)
      .def_property_readonly("every", &StepRecorder::every);
  m.def("snapshot_codec_names", &data::snapshot_codec_names);
  m.def("default_snapshot_codec", [] { return std::string(data::kDefaultSnapshotCodec); });
}

}  // namespace gs::python
