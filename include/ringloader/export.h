// SPDX-License-Identifier: BSD-3-Clause
// RINGLOADER_EXPORT marks what libringloader.so exports: the classes and
// functions declared in include/ringloader/. Everything else in the library
// is compiled with hidden visibility, so the shared library's dynamic symbol
// table is the public API and nothing more (docs/architecture.md, "ABI";
// tests/abi/check_exports.py checks it).
#pragma once

#if defined(__GNUC__) || defined(__clang__)
#define RINGLOADER_EXPORT __attribute__((visibility("default")))
#else
#define RINGLOADER_EXPORT
#endif
