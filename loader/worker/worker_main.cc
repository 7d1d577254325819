// SPDX-License-Identifier: BSD-3-Clause
// ringloader-worker: the decode process the trainer spawns. It never links
// torch or CUDA: a fresh address space with only decoders and the ring.
//
//   ringloader-worker --ring-fd 3 --config-fd 4 --index 0 --parent-pid 1234
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

#include "loader/ring/ring.h"
#include "loader/ring/shared_region.h"
#include "loader/worker/worker_loop.h"

namespace {

struct Arguments {
  int ring_fd = -1;
  int config_fd = -1;
  int index = -1;
  int parent_pid = -1;
};

bool parse(int argc, char** argv, Arguments& out) {
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string key = argv[i];
    int value = std::atoi(argv[i + 1]);
    if (key == "--ring-fd") out.ring_fd = value;
    else if (key == "--config-fd") out.config_fd = value;
    else if (key == "--index") out.index = value;
    else if (key == "--parent-pid") out.parent_pid = value;
    else return false;
  }
  return out.ring_fd >= 0 && out.config_fd >= 0 && out.index >= 0 &&
         out.parent_pid > 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Die with the trainer, whatever kills it. Then close the race where it
  // died before prctl: our parent would already have changed.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  Arguments args;
  if (!parse(argc, argv, args)) {
    std::fprintf(stderr,
                 "usage: ringloader-worker --ring-fd N --config-fd N "
                 "--index N --parent-pid N\n(spawned by the ringloader "
                 "library; not meant to be run by hand)\n");
    return 2;
  }
  if (getppid() != args.parent_pid) return 1;
  try {
    auto ring = ringloader::ring::Ring::attach(args.ring_fd);
    auto config = ringloader::worker::WorkerConfig::from_json_text(
        ringloader::ring::SharedRegion::read_text_fd(args.config_fd));
    close(args.config_fd);
    // Before the first sample, so the threads the loop starts inherit it
    // (LoaderOptions::worker_nice weighs the trade). A refusal leaves the
    // worker at the trainer's priority.
    if (config.worker_nice > 0) {
      errno = 0;
      const int current = getpriority(PRIO_PROCESS, 0);
      if (errno == 0) setpriority(PRIO_PROCESS, 0, current + config.worker_nice);
    }
    ringloader::worker::WorkerLoop loop(ring, config, args.index,
                                        args.parent_pid);
    return loop.run();
  } catch (const std::exception& error) {
    std::fprintf(stderr, "ringloader-worker %d: %s\n", args.index, error.what());
    return 3;
  }
}
