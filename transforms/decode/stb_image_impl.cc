// SPDX-License-Identifier: BSD-3-Clause
// stb_image's implementation, alone in its translation unit so that the
// sanitizer builds can exempt third-party code from one UBSan check (see
// CMakeLists.txt): stb copies zero bytes to a null buffer when a PNG's first
// IDAT chunk is empty (memcpy(NULL, src, 0)), which UBSan's nonnull check
// stops on although nothing is read or written. Our own code stays checked.
#define STB_IMAGE_IMPLEMENTATION
#include "transforms/decode/stb_config.h"
