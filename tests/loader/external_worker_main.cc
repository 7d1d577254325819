// SPDX-License-Identifier: BSD-3-Clause
// An external worker for the fault tests: speaks the ring protocol through
// WorkerEndpoint like the Python worker does, and fills each sample with its
// dataset index (every byte = index % 251), so a test can check what it got.
// Its configuration (fd 4) is the sample size in bytes, as text.
// $RINGLOADER_TEST_WORKER_DELAY_MS: a pause before each publish (a slow
// batch), so a test can abandon the epoch while a batch is being filled.
// $RINGLOADER_TEST_WORKER_MARK_DIR: the worker makes `filling-<batch id>`
// there once it holds a batch, so such a test knows that it does (on a
// loaded machine the trainer may otherwise cancel before the claim).
//   ringloader_test_external_worker --ring-fd 3 --config-fd 4 --index I --parent-pid P
#include <signal.h>
#include <fcntl.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "ringloader/external.h"

int main(int argc, char** argv) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  int ring_fd = -1, config_fd = -1, index = -1, parent_pid = -1;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string key = argv[i];
    if (key == "--ring-fd") ring_fd = std::atoi(argv[i + 1]);
    if (key == "--config-fd") config_fd = std::atoi(argv[i + 1]);
    if (key == "--index") index = std::atoi(argv[i + 1]);
    if (key == "--parent-pid") parent_pid = std::atoi(argv[i + 1]);
  }
  if (ring_fd < 0 || config_fd < 0 || index < 0 || parent_pid <= 0) return 2;
  char text[32] = {};
  if (pread(config_fd, text, sizeof(text) - 1, 0) <= 0) return 2;
  close(config_fd);
  const uint64_t sample_bytes = std::strtoull(text, nullptr, 10);
  ringloader::WorkerEndpoint endpoint(ring_fd, index, parent_pid);
  while (auto task = endpoint.next_task()) {
    uint8_t* data = endpoint.slot_data(*task);
    for (size_t position = 0; position < task->samples.size(); ++position) {
      endpoint.heartbeat(task->samples[position]);
      std::memset(data + position * sample_bytes,
                  static_cast<int>(task->samples[position] % 251), sample_bytes);
    }
    if (const char* mark_dir = std::getenv("RINGLOADER_TEST_WORKER_MARK_DIR")) {
      const std::string mark =
          std::string(mark_dir) + "/filling-" + std::to_string(task->batch_id);
      close(open(mark.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
    }
    if (const char* delay = std::getenv("RINGLOADER_TEST_WORKER_DELAY_MS")) {
      usleep(static_cast<useconds_t>(std::atoi(delay)) * 1000);
    }
    endpoint.publish(*task);
  }
  return 0;
}
