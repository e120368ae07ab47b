// StepSelection: parsing, the rows it selects in a snapshot, and the union of two selections.
#include "gs/analyzer/step_selection.hpp"

#include <algorithm>
#include <charconv>
#include <map>
#include <tuple>

#include "gs/base/join.hpp"
#include "gs/base/error.hpp"

namespace gs::analyzer {
namespace {

std::optional<std::int64_t> parse_step(std::string_view part, const std::string& whole) {
  if (part.empty()) return std::nullopt;
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
  if (ec != std::errc() || end != part.data() + part.size() || v < 0)
    throw Error("bad step selection '" + whole + "': '" + std::string(part) +
                "' is not a training step (use a:b:c with step numbers >= 0, e.g. 0:100:10, a step "
                "alone, or a comma list of them)");
  return v;
}

StepSelection::Piece parse_piece(std::string_view text, const std::string& whole) {
  if (text.empty()) throw Error("bad step selection '" + whole + "': an empty item (drop the extra ',')");
  const auto parts = split_list(text, ':');
  if (parts.size() > 3) throw Error("bad step selection '" + whole + "': use a:b:c (first step, end step, stride)");
  StepSelection::Piece p;
  if (parts.size() == 1) {
    const std::int64_t a = *parse_step(parts[0], whole);  // not empty: text is not
    return {a, a + 1, 1, true};
  }
  p.first = parse_step(parts[0], whole).value_or(0);
  p.last = parse_step(parts[1], whole);
  if (parts.size() == 3) p.stride = parse_step(parts[2], whole).value_or(1);
  if (p.stride == 0) throw Error("bad step selection '" + whole + "': the stride must be at least 1");
  if (p.last && *p.last <= p.first)
    throw Error("bad step selection '" + whole + "': it selects no step (end must exceed first)");
  return p;
}

}  // namespace

bool StepSelection::Piece::covers(std::int64_t step) const {
  return step >= first && (!last || step < *last) && (step - first) % stride == 0;
}

std::string StepSelection::Piece::to_string() const {
  if (named) return std::to_string(first);
  return std::to_string(first) + ":" + (last ? std::to_string(*last) : "") + ":" + std::to_string(stride);
}

StepSelection StepSelection::parse(const std::string& text) {
  StepSelection s;
  for (std::string_view item : split_list(text)) s.pieces.push_back(parse_piece(item, text));
  return s;
}

std::string StepSelection::to_string() const {
  if (all()) return Piece{}.to_string();
  return join(pieces, ",", [](const Piece& p) { return p.to_string(); });
}

std::optional<StepSelection::Piece> StepSelection::single_slice() const {
  if (all()) return Piece{};
  if (pieces.size() != 1) return std::nullopt;
  Piece p = pieces.front();
  p.named = false;
  return p;
}

std::vector<std::size_t> StepSelection::rows(const std::vector<data::StepRecord>& recorded) const {
  for (const Piece& p : pieces) {
    const bool found = std::any_of(recorded.begin(), recorded.end(), [&](const auto& r) { return r.step == p.first; });
    if (p.named && !found)
      throw Error("--steps: step " + std::to_string(p.first) + " is not recorded; " + data::describe_steps(recorded));
  }
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < recorded.size(); ++i)
    if (all() || std::any_of(pieces.begin(), pieces.end(), [&](const Piece& p) { return p.covers(recorded[i].step); }))
      out.push_back(i);
  if (out.empty() && !all())  // every step of a snapshot that holds none yet: an empty analysis
    throw Error("--steps '" + (all() ? std::string() : to_string()) + "' selects no recorded step; " +
                data::describe_steps(recorded));
  return out;
}

StepSelection StepSelection::joined(const StepSelection& more) const {
  if (all() || more.all()) return {};
  // Pieces of one stride and phase, by their first step: each that starts within (or right at
  // the end of) the one before extends it.
  std::multimap<std::tuple<std::int64_t, std::int64_t, std::int64_t>, Piece> sorted;
  for (const auto* s : {this, &more})
    for (const Piece& p : s->pieces) sorted.emplace(std::make_tuple(p.stride, p.first % p.stride, p.first), p);
  StepSelection out;
  std::optional<std::tuple<std::int64_t, std::int64_t>> group;
  for (auto& [key, p] : sorted) {
    const auto here = std::make_tuple(std::get<0>(key), std::get<1>(key));
    Piece* prev = (group == here && !out.pieces.empty()) ? &out.pieces.back() : nullptr;
    if (prev && (!prev->last || p.first <= *prev->last)) {
      prev->last = (!prev->last || !p.last) ? std::nullopt : std::optional(std::max(*prev->last, *p.last));
      prev->named = prev->named && p.named && prev->first == p.first;
    } else {
      out.pieces.push_back(p);
    }
    group = here;
  }
  std::stable_sort(out.pieces.begin(), out.pieces.end(),
                   [](const Piece& a, const Piece& b) { return a.first < b.first; });
  return out;
}

}  // namespace gs::analyzer
