// The C++ side of gradscope.ddp: a BucketCompressor (gs/compress/bucket_compressor.hpp) behind a
// handle Python drives with its torch.distributed collectives. Every rule of the hook (residuals,
// warm-up, skipping, statistics) is the C++ one; Python adds the collectives, the Futures and
// pickling.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "collectives.hpp"
#include "gs/base/state_stream.hpp"
#include "gs/compress/bucket_compressor.hpp"
#include "gs/compress/stock_dense.hpp"
#include "gs/kernels/backend.hpp"
#include "gs/kernels/cuda_host.hpp"
#include "gs/kernels/device.hpp"
#include "gs/base/error.hpp"
#include "options.hpp"
#include "stats_fields.hpp"

namespace py = pybind11;

namespace gs::python {
namespace {

// A bucket's parameters as Python names them: (key, numel) pairs, in the bucket's order.
using ParamList = std::vector<std::pair<std::uint64_t, std::uint64_t>>;

std::vector<compress::BucketParam> bucket_params(const ParamList& params) {
  std::vector<compress::BucketParam> ps;
  ps.reserve(params.size());
  for (const auto& [key, numel] : params) ps.push_back({key, numel});
  return ps;
}

class BucketHandle {
 public:
  BucketHandle(const std::string& name, double density, const std::map<std::string, std::string>& options,
               std::int64_t warmup_steps, const std::string& warmup, double warmup_start_density, std::size_t history) {
    const auto w = compress::WarmupSchedule::of(warmup_steps, warmup, warmup_start_density, density);
    w.check(compress::density_based(name), name, {"warmup_steps", "warmup", "warmup_start_ratio", "ratio"});
    core_ = std::make_unique<compress::BucketCompressor>(
        compress::make_compressor(name, density, parse_options(options)), w, history);
  }

  // One bucket: n floats at g (host memory, float32), its parameters as (key, numel) pairs, the
  // update into n floats at out. collectives: the Python object with rank, world_size,
  // allreduce_max/min/sum and allgather (gradscope.ddp.TorchCollectives). element_bytes: the
  // element size of the bucket's own dtype, which the dense bytes count.
  void exchange(int index, std::uintptr_t g, std::uint64_t n, const ParamList& params, py::object collectives,
                std::uintptr_t out, bool last, std::uintptr_t variance, std::uint64_t variance_n, double hook_seconds,
                unsigned element_bytes) {
    const std::vector<compress::BucketParam> ps = bucket_params(params);
    PythonCollectives comm(std::move(collectives));
    py::gil_scoped_release free;
    core_->exchange(index, span_at<const float>(g, n), ps, comm, span_at<float>(out, n), last,
                    span_at<const float>(variance, variance_n), hook_seconds, element_bytes);
  }

  // One bucket in device memory (exchange_resident): n floats at `address` on `device` of
  // `backend` ("cuda", or "cuda-host": host memory standing for that fake device's), overwritten
  // with the update. stream: a cudaStream_t as an integer (the hook's stream on that device, which
  // is ordered after the bucket's producer) that the work is ordered after and that is ordered
  // after the work; 0 for none. collectives: as exchange()'s; when its `device_collectives` is
  // true, it also all-gathers and all-reduces device memory (allgather_pairs,
  // allreduce_sum_device).
  void exchange_resident(int index, std::uintptr_t address, std::uint64_t n, const ParamList& params,
                         py::object collectives, bool last, std::uintptr_t variance, std::uint64_t variance_n,
                         double hook_seconds, const std::string& backend, int device, std::uintptr_t stream,
                         unsigned element_bytes) {
    const std::vector<compress::BucketParam> ps = bucket_params(params);
    compress::DeviceBucket b;
    b.index = index;
    b.data = span_at<float>(address, n).data();
    b.n = n;
    b.backend = kernels::resolve_backend(backend, device);  // asks the bucket's device only
    b.device = device;
    b.element_bytes = element_bytes;
    const bool on_device = collectives.attr("device_collectives").cast<bool>();
    PythonCollectives comm(collectives);
    std::unique_ptr<PythonDeviceCollectives> device_comm;
    if (on_device) device_comm = std::make_unique<PythonDeviceCollectives>(collectives);
    std::unique_ptr<kernels::cuda_host::DeviceMemory> fake;
    if (b.backend == kernels::BackendKind::cuda_host)
      fake = std::make_unique<kernels::cuda_host::DeviceMemory>(b.data, n * sizeof(float), device);
    py::gil_scoped_release free;
    const kernels::CallerStream caller(device, reinterpret_cast<kernels::StreamHandle>(stream));
    core_->exchange_resident(b, ps, comm, device_comm.get(), last, span_at<const float>(variance, variance_n),
                             hook_seconds);
  }

