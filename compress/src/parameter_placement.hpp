#pragma once
// Internal: where BucketCompressor keeps each parameter's residual and velocity. A bucket names
// its parameters by keys the framework chooses (Python's id()); each key gets an ordinal on first
// sight, and a bucket layout (the ordinals it holds, in order) names a residual slot. DDP may
// regroup its parameters into other buckets after the first step: each parameter's residual
// follows it into its new layout's slot. Checkpoints keep the vectors by ordinal, which a new
// process of the same model assigns again (DDP's first buckets follow the parameter order).
#include <cstdint>
#include <map>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gs/base/state_stream.hpp"
#include "gs/compress/bucket_compressor.hpp"
#include "residual_slots.hpp"

namespace gs::compress::detail {

class ParameterPlacement {
 public:
  using ByOrdinal = std::map<std::uint64_t, std::vector<float>>;

  // BucketCompressor::name_parameters: ordinals for the parameters not seen yet, sizes checked
  // (against the bucket's n, earlier sightings and a loaded state); the layout's name.
  std::string name(std::span<const BucketParam> params, std::uint64_t n, int index);
  // name(), then the layout's slot in `residuals` (and `velocities`, where given) filled from
  // wherever each parameter's vector lived before: another layout, the loaded state, or nowhere
  // yet (zeros). A layout no parameter lives in any more is dropped.
  std::string place(std::span<const BucketParam> params, std::uint64_t n, int index, ResidualSlots& residuals,
                    ResidualSlots* velocities);
  bool any_placed() const;
  // The vectors by ordinal, placed or still as loaded (checkpoints).
  ByOrdinal residuals(const ResidualSlots& store) const { return by_ordinal(store, loaded_); }
  ByOrdinal velocities(const ResidualSlots& store) const { return by_ordinal(store, loaded_velocity_); }
  // A checkpoint's vectors by ordinal (`what`: residual or velocity), checked against the sizes of
  // the parameters seen so far.
  ByOrdinal read(StateReader& r, std::string_view what) const;
  // After a load: nothing placed; the loaded vectors wait for their parameters' next bucket.
  void reload(ByOrdinal residuals, ByOrdinal velocities);

 private:
  struct Placed {              // where a parameter's vectors live
    std::string layout;        // the bucket layout holding it ("" while not placed)
    std::uint64_t offset = 0;  // its first element there
    std::uint64_t numel = 0;
  };
  void place_in(ResidualSlots& store, ByOrdinal& loaded, const std::string& layout, std::span<const BucketParam> params,
                std::uint64_t n, std::set<std::string>& left);
  ByOrdinal by_ordinal(const ResidualSlots& store, const ByOrdinal& loaded) const;

  std::map<std::uint64_t, std::uint64_t> ordinal_;  // key -> ordinal (order of first sight)
  std::vector<Placed> placed_;                      // per ordinal
  ByOrdinal loaded_;                                // residuals from a checkpoint, not placed yet
  ByOrdinal loaded_velocity_;                       // velocities from a checkpoint, not placed yet
};

}  // namespace gs::compress::detail
