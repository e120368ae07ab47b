#pragma once
// The options `gradscope capture` and `gradscope train` share (--model, --batch, --lr, --momentum,
// --seed): one row each, with one help text and one range, as a row of any config holding the
// fields of the same names and types (CaptureConfig, distributed::TrainConfig). Without torch.
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>

#include "gs/base/option_table.hpp"
#include "gs/base/error.hpp"
#include "gs/train/model_names.hpp"

namespace gs::train {

// The training set's size: no batch can be larger.
inline constexpr std::int64_t kMaxBatch = 60000;

template <class C>
OptionRow<C> common_option(std::string_view flag) {
  if (flag == "--model")
    return option_row<std::string, C>(
        "--model", "model to train", [](auto& c) -> auto& { return c.model; }, {}, model_names());
  if (flag == "--batch")
    return option_row<std::int64_t, C>(
        "--batch", "examples per worker per step", [](auto& c) -> auto& { return c.batch; },
        [](const std::int64_t& v) {
          if (v < 1 || v > kMaxBatch)
            throw Error("--batch must be between 1 and 60000, the training set's size (got " + std::to_string(v) + ")");
        });
  if (flag == "--lr")
    return option_row<double, C>(
        "--lr", "SGD learning rate (of the first step, under a schedule)", [](auto& c) -> auto& { return c.lr; },
        [](const double& v) {
          if (!(v > 0.0) || !std::isfinite(v)) throw Error("--lr must be a positive number");
        });
  if (flag == "--momentum")
    return option_row<double, C>(
        "--momentum", "SGD momentum", [](auto& c) -> auto& { return c.momentum; },
        [](const double& v) {
          if (!(v >= 0.0 && v < 1.0)) throw Error("--momentum must be in [0, 1)");
        });
  if (flag == "--seed")
    return option_row<std::uint64_t, C>(
        "--seed", "seed of the model, the data order and any sampling", [](auto& c) -> auto& { return c.seed; });
  throw Error("no option " + std::string(flag) + " is common to capture and train");
}

}  // namespace gs::train
