#include "gs/train/threads.hpp"

#include <dlfcn.h>
#include <torch/torch.h>

#include <string>

#include "gs/base/error.hpp"

namespace gs::train {

bool set_compute_threads(int n) {
  if (n < 1) throw Error("compute threads must be at least 1 (got " + std::to_string(n) + ")");
  torch::set_num_threads(n);
  // Looked up at run time: libtorch may be linked against another BLAS, or a build without one.
  using SetThreads = void (*)(int);
  auto set_blas = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
  if (!set_blas) return false;
  set_blas(n);
  return true;
}

}  // namespace gs::train
