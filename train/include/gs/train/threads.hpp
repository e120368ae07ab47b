#pragma once
// The compute threads of a training process. libtorch's intra-op pool is one setting; the BLAS it
// calls for matrix products (OpenBLAS on Debian) keeps a pool of its own, sized from the
// environment (OPENBLAS_NUM_THREADS, OMP_NUM_THREADS, else every core). The pool size decides how
// a product's sums are split, so the same seed gives different floats under different
// environments unless both are set.

namespace gs::train {

// Sets libtorch's intra-op threads and, when the process runs on OpenBLAS, its pool to n (>= 1;
// gs::Error otherwise). Returns whether a BLAS pool was found and set.
bool set_compute_threads(int n);

}  // namespace gs::train
