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

// A class nested in an exported class takes its parent's visibility: the
// library's own nested classes (pimpls) are marked hidden where they are
// defined, so none of their members is exported.
#if defined(__GNUC__) || defined(__clang__)
#define RINGLOADER_HIDDEN __attribute__((visibility("hidden")))
#else
#define RINGLOADER_HIDDEN
#endif
