// CUDA backend: the DDP hook's element-wise work (gs/kernels/vector_ops.hpp), the portable
// VectorOps over the CUB primitives.
#include "../portable/vector_ops.hpp"
#include "cub_prims.cuh"

namespace gs::kernels::cuda {

std::unique_ptr<VectorOps> make_vector_ops(int device) {
  DevicePolicy& policy = detail::policy();
  if (const std::string why = policy.unusable_reason(device); !why.empty())
    throw gs::Error("CUDA backend: " + why + "; use --backend cpu");
  return std::make_unique<portable::PortableVectorOps<detail::CubBackend>>(detail::CubBackend{}, BackendKind::cuda,
                                                                           device, policy.runtime());
}

}  // namespace gs::kernels::cuda
