// SPDX-License-Identifier: BSD-3-Clause
#include "classifier/training.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <numeric>
#include <thread>

#include "classifier/checkpoint.h"
#include "classifier/pictures.h"
#include "classifier/progress.h"

namespace classifier {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// torch.optim.lr_scheduler.OneCycleLR (cosine, pct_start 0.25): the learning
// rate rises from peak/25 to peak, then falls to peak/25e4, while Adam's
// beta1 moves the other way between 0.95 and 0.85.
void one_cycle(torch::optim::AdamW& optimizer, double peak, int64_t step,
               int64_t total) {
  const double warm = std::max<double>(1, 0.25 * total);
  const double initial = peak / 25, final_lr = initial / 1e4;
  auto cosine = [](double from, double to, double t) {
    return to + (from - to) * (1 + std::cos(M_PI * t)) / 2;
  };
  double lr, beta1;
  if (step < warm) {
    lr = cosine(initial, peak, step / warm);
    beta1 = cosine(0.95, 0.85, step / warm);
  } else {
    double t = std::min(1.0, (step - warm) / std::max(1.0, total - warm));
    lr = cosine(peak, final_lr, t);
    beta1 = cosine(0.85, 0.95, t);
  }
  for (auto& group : optimizer.param_groups()) {
    auto& o = static_cast<torch::optim::AdamWOptions&>(group.options());
    o.lr(lr);
    o.betas(std::make_tuple(beta1, std::get<1>(o.betas())));
  }
}

struct Evaluation {
  double loss = 0, accuracy = 0;
};

Evaluation evaluate(Classifier& model, ringloader::Loader& loader,
                    torch::Device device) {
  torch::NoGradGuard no_grad;
  model.eval();
  double loss_sum = 0;
  int64_t correct = 0, seen = 0;
  for (ringloader::Batch& batch : loader) {
    torch::Tensor x = batch.data.to(device, /*non_blocking=*/true);
    torch::Tensor y = batch.target.to(device, /*non_blocking=*/true);
    torch::Tensor logits = model.forward(x);
    loss_sum += torch::nn::functional::cross_entropy(
                    logits, y,
                    torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
                    .item<double>();
    correct += logits.argmax(1).eq(y).sum().item<int64_t>();
    seen += y.size(0);
  }
  return {seen ? loss_sum / seen : 0, seen ? static_cast<double>(correct) / seen : 0};
}

double mean_of(const std::vector<double>& v, size_t from, size_t to) {
  return std::accumulate(v.begin() + from, v.begin() + to, 0.0) / std::max<size_t>(1, to - from);
}

void print_time_report(const ringloader::LoaderStats& train,
                       const ringloader::LoaderStats& test, double setup_s,
                       double train_s, double eval_s, double total_s) {
  std::printf("\nwhere the time went (%.1f s in all):\n", total_s);
  std::printf("  dataset setup (PNG export when needed, folder scans) %.1f s, training "
              "loop %.1f s, evaluation %.1f s, the rest (loaders, checkpoints, "
              "pictures) %.1f s\n",
              setup_s, train_s, eval_s, total_s - setup_s - train_s - eval_s);
  std::printf("  train loader, %d worker(s), summed over workers: read %.1f s, "
              "decode %.1f s, transform %.1f s, waiting for a free slot %.1f s\n",
              train.workers, train.read_s, train.decode_s, train.transform_s,
              train.slot_wait_s);
  std::printf("  trainer stalled waiting for data: %.2f s = %.1f%% of the training "
              "loop (the rest is forward, backward and the optimizer)\n",
              train.trainer_wait_s, train_s > 0 ? 100 * train.trainer_wait_s / train_s : 0);
  std::printf("  test loader: decode %.1f s, transform %.1f s, trainer stalled %.2f s\n",
              test.decode_s, test.transform_s, test.trainer_wait_s);
  std::printf("\ntrain loader stats:\n  %s\n", train.to_string().c_str());
}

}  // namespace

int train_and_evaluate(const Options& options, Experiment& e) {
  const auto run_start = Clock::now();
  torch::Device device(options.device);
  const int cores = std::max(1u, std::thread::hardware_concurrency());
  torch::set_num_threads(options.threads > 0 ? options.threads : cores);
  torch::manual_seed(options.seed);

  ringloader::LoaderOptions train_options;
  train_options.batch_size = options.batch_size;
  train_options.num_workers = options.workers;
  train_options.shuffle = true;
  // Drop the last partial batch (BatchNorm), unless that is every batch.
  train_options.drop_last = e.train.size() >= options.batch_size;
  train_options.seed = options.seed;
  ringloader::LoaderOptions test_options = train_options;
  test_options.batch_size = std::max<int64_t>(options.batch_size, 500);
  test_options.shuffle = false;
  test_options.drop_last = false;
  ringloader::Loader train_loader(e.train, e.train_pipeline, train_options);
  ringloader::Loader test_loader(e.test, e.test_pipeline, test_options);

  e.model->to(device);
  torch::optim::AdamW optimizer(
      e.model->parameters(),
      torch::optim::AdamWOptions(e.peak_lr).weight_decay(e.weight_decay));

  CheckpointState state;
  state.model_name = e.model->name();
  state.num_classes = static_cast<int64_t>(e.class_names.size());
  state.seed = options.seed;
  if (!options.resume.empty()) {
    state = load_checkpoint(options.resume, *e.model, optimizer, e.model->name(),
                            state.num_classes, device);
    int64_t batch = 0;
    if (!state.loader_state.empty()) {  // taken mid-epoch: go on at its next batch
      ringloader::LoaderState position =
          ringloader::LoaderState::from_json(nlohmann::json::parse(state.loader_state));
      train_loader.load_state_dict(position);
      batch = position.batches_consumed;
    }
    std::printf("resumed from %s at epoch %lld, batch %lld\n", options.resume.c_str(),
                static_cast<long long>(state.next_epoch + 1),
                static_cast<long long>(batch + 1));
  }
  std::filesystem::create_directories(options.out);
  const std::string checkpoint_path = options.out + "/checkpoint.pt";

  const int64_t steps_per_epoch = train_loader.size();
  const int64_t total_steps = steps_per_epoch * e.epochs;
  std::printf("%s: %lld train / %lld test images, %zu classes\n", e.title.c_str(),
              static_cast<long long>(e.train.size()),
              static_cast<long long>(e.test.size()), e.class_names.size());
  std::printf("model %s, %d epochs of %lld batches of %lld, AdamW one-cycle peak lr %g, "
              "%d loader worker(s), %d torch thread(s), device %s\n",
              e.model->name().c_str(), e.epochs, static_cast<long long>(steps_per_epoch),
              static_cast<long long>(options.batch_size), e.peak_lr, options.workers,
              torch::get_num_threads(), device.str().c_str());
  std::fflush(stdout);

  double train_s = 0, eval_s = 0;
  bool grid_saved = false;
  for (int64_t epoch = state.next_epoch; epoch < e.epochs; ++epoch) {
    // The loader's position: shuffle and augmentation are a function of
    // (seed, epoch), so a resumed run sees the batches it would have seen.
    train_loader.set_epoch(epoch);
    e.model->train();
    const double wait_before = train_loader.stats().trainer_wait_s;
    ProgressBar bar("epoch " + std::to_string(epoch + 1) + "/" + std::to_string(e.epochs),
                    steps_per_epoch);
    // A mid-epoch checkpoint's figures so far (zero otherwise); the loader
    // restored from it starts at batch `done`.
    double loss_sum = state.epoch_loss_sum;
    int64_t correct = state.epoch_correct, seen = state.epoch_seen;
    int64_t done = state.loader_state.empty()
        ? 0 : train_loader.state_dict().batches_consumed;
    for (ringloader::Batch& batch : train_loader) {
      if (!grid_saved) {  // one augmented batch, as the model sees it
        save_batch_grid(options.out + "/batch_grid.png", batch.data, batch.target,
                        e.class_names, e.mean, e.std);
        grid_saved = true;
      }
      torch::Tensor x = batch.data.to(device, /*non_blocking=*/true);
      torch::Tensor y = batch.target.to(device, /*non_blocking=*/true);
      one_cycle(optimizer, e.peak_lr, epoch * steps_per_epoch + done, total_steps);
      optimizer.zero_grad();
      torch::Tensor logits = e.model->forward(x);
      torch::Tensor loss = torch::nn::functional::cross_entropy(logits, y);
      loss.backward();
      optimizer.step();

      const double loss_value = loss.item<double>();
      state.step_losses.push_back(loss_value);
      loss_sum += loss_value * y.size(0);
      correct += logits.argmax(1).eq(y).sum().item<int64_t>();
      seen += y.size(0);
      ++done;
      if (options.checkpoint_every > 0 && done % options.checkpoint_every == 0 &&
          done < steps_per_epoch) {
        state.loader_state = train_loader.state_dict().to_json().dump();
        state.epoch_loss_sum = loss_sum;
        state.epoch_correct = correct;
        state.epoch_seen = seen;
        save_checkpoint(checkpoint_path, *e.model, optimizer, state);
      }
      if (bar.due(done)) {
        double stall = (train_loader.stats().trainer_wait_s - wait_before) /
                       std::max(1e-9, bar.elapsed_s());
        bar.update(done, seen, loss_value, stall);
      }
    }
    const double epoch_train_s = bar.elapsed_s();
    const double stall_share =
        (train_loader.stats().trainer_wait_s - wait_before) / std::max(1e-9, epoch_train_s);
    train_s += epoch_train_s;

    const auto eval_start = Clock::now();
    Evaluation test = evaluate(*e.model, test_loader, device);
    eval_s += seconds_since(eval_start);

    EpochRecord record;
    record.train_loss = seen ? loss_sum / seen : 0;
    record.train_accuracy = seen ? static_cast<double>(correct) / seen : 0;
    record.test_loss = test.loss;
    record.test_accuracy = test.accuracy;
    record.seconds = epoch_train_s;
    state.history.push_back(record);
    state.next_epoch = epoch + 1;
    state.loader_state.clear();
    state.epoch_loss_sum = 0;
    state.epoch_correct = state.epoch_seen = 0;
    char remark[160];
    std::snprintf(remark, sizeof(remark), "| test loss %.4f acc %.2f%% | stall %.1f%%",
                  test.loss, 100 * test.accuracy, 100 * stall_share);
    bar.finish(remark);

    save_checkpoint(checkpoint_path, *e.model, optimizer, state);
    save_training_curves(options.out + "/training_curves.png", state.history);
  }

  double accuracy;
  if (state.history.empty() || train_s == 0) {
    // Nothing trained in this run: evaluate what was loaded.
    accuracy = evaluate(*e.model, test_loader, device).accuracy;
  } else {
    accuracy = state.history.back().test_accuracy;
  }
  const double total_s = e.setup_s + seconds_since(run_start);
  print_time_report(train_loader.stats(), test_loader.stats(), e.setup_s, train_s, eval_s,
                    total_s);
  std::printf("\npictures: %s/batch_grid.png, %s/training_curves.png; checkpoint: %s\n",
              options.out.c_str(), options.out.c_str(), checkpoint_path.c_str());
  std::printf("final test accuracy: %.2f%% (%lld images) after %lld epochs, %.1f s\n",
              100 * accuracy, static_cast<long long>(e.test.size()),
              static_cast<long long>(state.next_epoch), total_s);

  int status = 0;
  if (accuracy < options.target_accuracy) {
    std::printf("FAILED: test accuracy %.2f%% is below the target %.2f%%\n",
                100 * accuracy, 100 * options.target_accuracy);
    status = 1;
  }
  if (options.check_loss_falls) {
    const auto& losses = state.step_losses;
    if (losses.size() < 4) {
      std::printf("FAILED: --check-loss-falls needs at least 4 training steps, got %zu\n",
                  losses.size());
      status = 1;
    } else {
      size_t quarter = losses.size() / 4;
      double first = mean_of(losses, 0, quarter);
      double last = mean_of(losses, losses.size() - quarter, losses.size());
      bool falls = last < first;
      std::printf("%s: mean loss %.4f over the first quarter of the steps, %.4f over the last\n",
                  falls ? "loss falls" : "FAILED: the loss does not fall", first, last);
      if (!falls) status = 1;
    }
  }
  std::fflush(stdout);
  return status;
}

}  // namespace classifier
