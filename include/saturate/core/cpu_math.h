// Implements: starting the CPU's vector-math library (MKL's VML, behind LibTorch's sqrt, exp, log,
// tanh ...) on one thread, before two threads can start it at once.
#pragma once

namespace saturate {

/// Runs LibTorch's vector-math functions once on a few numbers, on this thread alone (under
/// the parallel grain), once per process; later calls return at once. Why: when the first use
/// of MKL's VML in a process comes from two threads together (a parallel sqrt, as in the first
/// Adam step, after a GEMM has woken the OpenMP team), one thread's half can be computed on
/// another code path, ~12 bits exact (relative error up to 3.2e-4, measured on a Xeon with
/// AVX-512 and torch 2.11): in 22 of 300 forked processes of the same PyTorch step, the first
/// update differed, and a training run's loss curve with it. Started first (a 16-number sqrt or
/// exp, a 100352-number sqrt before any GEMM, or a whole Adam step): 0 of 150 each, 600 in all.
/// Every CPU session calls it (make_memory_meter), so do the command line, the tests and the
/// Python package when they install the CPU allocator; a program of the library's user whose
/// process runs its own CPU math first calls it once at start.
void start_cpu_math_libraries();

}  // namespace saturate
