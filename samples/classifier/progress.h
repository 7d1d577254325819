// SPDX-License-Identifier: BSD-3-Clause
// A one-line progress bar on stderr: redrawn with '\r' on a terminal, a few
// plain lines per epoch otherwise (logs, ctest).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace classifier {

class ProgressBar {
 public:
  // `label` e.g. "epoch 3/10"; `total` batches in the epoch.
  ProgressBar(std::string label, int64_t total);

  // After each batch: batches done, images so far, the latest loss and the
  // loader's stall (trainer wait for data) share of the epoch's wall time.
  // Call update() only when due() (saves computing the figures otherwise).
  bool due(int64_t done) const;
  void update(int64_t done, int64_t images, double loss, double stall_share);
  // Ends the line with a closing remark (e.g. test accuracy).
  void finish(const std::string& remark);

  double elapsed_s() const;
  static bool is_terminal();

 private:
  std::string render(int64_t done, int64_t images, double loss,
                     double stall_share) const;

  std::string label_;
  int64_t total_;
  bool tty_;
  std::chrono::steady_clock::time_point start_, last_draw_;
  int64_t next_plain_ = 0;
  std::string last_line_;
};

}  // namespace classifier
