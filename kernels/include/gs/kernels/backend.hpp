#pragma once
// kernels/: the heavy passes over long vectors behind one interface, with a CPU backend (always
// built) and a CUDA twin (when built). This header is the public entry most code needs: choose a
// backend, then read a vector through gs::MagnitudePasses.
//
// The lower-level entry points for compress/ and benchmarks are in
//   gs/kernels/cpu.hpp    host spans (CPU backend): stats, compaction, exact top-k, histograms, samples
//   gs/kernels/cuda.hpp   device pointers with a stream last (CUDA backend), same operations
//   gs/kernels/types.hpp  the small result types both share
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "gs/fitting/passes.hpp"

namespace gs::kernels {

// cuda_host ("cuda-host"): the CUDA backend's pass code compiled for the host
// (gs/kernels/cuda_host.hpp), for checking that code without a GPU; slow, always built.
enum class BackendKind { cpu, cuda, cuda_host };

std::string_view to_string(BackendKind kind);
// True when this build has the CUDA backend and the current GPU can run its kernels (this build
// has a kernel image for it and it supports memory pools).
bool cuda_available();
// True when this build has the CUDA backend (whether or not a GPU is present).
bool cuda_built();
// "auto" (CUDA when available, else CPU: with one warning on stderr per process when a GPU is
// present but cannot run the kernels), "cpu", "cuda" or "cuda-host". gs::Error for an unknown
// name, or for "cuda" when cuda_available() is false (the message says why: not built, no GPU, no
// kernel image for it or no memory pools). `auto` and `cuda` judge `device` (-1: the current one),
// which the CUDA runtime then holds a context on: resolve on the device the work will use.
BackendKind resolve_backend(std::string_view name, int device = -1);
// The checks of resolve_backend that need no device: gs::Error for an unknown name, or for cuda in
// a build without the CUDA backend. Touches no device (what a compressor checks when it is made,
// resolving at its first selection, on the device it then runs on).
void check_backend_name(std::string_view name);
// How many times resolve_backend asked the CUDA runtime about a device (auto or cuda in a CUDA
// build), since the process started: tests of when that happens.
std::uint64_t backend_probes();

// Passes over a host vector. With BackendKind::cuda the data are copied to the device once and
// every pass runs there (with cuda_host, to a host copy standing for it). The span must outlive the returned object.
std::unique_ptr<gs::fitting::MagnitudePasses> make_passes(std::span<const float> host_data, BackendKind kind);

}  // namespace gs::kernels
