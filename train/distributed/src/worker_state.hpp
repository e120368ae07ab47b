#pragma once
// The parts of a worker's checkpoint that are not compress/'s: the torch state (model parameters
// and buffers, the optimizer's momentum, the default generator) and the step reports so far.
#include <string>
#include <vector>

#include <torch/torch.h>

#include "gs/base/state_stream.hpp"
#include "gs/distributed/trainer.hpp"

namespace gs::distributed {

// Model, optimizer and the default CPU generator, in torch's own archive format.
std::string torch_state(const torch::nn::Module& model, const torch::optim::Optimizer& opt);
// Loads them back into a model and optimizer of the same layout; gs::Error through r otherwise.
void load_torch_state(const StateReader& r, const std::string& bytes, torch::nn::Module& model,
                      torch::optim::Optimizer& opt);

void save_reports(StateWriter& w, const std::vector<StepReport>& steps);
std::vector<StepReport> load_reports(StateReader& r);

}  // namespace gs::distributed
