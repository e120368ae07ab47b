// _gradscope: the compiled part of the gradscope Python package, a pybind11 module over the C++
// libraries (no method is written a second time here). It knows no torch: tensors and arrays
// cross as (address, element count) of memory Python keeps alive for the call, so nothing is
// copied and the module works with whatever PyTorch the interpreter has. The Python layer
// (python/gradscope/) checks dtype, device and layout before it hands an address over.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "collectives.hpp"
#include "diagnostics.hpp"
#include "options.hpp"
#include "stats_fields.hpp"
#include "gs/analyzer/vectors.hpp"
#include "gs/base/allocator.hpp"
#include "gs/compress/compressor.hpp"
#include "gs/data/fashion_mnist.hpp"
#include "gs/data/step_recorder.hpp"
#include "gs/base/error.hpp"
#include "gs/fitting/report.hpp"
#include "gs/kernels/backend.hpp"
#include "gs/kernels/cuda_host.hpp"
#include "gs/kernels/device.hpp"
#include "gs/version.hpp"

namespace py = pybind11;

namespace gs::python {

void bind_recorder(py::module_& m);
void bind_ddp(py::module_& m);
void bind_readers(py::module_& m);

namespace {

// One compressor made by name, as Python's gradscope.ddp.State and gradscope.select use it.
class CompressorHandle {
 public:
  CompressorHandle(const std::string& name, double density, const std::map<std::string, std::string>& options)
      : c_(compress::make_compressor(name, density, parse_options(options))) {}

  // compress() of n floats at `acc` (host memory): (indices int64, values float32, encoded payload
  // uint8, wire bytes, info). The payload is the wire image ModelCompressor::step all-gathers.
  py::tuple compress(std::uintptr_t acc, std::uint64_t n, const std::string& tensor) {
    return run([&] { return c_->compress(span_at<const float>(acc, n), tensor); });
  }
  // The same over n floats at `g` in the memory of the compressor's backend (resident_backend:
  // device memory for cuda): nothing copied in, the selection comes back. With the cuda backend,
  // `stream` (a cudaStream_t as an integer, torch's current stream of the tensor's device; 0: the
  // legacy default stream) is what the work is ordered after, and what is ordered after the work;
  // `device` is that stream's device (-1: the current one), checked against the data's.
  py::tuple compress_resident(std::uintptr_t g, std::uint64_t n, const std::string& tensor, int device,
                              std::uintptr_t stream) {
    if (g == 0 && n > 0) throw Error("compress_resident: null address for " + std::to_string(n) + " elements");
    return run([&] {
      const kernels::CallerStream caller(device, reinterpret_cast<kernels::StreamHandle>(stream));
      return c_->compress_resident(reinterpret_cast<const float*>(g), n, tensor);
    });
  }
  // The backend whose memory compress_resident reads ("cpu", "cuda", "cuda-host"), or None.
  py::object resident_backend() const {
    const auto kind = c_->resident_backend();
    if (!kind) return py::none();
    return py::str(std::string(kernels::to_string(*kind)));
  }

  // out (n floats) = the mean over workers of the encoded payloads (in rank order), as
  // Compressor::aggregate. Every payload is checked (size, index range) before use.
  void aggregate(const std::vector<py::array_t<std::uint8_t, py::array::c_style>>& payloads, std::uintptr_t out,
                 std::uint64_t n) {
    std::vector<compress::Payload> decoded;
    for (std::size_t r = 0; r < payloads.size(); ++r) {
      const auto& a = payloads[r];
      decoded.push_back(compress::decode(
          std::span<const std::byte>(reinterpret_cast<const std::byte*>(a.data()), std::size_t(a.size()))));
      if (decoded.back().n != n)
        throw Error("worker " + std::to_string(r) + " sent a payload of " + std::to_string(decoded.back().n) +
                    " elements for a vector of " + std::to_string(n));
    }
    py::gil_scoped_release free;
    c_->aggregate(decoded, span_at<float>(out, n));
  }

  // Exchange::collective: the compressor's own rounds over `collectives` (a Python object with
  // rank, world_size, allreduce_max/min/sum and allgather). sent and mean get n floats each.
  py::tuple exchange(std::uintptr_t acc, std::uint64_t n, const std::string& tensor, py::object collectives,
                     std::uintptr_t sent, std::uintptr_t mean) {
    PythonCollectives comm(std::move(collectives));
    compress::Compressor::Exchanged r;
    {
      py::gil_scoped_release free;
      r = c_->exchange(span_at<const float>(acc, n), tensor, comm, span_at<float>(sent, n), span_at<float>(mean, n));
    }
    return py::make_tuple(r.wire_bytes, to_dict(r.info));
  }

  void add_gradient_variance(const std::string& tensor, std::uintptr_t v, std::uint64_t n) {
    c_->add_gradient_variance(tensor, span_at<const float>(v, n));
  }

