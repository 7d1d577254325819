// SPDX-License-Identifier: BSD-3-Clause
#include "loader/data/tar/brace_expand.h"

#include <cstdlib>

#include "ringloader/errors.h"

namespace ringloader::data {
namespace {

constexpr long long kMaxNames = 10'000'000;

[[noreturn]] void fail(const std::string& pattern, const std::string& why) {
  throw OptionError("ringloader: shard pattern '" + pattern + "': " + why);
}

bool parse_integer(const std::string& text, long long& out) {
  if (text.empty() || text.size() > 18) return false;
  size_t start = text[0] == '-' ? 1 : 0;
  if (start == text.size()) return false;
  for (size_t i = start; i < text.size(); ++i) {
    if (text[i] < '0' || text[i] > '9') return false;
  }
  out = std::strtoll(text.c_str(), nullptr, 10);
  return true;
}

// Zero padding like braceexpand: when either end is written with a leading
// zero, every number is padded to the longer end's width.
std::vector<std::string> expand_range(const std::string& first,
                                      const std::string& last,
                                      const std::string& pattern) {
  long long from = 0, to = 0;
  if (!parse_integer(first, from) || !parse_integer(last, to)) {
    fail(pattern, "range {" + first + ".." + last + "} needs integer ends");
  }
  auto padded = [](const std::string& s) { return s.size() > 1 && s[0] == '0'; };
  size_t width = padded(first) || padded(last)
                     ? std::max(first.size(), last.size()) : 0;
  long long step = from <= to ? 1 : -1;
  if ((to - from) * step >= kMaxNames) fail(pattern, "range is too long");
  std::vector<std::string> out;
  for (long long n = from;; n += step) {
    std::string digits = std::to_string(n < 0 ? -n : n);
    size_t sign = n < 0 ? 1 : 0;
    if (digits.size() + sign < width) {
      digits.insert(0, width - digits.size() - sign, '0');
    }
    out.push_back((n < 0 ? "-" : "") + digits);
    if (n == to) break;
  }
  return out;
}

void expand_into(const std::string& text, const std::string& pattern,
                 std::vector<std::string>& out);

// Every expansion of one group's body: a comma list (each part expanded in
// turn), a range "a..b", or else the body kept inside literal braces ("{x}"
// is literal in bash and braceexpand alike; groups inside it still expand).
std::vector<std::string> expand_group(const std::string& body,
                                      const std::string& pattern) {
  std::vector<std::string> parts;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < body.size(); ++i) {
    if (body[i] == '{') ++depth;
    if (body[i] == '}') --depth;
    if (body[i] == ',' && depth == 0) {
      parts.push_back(body.substr(start, i - start));
      start = i + 1;
    }
  }
  parts.push_back(body.substr(start));
  std::vector<std::string> out;
  if (parts.size() > 1) {
    for (const std::string& part : parts) expand_into(part, pattern, out);
    return out;
  }
  size_t dots = body.find("..");
  if (dots != std::string::npos && body.find('{') == std::string::npos) {
    return expand_range(body.substr(0, dots), body.substr(dots + 2), pattern);
  }
  std::vector<std::string> inner;
  expand_into(body, pattern, inner);
  for (const std::string& text : inner) out.push_back("{" + text + "}");
  return out;
}

void expand_into(const std::string& text, const std::string& pattern,
                 std::vector<std::string>& out) {
  size_t open = text.find('{');
  if (open == std::string::npos) {
    if (text.find('}') != std::string::npos) fail(pattern, "unbalanced '}'");
    out.push_back(text);
    return;
  }
  if (text.substr(0, open).find('}') != std::string::npos) {
    fail(pattern, "unbalanced '}'");
  }
  int depth = 0;
  size_t close = std::string::npos;
  for (size_t i = open; i < text.size(); ++i) {
    if (text[i] == '{') ++depth;
    if (text[i] == '}' && --depth == 0) {
      close = i;
      break;
    }
  }
  if (close == std::string::npos) fail(pattern, "unbalanced '{'");
  const std::string prefix = text.substr(0, open);
  std::vector<std::string> heads = expand_group(text.substr(open + 1, close - open - 1), pattern);
  std::vector<std::string> tails;
  expand_into(text.substr(close + 1), pattern, tails);
  for (const std::string& head : heads) {
    for (const std::string& tail : tails) {
      if (static_cast<long long>(out.size()) >= kMaxNames) {
        fail(pattern, "expands to too many names");
      }
      out.push_back(prefix + head + tail);
    }
  }
}

}  // namespace

std::vector<std::string> expand_braces(const std::string& pattern) {
  std::vector<std::string> out;
  expand_into(pattern, pattern, out);
  return out;
}

}  // namespace ringloader::data
