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
#include "options.hpp"
#include "stats_fields.hpp"
#include "gs/analyzer/vectors.hpp"
#include "gs/base/allocator.hpp"
#include "gs/compress/compressor.hpp"
#include "gs/compress/model_compressor.hpp"
#include "gs/compress/thread_collectives.hpp"
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
namespace {


// One compressor made by name, as Python's gradscope.ddp.State and gradscope.select use it.
class CompressorHandle {
 public:
  CompressorHandle(const std::string& name, double density,
                   const std::map<std::string, std::string>& options)
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
  void aggregate(const std::vector<py::array_t<std::uint8_t, py::array::c_style>>& payloads,
                 std::uintptr_t out, std::uint64_t n) {
    std::vector<compress::Payload> decoded;
    for (std::size_t r = 0; r < payloads.size(); ++r) {
      const auto& a = payloads[r];
      decoded.push_back(compress::decode(std::span<const std::byte>(
          reinterpret_cast<const std::byte*>(a.data()), std::size_t(a.size()))));
      if (decoded.back().n != n)
        throw Error("worker " + std::to_string(r) + " sent a payload of " +
                    std::to_string(decoded.back().n) + " elements for a vector of " + std::to_string(n));
    }
    py::gil_scoped_release free;
    c_->aggregate(decoded, span_at<float>(out, n));
  }