  compress::Compressor& get() { return *c_; }

 private:
  template <class Compress>
  py::tuple run(Compress compress_call) {
    compress::Compressed out;
    std::vector<std::byte> bytes;
    std::uint64_t wire_bytes = 0;
    {
      py::gil_scoped_release free;
      out = compress_call();
      bytes = compress::encode(out.payload, wire_bytes);
    }
    std::vector<std::int64_t> indices(out.payload.indices.begin(), out.payload.indices.end());
    std::vector<std::uint8_t> wire(bytes.size());
    std::memcpy(wire.data(), bytes.data(), bytes.size());
    return py::make_tuple(owned_array(std::move(indices)), owned_array(std::move(out.payload.values)),
                          owned_array(std::move(wire)), wire_bytes, to_dict(out.info));
  }

  std::unique_ptr<compress::Compressor> c_;
};

// fit_report over n floats at `address`, as `gradscope fit --json` prints it.
std::string fit_json(std::uintptr_t address, std::uint64_t n, const std::vector<double>& densities,
                     const std::string& backend, const std::string& input) {
  const kernels::BackendKind kind = kernels::resolve_backend(backend);
  fitting::FitReportOptions options;
  options.densities = densities;
  py::gil_scoped_release free;
  const auto passes = kernels::make_passes(span_at<const float>(address, n), kind);
  return analyzer::fit_json(fitting::fit_report(*passes, options), input, std::string(kernels::to_string(kind))).dump();
}

// The stand-in for torch's stream on a cuda-host fake device (gradscope.ddp's backend "cuda-host"),
// and the readings gradscope._testing takes of this module's libraries (diagnostics.hpp).
void bind_devices(py::module_& m) {
  namespace ch = gs::kernels::cuda_host;
  m.def("cuda_built", &gs::kernels::cuda_built);
  m.def("modelled_device_ms", &gs::kernels::modelled_ms, py::arg("launches"), py::arg("elements_read"),
        "The cost model of device work (docs/gpu.md): launches x 12 us + 4 bytes an element read / 3.64 TB/s "
        "(an H200's, commit cdd4df1's GPU run); a step's StepStats.launches and elements_passed give it.");
  m.def("cuda_host_caller_stream",
        [](int device) { return reinterpret_cast<std::uintptr_t>(ch::caller_stream(device)); });
  static const Diagnostics diagnostics{&ch::work_by_device,
                                       &ch::reset_work_by_device,
                                       &ch::legacy_stream_orders,
                                       +[] {
                                         std::map<int, std::uint64_t> out;
                                         for (const auto& [device, c] : ch::syncs_by_device()) out[device] = c.total();
                                         return out;
                                       },
                                       &gs::kernels::backend_probes,
                                       &gs::kernels::cuda_available};
  m.attr("_diagnostics") = py::capsule(&diagnostics, kDiagnosticsCapsule);
}

// An error of the core as Python speaks: the compressor options' flags (the words of `gradscope
// train`, "--bits 4") become their keywords ("bits 4").
std::string python_words(std::string text) {
  for (const auto& row : compress::compressor_option_rows())
    for (auto at = text.find(row.flag); at != std::string::npos; at = text.find(row.flag, at)) {
      const std::size_t end = at + row.flag.size();
      if (end < text.size() && (std::isalnum(static_cast<unsigned char>(text[end])) || text[end] == '-')) {
        at = end;  // a longer flag that starts alike
        continue;
      }
      text.replace(at, row.flag.size(), row.key());
      at += row.key().size();
    }
  return text;
}

// gradscope.Error is a RuntimeError (what DDP re-raises its hooks' errors as, and what torch's own
// errors are) and a ValueError (bad input to fit, select and the Recorder).
void bind_errors(py::module_& m) {
  static py::exception<gs::Error> error(m, "Error",
                                        py::make_tuple(py::handle(PyExc_RuntimeError), py::handle(PyExc_ValueError)));
  // A file that does not exist: a gradscope.Error that is also the FileNotFoundError Python's own
  // open() raises, so `except FileNotFoundError` catches it.
  static py::exception<gs::MissingFile> missing(m, "MissingFileError",
                                                py::make_tuple(error, py::handle(PyExc_FileNotFoundError)));
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const gs::MissingFile& e) {
      missing(python_words(e.what()).c_str());
    } catch (const gs::Error& e) {
      error(python_words(e.what()).c_str());
    }
  });
}

