#pragma once
// Which training steps of a snapshot `gradscope analyze --steps` (Python: steps=) analyses, by
// their step numbers, never by row: a union of pieces, each a slice over step numbers like a
// Python range (first, first + stride, ... below last; no last: on to the end, so a growing file
// adds new steps) or one step named alone. A named step must be recorded; a slice selects the
// recorded steps it covers; a selection that selects no recorded step is an error.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gs/data/snapshot.hpp"

namespace gs::analyzer {

struct StepSelection {
  struct Piece {
    std::int64_t first = 0;
    std::optional<std::int64_t> last;  // none: no end
    std::int64_t stride = 1;
    bool named = false;  // one step given alone ("40"): first, with last first + 1
    bool covers(std::int64_t step) const;
    std::string to_string() const;  // "40" when named, else "a:b:c" with an empty b when open
    bool operator==(const Piece&) const = default;
  };
  std::vector<Piece> pieces;  // none: every step

  // Pieces joined by ",", each "a:b:c", "a:b", "a:", ":b", "::c" or "a" (that step); "" selects
  // every step. gs::Error naming the text otherwise.
  static StepSelection parse(const std::string& text);
  // Canonical text: the pieces joined by ","; "0::1" for every step.
  std::string to_string() const;
  bool all() const { return pieces.empty(); }
  // The selection as one slice (every step is 0::1, a named step a:a+1:1), or none when it is a
  // union of several pieces: what merged shards must be.
  std::optional<Piece> single_slice() const;
  // The rows of `recorded` (a snapshot's steps) selected, in order. gs::Error naming a named step
  // that is not recorded, and when a selection of some steps selects no recorded one, saying
  // which steps exist (every step of a snapshot that holds none yet is no rows, no error).
  std::vector<std::size_t> rows(const std::vector<data::StepRecord>& recorded) const;
  // The union of this selection and `more`, pieces of one stride and phase that overlap or meet
  // joined into one: what a store holds after a re-run selected `more`.
  StepSelection joined(const StepSelection& more) const;
};

}  // namespace gs::analyzer
