// SPDX-License-Identifier: BSD-3-Clause
// The one configuration of stb_image that ringloader compiles: decoding from
// memory only, and only the formats TurboJPEG does not handle.
#pragma once

#define STBI_NO_STDIO
#define STBI_ONLY_PNG
#define STBI_ONLY_BMP
#define STBI_ONLY_GIF
#define STBI_ONLY_PNM
#include <stb_image.h>
