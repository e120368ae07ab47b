#pragma once
// gs::Error: what every library throws for a caller mistake or bad input. The message names the
// problem and, where there is one, what to do about it. Invariants use GS_ASSERT instead.
#include <cassert>
#include <stdexcept>
#include <string>

namespace gs {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A file (or the folder a new file goes in) that does not exist: a caller mistake like any other,
// of its own type so that Python raises it as a FileNotFoundError too (gradscope.MissingFileError).
class MissingFile : public Error {
 public:
  using Error::Error;
};

// A failure of the machine doing the work (a device out of memory, a CUDA or cuFFT status), not of
// the caller's input nor of the data: the same call may well succeed on another backend. Code
// that turns an error into a result row ("this fit failed") must let it through, so that no
// device failure ever passes for a property of the data. It lives here, below every library,
// because fitting/ catches per-fit failures but knows nothing of kernels/, whose
// gs::kernels::DeviceError derives from it.
class DeviceFailure : public Error {
 public:
  using Error::Error;
};

}  // namespace gs

#define GS_ASSERT(cond) assert(cond)
