// The built-in models' names (gs/train/model_names.hpp): torch-free, for option parsers.
#include "gs/train/model_names.hpp"

namespace gs::train {

const std::vector<std::string>& model_names() {
  static const std::vector<std::string> names{"mlp", "cnn", "lstm"};
  return names;
}

}  // namespace gs::train
