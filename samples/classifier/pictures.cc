// SPDX-License-Identifier: BSD-3-Clause
#include "classifier/pictures.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

namespace classifier {
namespace {

const cv::Scalar kBlack(0, 0, 0), kWhite(255, 255, 255), kGrid(225, 225, 225);
const cv::Scalar kBlue(180, 100, 30), kOrange(20, 130, 250);  // BGR
constexpr int kFont = cv::FONT_HERSHEY_SIMPLEX;

void write_png(const std::string& path, const cv::Mat& image) {
  if (!cv::imwrite(path, image)) throw std::runtime_error("cannot write " + path);
}

void put_text(cv::Mat& canvas, const std::string& text, cv::Point at,
              double scale, const cv::Scalar& color, bool centered = false,
              int thickness = 1) {
  int baseline = 0;
  cv::Size size = cv::getTextSize(text, kFont, scale, thickness, &baseline);
  if (centered) at.x -= size.width / 2;
  cv::putText(canvas, text, at, kFont, scale, color, thickness, cv::LINE_AA);
}

// A "nice" tick step (1, 2 or 5 x 10^k) giving about `count` ticks.
double tick_step(double range, int count) {
  double raw = range / std::max(count, 1);
  double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * power >= raw) return m * power;
  }
  return 10 * power;
}

struct Series {
  std::string name;
  cv::Scalar color;
  std::vector<double> values;  // one per epoch
};

void draw_panel(cv::Mat& canvas, cv::Rect area, const std::string& title,
                const std::string& y_label, const std::vector<Series>& series) {
  const int left = 70, right = 20, top = 40, bottom = 55;
  cv::Rect plot(area.x + left, area.y + top, area.width - left - right,
                area.height - top - bottom);
  size_t epochs = 0;
  double lo = INFINITY, hi = -INFINITY;
  for (const Series& s : series) {
    epochs = std::max(epochs, s.values.size());
    for (double v : s.values) {
      if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
    }
  }
  if (!std::isfinite(lo)) lo = 0, hi = 1;
  double pad = std::max((hi - lo) * 0.08, 1e-3);
  lo -= pad, hi += pad;
  double step = tick_step(hi - lo, 6);
  lo = std::floor(lo / step) * step;
  hi = std::ceil(hi / step) * step;
  const double x_max = std::max<double>(epochs, 2);  // epochs are 1..x_max
  auto to_px = [&](double epoch, double value) {
    double fx = (epoch - 1) / (x_max - 1), fy = (value - lo) / (hi - lo);
    return cv::Point(plot.x + static_cast<int>(std::lround(fx * plot.width)),
                     plot.y + plot.height - static_cast<int>(std::lround(fy * plot.height)));
  };

  put_text(canvas, title, {area.x + area.width / 2, area.y + 26}, 0.65, kBlack, true, 2);
  char text[32];
  for (double v = lo; v <= hi + step / 2; v += step) {  // y grid and ticks
    cv::Point p = to_px(1, v);
    cv::line(canvas, {plot.x, p.y}, {plot.x + plot.width, p.y}, kGrid, 1);
    cv::line(canvas, {plot.x - 5, p.y}, {plot.x, p.y}, kBlack, 1);
    std::snprintf(text, sizeof(text),
                  step < 0.01 ? "%.3f" : step < 0.1 ? "%.2f" : step < 1 ? "%.1f" : "%.0f", v);
    int baseline = 0;
    cv::Size size = cv::getTextSize(text, kFont, 0.42, 1, &baseline);
    put_text(canvas, text, {plot.x - 8 - size.width, p.y + 5}, 0.42, kBlack);
  }
  int x_step = static_cast<int>(std::max(1.0, tick_step(x_max - 1, 10)));
  for (int e = 1; e <= static_cast<int>(x_max); ++e) {
    if (e != 1 && e % x_step != 0) continue;
    cv::Point p = to_px(e, lo);
    cv::line(canvas, {p.x, plot.y}, {p.x, plot.y + plot.height}, kGrid, 1);
    cv::line(canvas, {p.x, p.y}, {p.x, p.y + 5}, kBlack, 1);
    put_text(canvas, std::to_string(e), {p.x, p.y + 20}, 0.42, kBlack, true);
  }
  cv::rectangle(canvas, plot, kBlack, 1);
  put_text(canvas, "epoch", {plot.x + plot.width / 2, area.y + area.height - 12}, 0.5, kBlack, true);
  // The y label, rotated: draw it horizontally, then rotate the patch.
  {
    int baseline = 0;
    cv::Size size = cv::getTextSize(y_label, kFont, 0.5, 1, &baseline);
    cv::Mat patch(size.height + baseline + 4, size.width + 4, CV_8UC3, kWhite);
    cv::putText(patch, y_label, {2, size.height + 2}, kFont, 0.5, kBlack, 1, cv::LINE_AA);
    cv::rotate(patch, patch, cv::ROTATE_90_COUNTERCLOCKWISE);
    int x = area.x + 8, y = plot.y + (plot.height - patch.rows) / 2;
    if (y >= 0 && y + patch.rows <= canvas.rows) patch.copyTo(canvas(cv::Rect(x, y, patch.cols, patch.rows)));
  }
  for (const Series& s : series) {  // the curves, dots at each epoch
    for (size_t i = 0; i < s.values.size(); ++i) {
      cv::Point p = to_px(static_cast<double>(i + 1), s.values[i]);
      if (i > 0) cv::line(canvas, to_px(static_cast<double>(i), s.values[i - 1]), p, s.color, 2, cv::LINE_AA);
      cv::circle(canvas, p, 3, s.color, cv::FILLED, cv::LINE_AA);
    }
  }
  // The legend goes top right, or bottom right when the curves end high.
  double end_height = 0;
  for (const Series& s : series) {
    if (!s.values.empty()) end_height += (s.values.back() - lo) / (hi - lo) / series.size();
  }
  int y = end_height > 0.5 ? plot.y + plot.height - 20 * static_cast<int>(series.size()) + 8
                           : plot.y + 18;
  for (const Series& s : series) {
    int x = plot.x + plot.width - 170;
    cv::line(canvas, {x, y - 5}, {x + 25, y - 5}, s.color, 2, cv::LINE_AA);
    std::string entry = s.name;
    if (!s.values.empty()) {  // with its last value
      std::snprintf(text, sizeof(text), hi - lo < 5 ? " (last %.3f)" : " (last %.2f)",
                    s.values.back());
      entry += text;
    }
    put_text(canvas, entry, {x + 32, y}, 0.45, kBlack);
    y += 20;
  }
}

}  // namespace