  // compress-when auto's dense steps through DDP's own all-reduce (gs/compress/stock_dense.hpp):
  // open at the step's first bucket; then per bucket prepare before the all-reduce and finish after
  // it, in the buckets' order, on host float32 memory at `address`.
  bool stock_open(py::object collectives, unsigned element_bytes) {
    PythonCollectives comm(std::move(collectives));
    return compress::StockDense::open(*core_, comm, element_bytes);
  }

  void stock_prepare(int index, std::uintptr_t address, std::uint64_t n, const ParamList& params,
                     py::object collectives, bool last, double hook_seconds, unsigned element_bytes) {
    const std::vector<compress::BucketParam> ps = bucket_params(params);
    PythonCollectives comm(std::move(collectives));
    py::gil_scoped_release free;
    compress::StockDense::prepare(*core_, index, span_at<float>(address, n), ps, comm, last, hook_seconds,
                                  element_bytes);
  }

  void stock_finish(int index, std::uintptr_t address, std::uint64_t n, py::object collectives, bool last,
                    double comm_seconds, unsigned element_bytes) {
    PythonCollectives comm(std::move(collectives));
    py::gil_scoped_release free;
    compress::StockDense::finish(*core_, index, span_at<float>(address, n), comm, last, comm_seconds, element_bytes);
  }

  py::list history() const {
    py::list rows;
    for (const auto& s : core_->history()) rows.append(to_dict(s));
    return rows;
  }

  py::bytes save_state() const {
    StateWriter w;
    core_->save_state(w);
    return py::bytes(w.bytes());
  }

  void load_state(const py::bytes& bytes) {
    const std::string b = bytes;
    StateReader r(b, "the gradscope.ddp state");
    core_->load_state(r);
  }

  compress::BucketCompressor& get() { return *core_; }

