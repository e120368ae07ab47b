#pragma once
// A command's flags from its option table (gs/base/option_table.hpp): each row's text is parsed by
// the row, its range checked by the config's validate() when the command runs, its default shown
// in --help from a default-constructed config.
#include <memory>
#include <string>

#include "command.hpp"
#include "gs/base/option_table.hpp"
#include "gs/error.hpp"

namespace gs::cli {

template <class C, class Rows>
void add_table_flags(CLI::App& sub, const Rows& rows, const std::shared_ptr<C>& cfg) {
  const C defaults;
  for (const auto& opt : rows) {
    auto parse = [cfg, &opt](const std::string& text) {
      try {
        opt.set(*cfg, text);
      } catch (const gs::Error& e) {
        throw CLI::ValidationError(e.what());
      }
    };
    if (opt.kind == ValueKind::flag) {
      sub.add_flag_function(opt.flag, [parse](std::int64_t) { parse("1"); }, opt.help);
      continue;
    }
    auto* o = sub.add_option_function<std::string>(opt.flag, parse, opt.help);
    o->type_name(opt.kind == ValueKind::integer ? "INT"
                 : opt.kind == ValueKind::real  ? "NUMBER"
                 : opt.kind == ValueKind::int_list ? "INT,..."
                                                   : "TEXT");
    const std::string fallback = opt.get(defaults);
    if (!fallback.empty()) o->default_str(fallback);
    if (!opt.choices.empty()) o->check(CLI::IsMember(opt.choices));
  }
}

}  // namespace gs::cli
