#include "worker_state.hpp"

#include <cmath>
#include <sstream>

namespace gs::distributed {

std::string torch_state(const torch::nn::Module& model, const torch::optim::Optimizer& opt) {
  torch::serialize::OutputArchive archive, optimizer;
  model.save(archive);
  opt.save(optimizer);
  archive.write("optimizer", optimizer);
  archive.write("generator", at::detail::getDefaultCPUGenerator().get_state());
  std::ostringstream s;
  archive.save_to(s);
  return s.str();
}

void load_torch_state(const StateReader& r, const std::string& bytes, torch::nn::Module& model,
                      torch::optim::Optimizer& opt) {
  try {
    std::istringstream s(bytes);
    torch::serialize::InputArchive archive, optimizer;
    archive.load_from(s);
    model.load(archive);
    archive.read("optimizer", optimizer);
    opt.load(optimizer);
    torch::Tensor generator;
    archive.read("generator", generator);
    at::Generator gen = at::detail::getDefaultCPUGenerator();
    gen.set_state(generator);
  } catch (const c10::Error& e) {
    r.fail(std::string("the model or optimizer state does not load: ") + e.what_without_backtrace());
  }
}

void save_reports(StateWriter& w, const std::vector<StepReport>& steps) {
  w.put<std::uint64_t>(steps.size());
  for (const StepReport& s : steps) {
    const compress::StepStats& st = s.stats;
    w.put(s.step);
    w.put<std::int32_t>(s.epoch);
    w.put(s.lr);
    w.put(s.loss);
    w.put<std::uint8_t>(st.skipped);
    w.put<std::uint8_t>(st.warmup);
    w.put<std::uint8_t>(st.critical);
    w.put(st.target_density);
    w.put(st.density());
    w.put(st.quality());
    w.put<std::int32_t>(st.stages);
    w.put<std::int32_t>(st.groups());
    w.put<std::int32_t>(st.corrected);
    w.put<std::int32_t>(st.exact);
    w.put(st.estimate_n);
    w.put(st.estimate_selected);
    w.put(st.bytes_sent);
    w.put(st.dense_bytes);
    w.put(st.compress_seconds);
    w.put(st.comm_seconds);
    w.put(s.step_seconds);
  }
}

std::vector<StepReport> load_reports(StateReader& r) {
  std::vector<StepReport> steps;
  for (auto n = r.get<std::uint64_t>(); n > 0; --n) {
    StepReport s;
    compress::StepStats& st = s.stats;
    s.step = r.get<std::int64_t>();
    s.epoch = r.get<std::int32_t>();
    s.lr = r.get<double>();
    s.loss = r.get<double>();
    st.skipped = r.get<std::uint8_t>() != 0;
    st.warmup = r.get<std::uint8_t>() != 0;
    st.critical = r.get<std::uint8_t>() != 0;
    st.target_density = r.get<double>();
    const double density = r.get<double>();
    r.get<double>();  // the quality: density / target_density
    st.stages = r.get<std::int32_t>();
    // The groups' own qualities are not kept: their count is (RunStatistics' shares).
    const std::int32_t groups = r.get<std::int32_t>();
    if (groups < 0) r.fail("has a step of a negative group count");
    st.group_quality.assign(std::size_t(groups), 0.0);
    st.corrected = r.get<std::int32_t>();
    st.exact = r.get<std::int32_t>();
    st.estimate_n = r.get<std::uint64_t>();
    st.estimate_selected = r.get<std::uint64_t>();
    st.bytes_sent = r.get<std::uint64_t>();
    st.dense_bytes = r.get<std::uint64_t>();
    st.compress_seconds = r.get<double>();
    st.comm_seconds = r.get<double>();
    s.step_seconds = r.get<double>();
    // The record keeps the step's density as selected of n elements, n the float32 gradient's.
    st.n = st.dense_bytes / sizeof(float);
    st.selected = std::uint64_t(std::llround(density * double(st.n)));
    steps.push_back(s);
  }
  return steps;
}

}  // namespace gs::distributed
