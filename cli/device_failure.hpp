#pragma once
// What `gradscope fit` and `gradscope analyze` do when the device fails part-way (a
// gs::DeviceFailure: out of memory, a CUDA or cuFFT status): the --on-device-error flag both
// declare (analyzer::kOnDeviceErrorChoices), the one line they stop with, and the warning they
// print when the work ran again on the CPU. The results themselves never hold a device failure.
#include <CLI/CLI.hpp>

#include <string>

#include "gs/base/error.hpp"

namespace gs::cli {

// --on-device-error {stop,cpu} into `value`.
void add_on_device_error_option(CLI::App& sub, std::string& value);

// The error a command stops with: the failure and how to run the work on the CPU instead; `kept`
// (may be empty) says what of the output stays.
gs::DeviceFailure device_stop(const gs::DeviceFailure& e, const std::string& kept = {});

// One line on stderr: the device failure on `backend` and that `what_ran` ran on the CPU backend.
void warn_ran_on_cpu(const std::string& backend, const std::string& failure, const std::string& what_ran);

// The fault injection of the CLI's tests: with GS_CUDA_HOST_FAIL_ALLOCATION_AFTER=N in the
// environment, the cuda-host backend (a backend for checks) fails its allocation after N more as
// a device out of memory would (gs::kernels::cuda_host::fail_allocation_after).
void arm_fault_injection_from_environment();

}  // namespace gs::cli
