// SPDX-License-Identifier: BSD-3-Clause
#include "classifier/checkpoint.h"

#include <cstdio>
#include <filesystem>

#include <ATen/CPUGeneratorImpl.h>
#include <mutex>

#include "classifier/options.h"

namespace classifier {
namespace {

torch::Tensor to_tensor(const std::vector<double>& values) {
  return torch::tensor(values, torch::kFloat64);
}

std::vector<double> from_tensor(const torch::Tensor& t) {
  torch::Tensor c = t.to(torch::kFloat64).contiguous();
  return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

}  // namespace

void save_checkpoint(const std::string& path, torch::nn::Module& model,
                     torch::optim::Optimizer& optimizer,
                     const CheckpointState& state) {
  torch::serialize::OutputArchive archive, model_archive, optimizer_archive;
  model.save(model_archive);
  optimizer.save(optimizer_archive);
  archive.write("model", model_archive);
  archive.write("optimizer", optimizer_archive);
  archive.write("model_name", c10::IValue(state.model_name));
  archive.write("num_classes", c10::IValue(state.num_classes));
  archive.write("next_epoch", c10::IValue(state.next_epoch));
  archive.write("seed", c10::IValue(static_cast<int64_t>(state.seed)));
  // History as a [epochs, 5] table, step losses as a vector.
  std::vector<double> table;
  for (const EpochRecord& r : state.history) {
    table.insert(table.end(), {r.train_loss, r.train_accuracy, r.test_loss,
                               r.test_accuracy, r.seconds});
  }
  archive.write("history", to_tensor(table).view({-1, 5}));
  archive.write("step_losses", to_tensor(state.step_losses));
  archive.write("loader_state", c10::IValue(state.loader_state));
  // Dropout draws from torch's CPU generator: with its state, a resumed run
  // repeats the uninterrupted one exactly (on CPU).
  archive.write("torch_rng", at::detail::getDefaultCPUGenerator().get_state());
  archive.write("epoch_running", to_tensor({state.epoch_loss_sum,
                                            static_cast<double>(state.epoch_correct),
                                            static_cast<double>(state.epoch_seen)}));
  const std::string temporary = path + ".tmp";
  archive.save_to(temporary);
  std::filesystem::rename(temporary, path);
}

CheckpointState load_checkpoint(const std::string& path,
                                torch::nn::Module& model,
                                torch::optim::Optimizer& optimizer,
                                const std::string& expected_model,
                                int64_t expected_classes, torch::Device device) {
  if (!std::filesystem::is_regular_file(path)) {
    throw UsageError("--resume: no checkpoint file " + path);
  }
  CheckpointState state;
  try {
    torch::serialize::InputArchive archive, model_archive, optimizer_archive;
    archive.load_from(path, device);
    c10::IValue value;
    archive.read("model_name", value);
    state.model_name = value.toStringRef();
    archive.read("num_classes", value);
    state.num_classes = value.toInt();
    if (state.model_name != expected_model || state.num_classes != expected_classes) {
      throw UsageError("--resume: " + path + " holds a " + state.model_name +
                       " with " + std::to_string(state.num_classes) +
                       " classes, this run trains a " + expected_model + " with " +
                       std::to_string(expected_classes));
    }
    archive.read("next_epoch", value);
    state.next_epoch = value.toInt();
    archive.read("seed", value);
    state.seed = static_cast<uint64_t>(value.toInt());
    archive.read("model", model_archive);
    model.load(model_archive);
    archive.read("optimizer", optimizer_archive);
    optimizer.load(optimizer_archive);
    torch::Tensor history, step_losses;
    archive.read("history", history);
    archive.read("step_losses", step_losses);
    std::vector<double> table = from_tensor(history);
    for (size_t i = 0; i + 5 <= table.size(); i += 5) {
      state.history.push_back({table[i], table[i + 1], table[i + 2], table[i + 3], table[i + 4]});
    }
    state.step_losses = from_tensor(step_losses);
    // Checkpoints from before mid-epoch resume have neither.
    if (archive.try_read("loader_state", value)) state.loader_state = value.toStringRef();
    torch::Tensor running, rng;
    if (archive.try_read("torch_rng", rng)) {
      at::Generator generator = at::detail::getDefaultCPUGenerator();
      std::lock_guard<std::mutex> lock(generator.mutex());
      generator.set_state(rng.cpu());
    }
    if (archive.try_read("epoch_running", running) && running.numel() == 3) {
      std::vector<double> r = from_tensor(running);
      state.epoch_loss_sum = r[0];
      state.epoch_correct = static_cast<int64_t>(r[1]);
      state.epoch_seen = static_cast<int64_t>(r[2]);
    }
  } catch (const UsageError&) {
    throw;
  } catch (const std::exception& e) {
    std::string what = e.what();
    throw UsageError("--resume: cannot read checkpoint " + path + ": " +
                     what.substr(0, what.find('\n')));
  }
  return state;
}

}  // namespace classifier