// The registry's rows as Python reads them (gradscope.compressor_names(), _options.py).
py::list compressor_rows() {
  py::list rows;
  for (const auto& r : compress::compressor_registry()) {
    py::dict d;
    d["name"] = std::string(r.name);
    d["summary"] = std::string(r.summary);
    d["exchange"] = std::string(compress::to_string(r.exchange));
    d["density_based"] = r.density_based;
    d["sparse_selection"] = r.sparse_selection;
    py::list keys;  // the options it reads, as Python's keywords
    for (const auto& o : compress::compressor_option_rows())
      if (std::find(r.options.begin(), r.options.end(), o.flag) != r.options.end()) keys.append(o.key());
    d["options"] = keys;
    d["available"] = !r.available || r.available();
    rows.append(d);
  }
  return rows;
}

// The compressors by name: the registry, the options' table and one compressor (CompressorHandle).
void bind_compressors(py::module_& m) {
  m.def("compressors", &compressor_rows);
  m.def("compressor_options", [] { return option_row_dicts(compress::compressor_option_rows()); });
  m.def("check_options_read", &check_options_read, py::arg("name"), py::arg("options"),
        py::arg("also") = std::vector<std::string>{});
  m.def("default_sidco_stages", &gs::fitting::default_sidco_stages, py::arg("ratio"));
  // The rules the front ends share, written once in C++ (docs/architecture.md).
  m.def("worker_seed", &compress::worker_seed, py::arg("seed"), py::arg("rank"));
  m.def(
      "check_density",
      [](double density, const std::string& what) {
        gs::fitting::check_density(density, what);
        return density;
      },
      py::arg("density"), py::arg("what") = "ratio");
  m.def("density_for", &compress::density_for, py::arg("name"), py::arg("ratio"), py::arg("fallback"),
        py::arg("what") = "ratio");
  py::class_<CompressorHandle>(m, "Compressor")
      .def(py::init<const std::string&, double, const std::map<std::string, std::string>&>(), py::arg("name"),
           py::arg("density"), py::arg("options") = std::map<std::string, std::string>{})
      .def("compress", &CompressorHandle::compress, py::arg("address"), py::arg("n"), py::arg("tensor"))
      .def("compress_resident", &CompressorHandle::compress_resident, py::arg("address"), py::arg("n"),
           py::arg("tensor"), py::arg("device") = -1, py::arg("stream") = std::uintptr_t{0})
      .def_property_readonly("resident_backend", &CompressorHandle::resident_backend)
      .def("aggregate", &CompressorHandle::aggregate, py::arg("payloads"), py::arg("out"), py::arg("n"))
      .def("exchange", &CompressorHandle::exchange, py::arg("address"), py::arg("n"), py::arg("tensor"),
           py::arg("collectives"), py::arg("sent"), py::arg("mean"))
      .def("add_gradient_variance", &CompressorHandle::add_gradient_variance)
      .def("end_step", [](CompressorHandle& h) { h.get().end_step(); })
      .def("set_density", [](CompressorHandle& h, double d) { h.get().set_density(d); })
      .def_property_readonly("name", [](CompressorHandle& h) { return std::string(h.get().name()); })
      .def_property_readonly("density", [](CompressorHandle& h) { return h.get().density(); })
      .def_property_readonly("exchange_kind",
                             [](CompressorHandle& h) { return std::string(compress::to_string(h.get().exchange())); })
      .def_property_readonly("error_feedback", [](CompressorHandle& h) { return h.get().error_feedback(); })
      .def_property_readonly("needs_gradient_variance",
                             [](CompressorHandle& h) { return h.get().needs_gradient_variance(); });
}

// fit_json and Fashion-MNIST through the data library's IDX reader: (pixels uint8 [n, rows, cols],
// labels uint8 [n]).
void bind_fit_and_data(py::module_& m) {
  m.def("fit_json", &fit_json, py::arg("address"), py::arg("n"), py::arg("densities"), py::arg("backend"),
        py::arg("input"));
  m.def(
      "fashion_mnist",
      [](const std::string& split) {
        const gs::data::FashionMnist d = gs::data::load_fashion_mnist(split);
        const auto& im = d.images;
        py::array_t<std::uint8_t> pixels({im.count, im.rows, im.cols}, im.pixels.data());
        py::array_t<std::uint8_t> labels(py::ssize_t(d.labels.labels.size()), d.labels.labels.data());
        return py::make_tuple(pixels, labels);
      },
      py::arg("split"));
}

}  // namespace
}  // namespace gs::python

PYBIND11_MODULE(_gradscope, m) {
  using namespace gs::python;
  m.doc() = "gradscope's C++ core (use the gradscope package, not this module)";
  m.attr("__version__") = gs::kVersion;
  // The heap settings of gradscope's programs (gs/base/allocator.hpp), for the whole process:
  // large temporary tensors are then reused rather than mapped and faulted in every step.
  gs::tune_allocator();
  bind_errors(m);
  bind_devices(m);
  bind_compressors(m);
  bind_fit_and_data(m);
  bind_recorder(m);
  bind_ddp(m);
  bind_readers(m);
}
