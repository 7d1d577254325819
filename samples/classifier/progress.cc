// SPDX-License-Identifier: BSD-3-Clause
#include "classifier/progress.h"

#include <unistd.h>

#include <cstdio>

namespace classifier {

ProgressBar::ProgressBar(std::string label, int64_t total)
    : label_(std::move(label)),
      total_(total > 0 ? total : 1),
      tty_(is_terminal()),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_ - std::chrono::seconds(1)) {}

bool ProgressBar::is_terminal() { return ::isatty(STDERR_FILENO) == 1; }

double ProgressBar::elapsed_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_)
      .count();
}

std::string ProgressBar::render(int64_t done, int64_t images, double loss,
                                double stall_share) const {
  constexpr int kWidth = 24;
  int filled = static_cast<int>(kWidth * done / total_);
  std::string bar(filled, '#');
  bar.append(kWidth - filled, '.');
  double seconds = elapsed_s();
  double rate = seconds > 0.2 ? images / seconds : 0;  // 0 until it means something
  double eta = done > 0 ? seconds * (total_ - done) / done : 0;
  char text[256];
  std::snprintf(text, sizeof(text),
                "%s [%s] %lld/%lld  %6.0f img/s  loss %.4f  stall %4.1f%%  "
                "%3.0fs (eta %3.0fs)",
                label_.c_str(), bar.c_str(), static_cast<long long>(done),
                static_cast<long long>(total_), rate, loss, 100 * stall_share,
                seconds, eta);
  return text;
}

bool ProgressBar::due(int64_t done) const {
  if (done >= total_) return true;
  // A terminal: redraw at most 10 times a second. Otherwise: a plain line at
  // each quarter of the epoch.
  if (tty_) return std::chrono::steady_clock::now() - last_draw_ >= std::chrono::milliseconds(100);
  return done >= next_plain_;
}

void ProgressBar::update(int64_t done, int64_t images, double loss,
                         double stall_share) {
  if (!due(done)) return;
  if (tty_) {
    last_draw_ = std::chrono::steady_clock::now();
    last_line_ = render(done, images, loss, stall_share);
    std::fprintf(stderr, "\r%s\x1b[K", last_line_.c_str());
    std::fflush(stderr);
    return;
  }
  next_plain_ = done + (total_ + 3) / 4;
  last_line_ = render(done, images, loss, stall_share);
  if (done < total_) std::fprintf(stderr, "%s\n", last_line_.c_str());
}

void ProgressBar::finish(const std::string& remark) {
  if (tty_) {
    std::fprintf(stderr, "\r%s  %s\x1b[K\n", last_line_.c_str(), remark.c_str());
  } else {
    std::fprintf(stderr, "%s  %s\n", last_line_.c_str(), remark.c_str());
  }
  std::fflush(stderr);
}

}  // namespace classifier
