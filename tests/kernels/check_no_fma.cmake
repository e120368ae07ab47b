# The numerical policy in the built CUDA code (docs/architecture.md, "The GPU path"): the kernels
# are compiled with -fmad=false, so their PTX holds no float multiply-add contracted into
# fma.rn.f32 and each float formula (fast_log, x*x, e*ln2 + p) rounds as on the host. (fma.rn.f64
# stays: CUDA's double log and log1p are written with explicit FMAs, within 1 ulp, which the
# policy states as a tolerance.) Run as: cmake -DPTX=a.ptx|b.ptx -P check_no_fma.cmake
string(REPLACE "|" ";" files "${PTX}")
list(LENGTH files n)
if(n EQUAL 0)
  message(FATAL_ERROR "no PTX files given")
endif()
set(total 0)
foreach(file IN LISTS files)
  file(READ ${file} ptx)
  string(REGEX MATCHALL "fma\\.rn\\.f32" hits "${ptx}")
  list(LENGTH hits count)
  string(REGEX MATCHALL "\\.entry" entries "${ptx}")
  list(LENGTH entries kernels)
  get_filename_component(name ${file} NAME)
  message(STATUS "${name}: ${kernels} kernels, ${count} fma.rn.f32")
  if(kernels EQUAL 0)
    message(FATAL_ERROR "${name} holds no kernel: not the PTX of the CUDA backend")
  endif()
  math(EXPR total "${total} + ${count}")
endforeach()
if(NOT total EQUAL 0)
  message(FATAL_ERROR "${total} contracted float multiply-adds in the CUDA backend's PTX: build it with -fmad=false")
endif()
