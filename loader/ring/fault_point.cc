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

// "<point>:<marker>" from the environment, read once per process.
struct KillRequest {
  std::string point;
  std::string marker;
};

const KillRequest& kill_request() {
  static const KillRequest request = [] {
    KillRequest out;
    const char* text = std::getenv("RINGLOADER_FAULT_KILL_AT");
    if (!text) return out;
    const char* colon = std::strchr(text, ':');
    if (!colon) return out;
    out.point.assign(text, colon);
    out.marker = colon + 1;
    return out;
  }();
  return request;
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
  const KillRequest& request = kill_request();
  if (request.point.empty() || request.point != point) return;
  int fd = open(request.marker.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
  if (fd < 0) return;  // another process took this fault already
  close(fd);
  raise(SIGKILL);
#else
  (void)point;
#endif
}

}  // namespace ringloader::fault
