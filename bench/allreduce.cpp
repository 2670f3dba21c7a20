// SPDX-License-Identifier: MIT
// The floor under a data-parallel step's gradient reduction: a blocking
// MPI_Allreduce (sum, in place) of N floats between the ranks, timed over
// many calls with nothing else running; the same as MPI_Iallreduce, polled
// with MPI_Test (what a deadline-bounded wait must do); and Switchyard's
// distributed::all_reduce of a cpu tensor of N floats (its ring of
// point-to-point messages, plus a copy in and out). Rank 0 prints one JSON
// line. Run by bench/distributed.sh with N = the MLP's gradient count.
//   mpirun -np 2 build/bench/bench_allreduce [FLOATS] [CALLS]
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <vector>

#include "switchyard/distributed.h"
#include "switchyard/switchyard.h"

int main(int argc, char** argv) try {
  namespace dist = switchyard::distributed;
  dist::init_process_group("mpi");  // MPI_Init, at the thread level the library needs
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const long floats = argc > 1 ? std::atol(argv[1]) : 235146;
  const int calls = argc > 2 ? std::atoi(argv[2]) : 2000;
  if (floats < 1 || floats > (1L << 30) || calls < 1) {
    if (rank == 0)
      std::fprintf(stderr, "bench_allreduce: expected FLOATS in [1, 2^30] and CALLS >= 1\n");
    dist::destroy_process_group();
    return 2;
  }
  std::vector<float> v(size_t(floats), 1.f);
  auto time = [&](auto once) {
    for (int i = 0; i < 50; ++i) once();  // warm: buffers registered, pages touched
    MPI_Barrier(MPI_COMM_WORLD);
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) once();
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
               .count() /
           calls;
  };
  const double blocking = time([&] {
    MPI_Allreduce(MPI_IN_PLACE, v.data(), int(floats), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  });
  const double polled = time([&] {
    MPI_Request q;
    MPI_Iallreduce(MPI_IN_PLACE, v.data(), int(floats), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &q);
    for (int done = 0; !done;) MPI_Test(&q, &done, MPI_STATUS_IGNORE);
  });
  switchyard::Tensor t = switchyard::full({floats}, 1.f);
  const double ring = time([&] { dist::all_reduce(t); });
  if (rank == 0)
    std::printf(
        "{\"ranks\":%d,\"floats\":%ld,\"bytes\":%ld,\"calls\":%d,\"us_per_call\":%.2f,"
        "\"iallreduce_us_per_call\":%.2f,\"switchyard_us_per_call\":%.2f}\n",
        size, floats, floats * 4, calls, blocking, polled, ring);
  dist::destroy_process_group();
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_allreduce: %s\n", e.what());
  return 1;
}
