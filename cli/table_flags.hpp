#pragma once
// A command's flags from its option table (gs/base/option_table.hpp): each row's text is parsed by
// the row, its range checked by the config's validate() when the command runs, its default shown
// in --help from a default-constructed config.
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "command.hpp"
#include "gs/base/option_table.hpp"
#include "gs/base/error.hpp"

namespace gs::cli {

// One row's flag (with its alias), whose text goes to `take`; the option, or null for a switch.
template <class C>
CLI::Option* add_row_flag(CLI::App& sub, const OptionRow<C>& opt, const C& defaults,
                          std::function<void(const std::string&)> take) {
  const std::string names = opt.alias.empty() ? opt.flag : opt.flag + "," + opt.alias;
  if (opt.kind == ValueKind::flag) {
    sub.add_flag_function(
        names, [take](std::int64_t) { take("1"); }, opt.help);
    return nullptr;
  }
  auto* o = sub.add_option_function<std::string>(names, std::move(take), opt.help);
  o->type_name(opt.kind == ValueKind::integer     ? "INT"
               : opt.kind == ValueKind::real      ? "NUMBER"
               : opt.kind == ValueKind::int_list  ? "INT,..."
               : opt.kind == ValueKind::real_list ? "NUMBER,..."
               : opt.kind == ValueKind::text_list ? "TEXT,..."
                                                  : "TEXT");
  const std::string fallback = opt.get(defaults);
  if (!fallback.empty()) o->default_str(fallback);
  return o;
}

template <class C, class Rows>
void add_table_flags(CLI::App& sub, const Rows& rows, const std::shared_ptr<C>& cfg) {
  const C defaults;
  for (const auto& opt : rows) {
    auto* o = add_row_flag<C>(sub, opt, defaults, [cfg, &opt](const std::string& text) {
      try {
        opt.set(*cfg, text);
      } catch (const gs::Error& e) {
        throw CLI::ValidationError(e.what());
      }
    });
    if (o && !opt.choices.empty()) o->check(CLI::IsMember(opt.choices));
  }
}

// The texts given to a table's flags, in the order given, set on the config and checked by their
// rows when the command runs (apply): a value the row refuses is then the command's one-line
// error (gs::Error, exit 1), as its other checks are, rather than a parse error.
template <class C>
class TableTexts {
 public:
  template <class Rows>
  TableTexts(CLI::App& sub, const Rows& rows) {
    const C defaults;
    for (const auto& opt : rows) {
      auto* o = add_row_flag<C>(sub, opt, defaults,
                                [this, &opt](const std::string& text) { given_.emplace_back(&opt, text); });
      if (o && !opt.choices.empty()) o->type_name("TEXT:{" + join(opt.choices, ",") + "}");
    }
  }
  void apply(C& c) const {
    for (const auto& [row, text] : given_) {
      row->set(c, text);
      row->check(c);
    }
  }

 private:
  std::vector<std::pair<const OptionRow<C>*, std::string>> given_;
};

}  // namespace gs::cli
