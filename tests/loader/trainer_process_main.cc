// SPDX-License-Identifier: BSD-3-Clause
// A trainer for the trainer-death tests: builds a Loader with two workers
// over the folder it is given, takes one batch (so the epoch is in flight
// with a slot leased), prints its workers' pids, then ends as told:
//   wait    sleep until killed (the test sends SIGKILL)
//   exit    std::exit mid-epoch: no destructor runs
//   throw   an uncaught exception: std::terminate, SIGABRT
//   return  leave main normally (destructors run)
//   exec    exec /bin/sleep 30: the pid lives on, the trainer does not
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "ringloader/ringloader.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s IMAGE_FOLDER wait|exit|throw|return|exec\n", argv[0]);
    return 2;
  }
  ringloader::LoaderOptions options;
  options.batch_size = 2;
  options.num_workers = 2;
  ringloader::Loader loader(ringloader::Dataset::image_folder(argv[1]),
                            ringloader::Pipeline{ringloader::CenterCrop(8)}, options);
  loader.begin_epoch();
  std::optional<ringloader::Batch> held = loader.next();
  for (int pid : loader.worker_pids()) std::printf("%d\n", pid);
  std::printf("ready\n");
  std::fflush(stdout);
  const std::string mode = argv[2];
  if (mode == "exit") std::exit(0);
  if (mode == "throw") throw std::runtime_error("trainer failed mid-epoch");
  if (mode == "return") return 0;
  if (mode == "exec") {
    execl("/bin/sleep", "sleep", "30", static_cast<char*>(nullptr));
    return 3;
  }
  for (;;) pause();
}
