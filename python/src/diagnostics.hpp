#pragma once
// What _gradscope lends gradscope._testing: readings of the process's state in the libraries
// linked into _gradscope (the cuda-host backend's fake devices, the device policy, the backend's
// probes). The libraries are static, so _testing holds copies of its own that the package's work
// never touches; it reads _gradscope's through this table, passed in a capsule.
#include <cstdint>
#include <map>

namespace gs::python {

struct Diagnostics {
  std::map<int, std::uint64_t> (*cuda_host_work_by_device)();   // work done on each fake device
  void (*cuda_host_reset_work)();                               // and the counts below but the probes
  std::uint64_t (*cuda_host_legacy_stream_orders)();            // orderings with the legacy stream
  std::map<int, std::uint64_t> (*cuda_host_syncs_by_device)();  // blocking synchronizations, every kind
  std::uint64_t (*backend_probes)();  // times backend auto or cuda asked the CUDA runtime about a device
  bool (*cuda_available)();           // a usable GPU, as the device policy says
};

// The capsule's name, and the attribute of _gradscope holding it.
inline constexpr const char* kDiagnosticsCapsule = "gradscope._gradscope._diagnostics";

}  // namespace gs::python