 private:
  std::unique_ptr<compress::BucketCompressor> core_;
};

}  // namespace

void bind_ddp(py::module_& m) {
  using compress::to_string;
  py::class_<BucketHandle>(m, "BucketCompressor")
      .def(py::init<const std::string&, double, const std::map<std::string, std::string>&, std::int64_t,
                    const std::string&, double, std::size_t>(),
           py::arg("name"), py::arg("density"), py::arg("options"), py::arg("warmup_steps"), py::arg("warmup"),
           py::arg("warmup_start_density"), py::arg("history"))
      .def("exchange", &BucketHandle::exchange, py::arg("index"), py::arg("address"), py::arg("n"), py::arg("params"),
           py::arg("collectives"), py::arg("out"), py::arg("last"), py::arg("variance"), py::arg("variance_n"),
           py::arg("hook_seconds"), py::arg("element_bytes") = 4u)
      .def("exchange_resident", &BucketHandle::exchange_resident, py::arg("index"), py::arg("address"), py::arg("n"),
           py::arg("params"), py::arg("collectives"), py::arg("last"), py::arg("variance"), py::arg("variance_n"),
           py::arg("hook_seconds"), py::arg("backend"), py::arg("device"), py::arg("stream"),
           py::arg("element_bytes") = 4u)
      .def("stock_open", &BucketHandle::stock_open, py::arg("collectives"), py::arg("element_bytes"))
      .def("stock_prepare", &BucketHandle::stock_prepare, py::arg("index"), py::arg("address"), py::arg("n"),
           py::arg("params"), py::arg("collectives"), py::arg("last"), py::arg("hook_seconds"),
           py::arg("element_bytes"))
      .def("stock_finish", &BucketHandle::stock_finish, py::arg("index"), py::arg("address"), py::arg("n"),
           py::arg("collectives"), py::arg("last"), py::arg("comm_seconds"), py::arg("element_bytes"))
      .def(
          "name_parameters",
          [](BucketHandle& h, int index, const ParamList& params) {
            const std::vector<compress::BucketParam> ps = bucket_params(params);
            std::uint64_t n = 0;
            for (const auto& p : ps) n += p.numel;
            h.get().name_parameters(ps, n, index);
          },
          py::arg("index"), py::arg("params"))
      .def(
          "fail_bucket", [](BucketHandle& h, bool last) { h.get().fail_bucket(last); }, py::arg("last"))
      .def(
          "set_density_schedule",
          [](BucketHandle& h, const std::string& kind, double high, std::int64_t interval, double eta) {
            compress::DensitySchedule s;
            s.kind = compress::DensitySchedule::parse_kind(kind);
            s.high = high;
            s.interval = interval;
            s.eta = eta;
            h.get().set_density_schedule(
                s, {"density_schedule", "density_high", "density_interval", "density_eta", "ratio"});
          },
          py::arg("kind"), py::arg("high"), py::arg("interval"), py::arg("eta"))
      .def(
          "set_momentum_correction",
          [](BucketHandle& h, double m) { h.get().set_momentum_correction(m, "momentum_correction"); },
          py::arg("momentum"))
      .def(
          "set_shared_settings",
          [](BucketHandle& h, const std::vector<std::pair<std::string, std::string>>& settings,
             const std::string& advice) {
            std::vector<compress::Setting> v;
            for (const auto& [name, value] : settings) v.push_back({name, value});
            h.get().set_shared_settings(std::move(v), advice);
          },
          py::arg("settings"), py::arg("advice"))
      .def(
          "refuse_steps", [](BucketHandle& h, const std::string& why) { h.get().refuse_steps(why); }, py::arg("why"))
      .def(
          "set_compress_when",
          [](BucketHandle& h, const std::string& when, std::int64_t interval) {
            h.get().set_compress_when(compress::CompressionGate::parse(when), interval);
          },
          py::arg("when"), py::arg("interval"))
      .def(
          "set_exchange",
          [](BucketHandle& h, const std::string& exchange) {
            h.get().set_exchange(compress::exchange_mode(exchange, "exchange"));
          },
          py::arg("exchange"))
      .def_property_readonly("critical", [](BucketHandle& h) { return h.get().regimes().critical(); })
      .def("history", &BucketHandle::history)
      .def("last_step",
           [](BucketHandle& h) -> py::object {
             if (h.get().history().empty()) return py::none();
             return to_dict(h.get().history().back());
           })
      .def("summary", [](BucketHandle& h) { return summary_dict(h.get().summary()); })
      .def("take_warning", [](BucketHandle& h) { return h.get().take_warning(); })
      .def_static("step_stats_defaults", [] { return to_dict(compress::StepStats{}); })
      .def("save_state", &BucketHandle::save_state)
      .def("load_state", &BucketHandle::load_state)
      .def_property_readonly("steps", [](BucketHandle& h) { return h.get().steps(); })
      .def_property_readonly("mid_step", [](BucketHandle& h) { return h.get().mid_step(); })
      .def_property_readonly("last_step_skipped", [](BucketHandle& h) { return h.get().last_step_skipped(); })
      .def_property_readonly("density", [](BucketHandle& h) { return h.get().compressor().density(); })
      .def_property_readonly("exchange_kind",
                             [](BucketHandle& h) { return std::string(to_string(h.get().compressor().exchange())); })
      .def_property_readonly("needs_gradient_variance",
                             [](BucketHandle& h) { return h.get().compressor().needs_gradient_variance(); });
}

}  // namespace gs::python
