#pragma once
// GS_HD marks formulas shared by host and device code: written once, compiled by g++ and nvcc.
#if defined(__CUDACC__)
#define GS_HD __host__ __device__
#else
#define GS_HD
#endif
