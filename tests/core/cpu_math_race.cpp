// A program for the test core.a_started_cpu_math_library_gives_every_fresh_process_the_same_sqrt:
// forks fresh processes that each wake the OpenMP team with a GEMM and then take a parallel sqrt,
// those of the check after saturate::start_cpu_math_libraries(), the others (the race's own rate)
// as they come; counts those whose first sqrt differs from their second. Exit 0 when no started
// process differed, 1 otherwise.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include <torch/torch.h>

#include "saturate/core/cpu_math.h"

namespace {

int fresh_process(bool started) {
  if (started) saturate::start_cpu_math_libraries();
  // the first step of a training: a layer's forward and backward, then Adam's update
  torch::nn::Linear layer(784, 128);
  const torch::Tensor x = torch::rand({64, 784});
  layer(x).pow(2).sum().backward();
  const torch::Tensor g = layer->weight.grad();
  torch::Tensor m = torch::zeros_like(g), v = torch::zeros_like(g);
  m.lerp_(g, 0.1);
  v.mul_(0.999).addcmul_(g, g, 0.001);
  const torch::Tensor first = v.sqrt();  // 2 threads: each calls VML on its half
  return torch::equal(first, v.sqrt()) ? 0 : 1;
}

int count_differing(bool started, int processes) {
  int differing = 0;
  for (int i = 0; i < processes; ++i) {
    const pid_t pid = fork();
    if (pid == 0) _exit(fresh_process(started));
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++differing;
  }
  return differing;
}

}  // namespace

/// cpu_math_race STARTED [COLD]: STARTED processes after start_cpu_math_libraries() (the check),
/// and COLD as they come (the race's own rate; default as many as STARTED; 0: not measured).
int main(int argc, char** argv) {
  const int processes = argc > 1 ? std::atoi(argv[1]) : 200;
  const int cold_processes = argc > 2 ? std::atoi(argv[2]) : processes;
  // the parent touches no tensor: each child starts LibTorch's threads and MKL itself
  const int started = count_differing(true, processes);
  std::printf("first sqrt differed from the second in %d of %d fresh processes after start_cpu_math_libraries()\n",
              started, processes);
  if (cold_processes > 0) {
    const int cold = count_differing(false, cold_processes);
    std::printf("... and in %d of %d fresh processes as they come\n", cold, cold_processes);
    if (cold == 0) std::printf("(the race did not show here: this run proves nothing either way)\n");
  }
  return started == 0 ? 0 : 1;
}
