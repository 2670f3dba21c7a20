// SPDX-License-Identifier: MIT
// Training across processes and machines over MPI, as torch.distributed:
// a process group started by the launcher (mpirun, srun), collectives on
// tensors of any device, and nn::DistributedDataParallel. Link
// Switchyard::distributed; is_available() says whether this build has MPI.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "switchyard/nn.h"
#include "switchyard/tensor.h"

namespace switchyard::distributed {

// Whether this build has a transport (Open MPI or another MPI), and if not, why.
bool is_available();
std::string unavailable_reason();

struct InitOptions {
  // A collective that the other ranks do not join within this many seconds
  // throws (a rank died or hung) instead of waiting forever. Default: the
  // SWITCHYARD_DIST_TIMEOUT_S setting, else 300.
  double timeout_s = 0;
};
// Joins the group the launcher started: world size and rank from MPI
// (mpirun -np N, srun). backend: "mpi". A single process not started by a
// launcher is a group of one. Starts MPI (thread level SERIALIZED: any
// thread may call, one at a time) unless the application did. Throws when
// already initialized.
void init_process_group(const std::string& backend = "mpi", InitOptions o = {});
bool is_initialized();
// Leaves the group: a barrier with the timeout, then MPI_Finalize when
// init_process_group started MPI. After a failed collective (the ranks out
// of step), MPI is left as it is rather than finalized.
void destroy_process_group();
// Ends every rank of the job now, with `code` (MPI_Abort), when this
// process is one of several; returns otherwise. For an application's error
// path, so the other ranks do not wait on this one. The library itself
// never calls it.
void abort_group(int code);

int get_rank();
int get_world_size();
int get_local_rank();  // rank among the processes on this machine: picks its GPU

enum class ReduceOp { sum, avg, max };
// In place, as PyTorch's: `t` (f32, on any device) takes the result and
// keeps its identity. GPU tensors are staged through host memory (no
// GPU-aware MPI assumed).
void all_reduce(Tensor& t, ReduceOp op = ReduceOp::sum);
void broadcast(Tensor& t, int src = 0);
void barrier();

// What the collectives cost in this process, since the group was made.
struct CommStats {
  int64_t calls = 0;
  uint64_t bytes = 0;          // sent by this rank (its buffers' sizes)
  double seconds = 0;          // from each collective's start to its completion
  double exposed_seconds = 0;  // of those, spent waiting (not hidden behind compute)
};
CommStats comm_stats();

}  // namespace switchyard::distributed

namespace switchyard::nn {

struct DistributedOptions {
  // Gradients are all-reduced in messages of about this size, last layers
  // first, each started as soon as it is filled (PyTorch: bucket_cap_mb).
  // The lazy backward computes every gradient in one submission, so today
  // the reductions follow the compute rather than overlap it.
  double bucket_cap_mb = 0.25;
};

// PyTorch's DistributedDataParallel: each rank runs the whole model on its
// own batch; the constructor broadcasts rank 0's parameters and buffers, and
// backward through the output all-reduces the gradients so that every rank
// holds the gradient of the global batch (each rank's weighted by its rows:
// ranks may have batches of different sizes; the loss must be a mean over
// the batch, as cross_entropy's). Frozen parameters are left out (every rank
// must freeze the same ones); one that no rank used keeps no gradient.
// Needs init_process_group().
class DistributedDataParallel : public Module {
 public:
  explicit DistributedDataParallel(std::shared_ptr<Module> module, DistributedOptions o = {});
  ~DistributedDataParallel() override;
  Tensor forward(const Tensor& x) override;
  Module& module() { return *module_; }
  // Rows in the global batch of the last forward (every rank's summed).
  int64_t global_batch() const;
  int64_t buckets() const;

  struct State;

 private:
  std::shared_ptr<Module> module_;
  std::shared_ptr<State> state_;
};

}  // namespace switchyard::nn
