#pragma once
// Internals of cpu/reduce.cpp that its white-box tests reach (tests/kernels/test_gp_sums.cpp).
#include <span>

#include "gs/fitting/passes.hpp"

namespace gs::kernels::cpu::detail {

// Whether cpu::gp_sums takes its vector pass (AVX2 with libmvec's log1p) on this machine.
bool gp_sums_vectorized();

// cpu::gp_sums with the scalar pass (std::log1p per element) on any machine: the reference the
// vector pass is held to. Same arguments, checks and chunking.
fitting::GpSums gp_sums_scalar(std::span<const float> g, double theta, double threshold, double shift);

}  // namespace gs::kernels::cpu::detail
