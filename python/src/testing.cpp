// gradscope._testing: what only the tests call, kept out of the package's own module (the wheel
// leaves it out; the CMake build puts it beside _gradscope in build/python/gradscope/): the C++
// reference the DDP hook is compared with, and the counters of the cuda-host backend's fake devices
// and of the backend's probes, read from _gradscope's libraries (diagnostics.hpp).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "diagnostics.hpp"
#include "options.hpp"
#include "gs/compress/compressor.hpp"
#include "gs/compress/model_compressor.hpp"
#include "gs/compress/thread_collectives.hpp"
#include "gs/base/error.hpp"

namespace py = pybind11;

namespace gs::python {
namespace {

using Steps = std::vector<std::vector<py::array_t<float, py::array::c_style>>>;

// Each step's gradients as spans, checked: one per worker, each of `numel` elements.
std::vector<std::vector<std::span<const float>>> step_spans(const Steps& grads, int workers, std::uint64_t numel) {
  std::vector<std::vector<std::span<const float>>> in(grads.size());
  for (std::size_t s = 0; s < grads.size(); ++s) {
    if (int(grads[s].size()) != workers) throw Error("every step needs one gradient per worker");
    for (const auto& g : grads[s]) {
      if (std::uint64_t(g.size()) != numel)
        throw Error("a gradient has " + std::to_string(g.size()) + " elements, the buckets " + std::to_string(numel));
      in[s].emplace_back(g.data(), std::size_t(g.size()));
    }
  }
  return in;
}

// The reference for the DDP hook: ModelCompressor::step of `workers` in-process workers over
// groups of the given sizes (one per bucket), step after step. grads[s][r] holds worker r's
// gradient at step s (the buckets laid end to end); the result, the mean update every worker got.
// momentum_correction: ModelCompressor::set_momentum_correction's momentum (0: off). Each worker's
// seed is made from the options' as gradscope.ddp.State makes it.
std::vector<std::vector<py::array_t<float>>> model_compressor_steps(const std::string& name, double density,
                                                                    const std::map<std::string, std::string>& options,
                                                                    const std::vector<std::uint64_t>& bucket_sizes,
                                                                    const Steps& grads, double momentum_correction,
                                                                    const std::string& exchange) {
  const int workers = grads.empty() ? 0 : int(grads.front().size());
  std::vector<compress::TensorSpec> specs;
  std::uint64_t numel = 0;
  for (std::size_t b = 0; b < bucket_sizes.size(); ++b) {
    specs.push_back({"bucket" + std::to_string(b), bucket_sizes[b]});
    numel += bucket_sizes[b];
  }
  const auto in = step_spans(grads, workers, numel);
  std::vector<std::vector<std::vector<float>>> out(grads.size(), std::vector<std::vector<float>>(std::size_t(workers)));
  const compress::CompressorOptions base = parse_options(options);
  {
    py::gil_scoped_release free;
    compress::run_workers(workers, [&](compress::Collectives& comm) {
      compress::CompressorOptions o = base;
      o.seed = compress::worker_seed(base.seed, std::uint64_t(comm.rank()));
      compress::ModelCompressor mc(specs, compress::Granularity::layer, 0, compress::make_compressor(name, density, o));
      mc.set_momentum_correction(momentum_correction);
      mc.set_exchange(compress::exchange_mode(exchange, "exchange"));
      for (std::size_t s = 0; s < in.size(); ++s) {
        auto& mean = out[s][std::size_t(comm.rank())];
        mean.resize(numel);
        mc.step(in[s][std::size_t(comm.rank())], comm, mean);
      }
    });
  }
  std::vector<std::vector<py::array_t<float>>> result(out.size());
  for (std::size_t s = 0; s < out.size(); ++s)
    for (auto& v : out[s]) result[s].push_back(owned_array(std::move(v)));
  return result;
}

}  // namespace
}  // namespace gs::python

PYBIND11_MODULE(_testing, m) {
  m.doc() = "what gradscope's tests call (not part of the installed package)";
  // gradscope.Error and the translation of gs::Error come with _gradscope, and so do the readings
  // of its libraries' state (diagnostics.hpp): this module's own copies of them see no work.
  const auto capsule = py::module_::import("gradscope._gradscope").attr("_diagnostics").cast<py::capsule>();
  const auto* d = capsule.get_pointer<gs::python::Diagnostics>();
  m.def("model_compressor_steps", &gs::python::model_compressor_steps, py::arg("name"), py::arg("density"),
        py::arg("options"), py::arg("bucket_sizes"), py::arg("grads"), py::arg("momentum_correction") = 0.0,
        py::arg("exchange") = "allgather");
  // The cuda-host backend's fake devices, for tests of where the hook's work lands: the work done on
  // each device, the orderings with the legacy stream and the blocking synchronizations.
  m.def("cuda_host_work_by_device", d->cuda_host_work_by_device);
  m.def("cuda_host_reset_work", d->cuda_host_reset_work);
  m.def("cuda_host_legacy_stream_orders", d->cuda_host_legacy_stream_orders);
  m.def("cuda_host_syncs_by_device", d->cuda_host_syncs_by_device);
  // Times backend auto or cuda asked the CUDA runtime about a device (making a state asks none).
  m.def("backend_probes", d->backend_probes);
  m.def("cuda_available", d->cuda_available);
}
