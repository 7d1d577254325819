// SPDX-License-Identifier: BSD-3-Clause
#include "loader/ring/fault_point.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

namespace ringloader::fault {
namespace {

std::atomic<Hook> g_hook{nullptr};

// "<point>:<marker>" or "<point>:<signal>:<marker>" from the environment,
// read once per process.
struct Request {
  std::string point;
  std::string marker;
  int signal = SIGKILL;
};

Request read_request(const char* variable, bool with_signal) {
  Request out;
  const char* text = std::getenv(variable);
  if (!text) return out;
  const char* colon = std::strchr(text, ':');
  if (!colon) return out;
  const char* rest = colon + 1;
  if (with_signal) {
    char* end = nullptr;
    long number = std::strtol(rest, &end, 10);
    if (end == rest || *end != ':' || number <= 0 || number >= NSIG) return out;
    out.signal = static_cast<int>(number);
    rest = end + 1;
  }
  out.point.assign(text, colon);
  out.marker = rest;
  return out;
}

const Request& kill_request() {
  static const Request request = read_request("RINGLOADER_FAULT_KILL_AT", false);
  return request;
}

const Request& signal_request() {
  static const Request request = read_request("RINGLOADER_FAULT_SIGNAL_AT", true);
  return request;
}

// The first process to create the marker (O_EXCL) takes the fault.
void take(const Request& request, const char* point) {
  if (request.point.empty() || request.point != point) return;
  int fd = open(request.marker.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
  if (fd < 0) return;  // another process took this fault already
  close(fd);
  raise(request.signal);
}

}  // namespace

void set_hook(Hook hook) { g_hook.store(hook, std::memory_order_release); }

bool compiled_in() {
#ifdef RINGLOADER_FAULT_INJECTION
  return true;
#else
  return false;
#endif
}

void reached(const char* point) {
#ifdef RINGLOADER_FAULT_INJECTION
  if (Hook hook = g_hook.load(std::memory_order_acquire)) hook(point);
  take(signal_request(), point);
  take(kill_request(), point);
#else
  (void)point;
#endif
}

}  // namespace ringloader::fault
