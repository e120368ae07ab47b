// --on-device-error, the line a device failure stops a command with, the CPU retry's warning.
#include "device_failure.hpp"

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "gs/analyzer/config.hpp"
#include "gs/kernels/cuda_host.hpp"

namespace gs::cli {

void add_on_device_error_option(CLI::App& sub, std::string& value) {
  sub.add_option("--on-device-error", value, analyzer::kOnDeviceErrorHelp)
      ->check(CLI::IsMember(analyzer::kOnDeviceErrorChoices))
      ->capture_default_str();
}

gs::DeviceFailure device_stop(const gs::DeviceFailure& e, const std::string& kept) {
  return gs::DeviceFailure("device failure: " + std::string(e.what()) + "; " + (kept.empty() ? "" : kept + "; ") +
                           "pass --on-device-error cpu to run the work again on the CPU backend");
}

void warn_ran_on_cpu(const std::string& backend, const std::string& failure, const std::string& what_ran) {
  std::fprintf(stderr, "gradscope: warning: device failure on the %s backend (%s): %s on the CPU backend\n",
               backend.c_str(), failure.c_str(), what_ran.c_str());
}

void arm_fault_injection_from_environment() {
  const char* text = std::getenv("GS_CUDA_HOST_FAIL_ALLOCATION_AFTER");
  if (text == nullptr || *text == '\0') return;
  std::int64_t n = 0;
  const char* end = text + std::strlen(text);
  const auto [at, ec] = std::from_chars(text, end, n);
  if (ec != std::errc() || at != end || n < 0) {
    std::fprintf(stderr, "gradscope: warning: GS_CUDA_HOST_FAIL_ALLOCATION_AFTER='%s' is not a count: ignored\n", text);
    return;
  }
  kernels::cuda_host::fail_allocation_after(n);
}

}  // namespace gs::cli