void save_batch_grid(const std::string& path, const torch::Tensor& images,
                     const torch::Tensor& labels,
                     const std::vector<std::string>& class_names,
                     const std::vector<double>& mean,
                     const std::vector<double>& std) {
  torch::Tensor x = images.detach().to(torch::kCPU, torch::kFloat32);
  const int64_t n = std::min<int64_t>(x.size(0), 64);
  const int64_t channels = x.size(1);
  auto m = torch::tensor(mean, torch::kFloat32).view({1, -1, 1, 1});
  auto s = torch::tensor(std, torch::kFloat32).view({1, -1, 1, 1});
  x = (x.slice(0, 0, n) * s + m).clamp(0, 1).mul(255).round().to(torch::kUInt8);
  x = x.permute({0, 2, 3, 1}).contiguous();  // NHWC for OpenCV
  torch::Tensor y = labels.to(torch::kCPU, torch::kInt64);

  // Small images are enlarged so their labels fit below them.
  const int h = static_cast<int>(x.size(1)), w = static_cast<int>(x.size(2));
  const double scale = h < 64 ? 96.0 / h : (h > 128 ? 128.0 / h : 1.0);
  const int cell_w = std::max(static_cast<int>(std::lround(w * scale)), 96);
  const int cell_h = static_cast<int>(std::lround(h * scale));
  const int label_h = 18, gap = 6;
  const int cols = static_cast<int>(std::ceil(std::sqrt(static_cast<double>(n))));
  const int rows = static_cast<int>((n + cols - 1) / cols);
  cv::Mat canvas(rows * (cell_h + label_h + gap) + gap, cols * (cell_w + gap) + gap,
                 CV_8UC3, kWhite);
  for (int64_t i = 0; i < n; ++i) {
    cv::Mat image(h, w, channels == 1 ? CV_8UC1 : CV_8UC3, x[i].data_ptr<uint8_t>());
    cv::Mat bgr;
    if (channels == 1) cv::cvtColor(image, bgr, cv::COLOR_GRAY2BGR);
    else cv::cvtColor(image, bgr, cv::COLOR_RGB2BGR);
    cv::resize(bgr, bgr, {static_cast<int>(std::lround(w * scale)), cell_h}, 0, 0,
               scale > 1 ? cv::INTER_NEAREST : cv::INTER_AREA);
    int row = static_cast<int>(i / cols), col = static_cast<int>(i % cols);
    int x0 = gap + col * (cell_w + gap), y0 = gap + row * (cell_h + label_h + gap);
    bgr.copyTo(canvas(cv::Rect(x0 + (cell_w - bgr.cols) / 2, y0, bgr.cols, bgr.rows)));
    int64_t label = y[i].item<int64_t>();
    std::string name = label >= 0 && label < static_cast<int64_t>(class_names.size())
                           ? class_names[label] : std::to_string(label);
    double font = 0.42;
    int baseline = 0;
    while (font > 0.25 && cv::getTextSize(name, kFont, font, 1, &baseline).width > cell_w) font -= 0.02;
    put_text(canvas, name, {x0 + cell_w / 2, y0 + cell_h + 13}, font, kBlack, true);
  }
  write_png(path, canvas);
}

void save_training_curves(const std::string& path,
                          const std::vector<EpochRecord>& history) {
  Series train_loss{"train", kBlue, {}}, test_loss{"test", kOrange, {}};
  Series train_acc{"train", kBlue, {}}, test_acc{"test", kOrange, {}};
  for (const EpochRecord& r : history) {
    train_loss.values.push_back(r.train_loss);
    test_loss.values.push_back(r.test_loss);
    train_acc.values.push_back(100 * r.train_accuracy);
    test_acc.values.push_back(100 * r.test_accuracy);
  }
  const int panel_w = 560, panel_h = 400;
  cv::Mat canvas(panel_h, 2 * panel_w, CV_8UC3, kWhite);
  draw_panel(canvas, {0, 0, panel_w, panel_h}, "Cross-entropy loss", "loss",
             {train_loss, test_loss});
  draw_panel(canvas, {panel_w, 0, panel_w, panel_h}, "Accuracy", "accuracy (%)",
             {train_acc, test_acc});
  write_png(path, canvas);
}

}  // namespace classifier
