// SPDX-License-Identifier: BSD-3-Clause
// GaussianBlur as torchvision 0.14 runs it on a PIL image: pil_to_tensor,
// a float32 Gaussian kernel (torch.linspace, exp, normalised by its sum),
// reflect padding of kernel_size // 2, convolution, torch.round (half to
// even), back to uint8. We convolve separably in double with torch's
// float32 weights; torch sums in float32 in an order of its own, so a value
// within ~1e-5 of a .5 boundary can round the other way (max diff 1).
#pragma once

#include <array>
#include <memory>
#include <vector>

#include "transforms/compiled_pipeline.h"

namespace ringloader::transforms {

// torchvision's _get_gaussian_kernel1d in float32; `size` odd.
std::vector<float> gaussian_kernel1d(int size, float sigma);

// F.gaussian_blur(img, [kernel_x, kernel_y], [sigma_x, sigma_y]). Throws
// Error when kernel // 2 is not smaller than the image side (torch's reflect
// padding refuses that too).
void gaussian_blur(const Image& in, int kernel_x, int kernel_y, float sigma_x,
                   float sigma_y, Image& out);

// GaussianBlur(kernel_size=(kx, ky), sigma=(min, max)). Draws one uniform
// in [min, max], rounded to float32 (torch's uniform_ on a float tensor).
std::unique_ptr<ImageOp> make_gaussian_blur(int kernel_x, int kernel_y,
                                            std::array<double, 2> sigma);

}  // namespace ringloader::transforms
