#pragma once
// The names of gradscope's built-in models (mlp, cnn, lstm), without torch: option tables and
// parsers check a --model against them.
#include <string>
#include <vector>

namespace gs::train {

const std::vector<std::string>& model_names();

}  // namespace gs::train