  // Exchange::collective: the compressor's own rounds over `collectives` (a Python object with
  // rank, world_size, allreduce_max/min/sum and allgather). sent and mean get n floats each.
  py::tuple exchange(std::uintptr_t acc, std::uint64_t n, const std::string& tensor,
                     py::object collectives, std::uintptr_t sent, std::uintptr_t mean) {
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
  return analyzer::fit_json(fitting::fit_report(*passes, options), input, std::string(kernels::to_string(kind)))
      .dump();
}

// The reference for the DDP hook: ModelCompressor::step of `workers` in-process workers over
// groups of the given sizes (one per bucket), step after step. grads[s][r] holds worker r's
// gradient at step s (the buckets laid end to end); the result, the mean update every worker got.
// momentum_correction: ModelCompressor::set_momentum_correction's momentum (0: off).
std::vector<std::vector<py::array_t<float>>> model_compressor_steps(
    const std::string& name, double density, const std::map<std::string, std::string>& options,
    const std::vector<std::uint64_t>& bucket_sizes,
    const std::vector<std::vector<py::array_t<float, py::array::c_style>>>& grads, double momentum_correction) {
  const int workers = grads.empty() ? 0 : int(grads.front().size());
  std::vector<compress::TensorSpec> specs;
  std::uint64_t numel = 0;
  for (std::size_t b = 0; b < bucket_sizes.size(); ++b) {
    specs.push_back({"bucket" + std::to_string(b), bucket_sizes[b]});
    numel += bucket_sizes[b];
  }
  std::vector<std::vector<std::vector<float>>> out(grads.size(),
                                                   std::vector<std::vector<float>>(std::size_t(workers)));
  std::vector<std::vector<std::span<const float>>> in(grads.size());
  for (std::size_t s = 0; s < grads.size(); ++s) {
    if (int(grads[s].size()) != workers) throw Error("every step needs one gradient per worker");
    for (const auto& g : grads[s]) {
      if (std::uint64_t(g.size()) != numel)
        throw Error("a gradient has " + std::to_string(g.size()) + " elements, the buckets " +
                    std::to_string(numel));
      in[s].emplace_back(g.data(), std::size_t(g.size()));
    }
  }
  const compress::CompressorOptions base = parse_options(options);
  {
    py::gil_scoped_release free;
    compress::run_workers(workers, [&](compress::Collectives& comm) {
      compress::CompressorOptions o = base;
      o.seed = base.seed * 1000003ull + std::uint64_t(comm.rank());
      compress::ModelCompressor mc(specs, compress::Granularity::layer, 0,
                                   compress::make_compressor(name, density, o));
      mc.set_momentum_correction(momentum_correction);
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

void bind_recorder(py::module_& m);
void bind_ddp(py::module_& m);
void bind_readers(py::module_& m);

// The cuda-host backend's fake devices, for tests of where the hook's work lands: the work done on
// each device, the orderings with the legacy stream, and the stand-in for torch's stream.
void bind_cuda_host(py::module_& m) {
  namespace ch = gs::kernels::cuda_host;
  m.def("cuda_host_work_by_device", &ch::work_by_device);
  m.def("cuda_host_reset_work", &ch::reset_work_by_device);
  m.def("cuda_host_legacy_stream_orders", &ch::legacy_stream_orders);
  m.def("cuda_host_caller_stream",
        [](int device) { return reinterpret_cast<std::uintptr_t>(ch::caller_stream(device)); });
  // Blocking synchronizations per fake device since the last reset (total of every kind).
  m.def("cuda_host_syncs_by_device", [] {
    std::map<int, std::uint64_t> out;
    for (const auto& [device, c] : ch::syncs_by_device()) out[device] = c.total();
    return out;
  });
  // Times backend auto or cuda asked the CUDA runtime about a device (making a state asks none).
  m.def("backend_probes", &gs::kernels::backend_probes);
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

}  // namespace gs::python

PYBIND11_MODULE(_gradscope, m) {
  using namespace gs::python;
  namespace compress = gs::compress;
  m.doc() = "gradscope's C++ core (use the gradscope package, not this module)";
  // The heap settings of gradscope's programs (gs/base/allocator.hpp), for the whole process:
  // large temporary tensors are then reused rather than mapped and faulted in every step.
  gs::tune_allocator();
  // gradscope.Error is a RuntimeError (what DDP re-raises its hooks' errors as, and what torch's own
  // errors are) and a ValueError (bad input to fit, select and the Recorder).
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
  m.def("default_sidco_stages", &gs::fitting::default_sidco_stages, py::arg("ratio"));
  m.attr("__version__") = gs::kVersion;
  m.def("cuda_built", &gs::kernels::cuda_built);
  // Fashion-MNIST through the data library's IDX reader: (pixels uint8 [n, rows, cols], labels
  // uint8 [n]).
  m.def("fashion_mnist", [](const std::string& split) {
    const gs::data::FashionMnist d = gs::data::load_fashion_mnist(split);
    const auto& im = d.images;
    py::array_t<std::uint8_t> pixels({im.count, im.rows, im.cols}, im.pixels.data());
    py::array_t<std::uint8_t> labels(py::ssize_t(d.labels.labels.size()), d.labels.labels.data());
    return py::make_tuple(pixels, labels);
  }, py::arg("split"));
  m.def("cuda_available", &gs::kernels::cuda_available);
  bind_cuda_host(m);
  m.def("fit_json", &fit_json, py::arg("address"), py::arg("n"), py::arg("densities"),
        py::arg("backend"), py::arg("input"));
  m.def("compressors", [] {
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
  });
  m.def("compressor_options", [] { return option_row_dicts(compress::compressor_option_rows()); });
  m.def("check_options_read", &check_options_read, py::arg("name"), py::arg("options"),
        py::arg("also") = std::vector<std::string>{});
  py::class_<CompressorHandle>(m, "Compressor")
      .def(py::init<const std::string&, double, const std::map<std::string, std::string>&>(),
           py::arg("name"), py::arg("density"), py::arg("options") = std::map<std::string, std::string>{})
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
  m.def("model_compressor_steps", &model_compressor_steps, py::arg("name"), py::arg("density"),
        py::arg("options"), py::arg("bucket_sizes"), py::arg("grads"), py::arg("momentum_correction") = 0.0);
  bind_recorder(m);
  bind_ddp(m);
  bind_readers(m);
}
