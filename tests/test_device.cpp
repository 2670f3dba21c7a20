// SPDX-License-Identifier: MIT
// Device selection by name, the device list, transfers and counters.
#include <cstdlib>
#include <functional>
#include <map>

#include "graph.h"
#include "helpers.h"
#include "serial_ring.h"
#include "test_env.h"

using sy::Tensor;

TEST(Device, NamesResolve) {
  mock_device();
  EXPECT_EQ(sy::backend_device("cpu").str(), "cpu");
  EXPECT_EQ(&sy::backend_device("cpu:0"), &sy::backend_of(sy::cpu()));
  EXPECT_EQ(&mock_device(), &sy::backend_device("mock:0"));
  EXPECT_EQ(&sy::backend_device("mock"), &mock_device());
}

TEST(Device, AutoNeverPicksACpuTypeDevice) {
  sy::BackendDevice& a = sy::backend_device("auto");
  bool gpu = false;
  for (auto& b : sy::backends())
    if (b.name == "cuda" || b.name == "vulkan")
      for (auto& d : b.devices) gpu |= d->info().type != sy::DeviceType::cpu;
  if (!gpu)
    EXPECT_EQ(&a, &sy::backend_of(sy::cpu()));
  else
    EXPECT_NE(a.info().type, sy::DeviceType::cpu);
}

TEST(Device, EnvironmentOverridesTheDefault) {
  set_env("SWITCHYARD_DEVICE", "mock:0");
  EXPECT_EQ(&sy::backend_of(sy::default_device()), &mock_device());
  set_env("SWITCHYARD_DEVICE", "nonsense");
  expect_error([] { sy::backend_of(sy::default_device()); }, {"unknown device 'nonsense'"});
  unset_env("SWITCHYARD_DEVICE");
  EXPECT_EQ(&sy::backend_of(sy::default_device()), &sy::backend_device("auto"));
}

TEST(Device, IsAvailableAgreesWithTheBackendList) {
  for (auto& b : sy::backends()) {
    int n = b.available ? int(b.devices.size()) : 0;
    if (b.name == "cuda") {
      EXPECT_EQ(sy::cuda::is_available(), n > 0);
      EXPECT_EQ(sy::cuda::device_count(), n);
    }
    if (b.name == "vulkan") {
      EXPECT_EQ(sy::vulkan::is_available(), n > 0);
      EXPECT_EQ(sy::vulkan::device_count(), n);
    }
  }
  if (const char* r = std::getenv("SWITCHYARD_REQUIRE_VULKAN"); r && std::string(r) == "1") {
    EXPECT_TRUE(sy::vulkan::is_available());
  }
}

TEST(Device, ListingSaysWhyABackendIsAbsent) {
  bool cpu = false;
  for (auto& b : sy::backends()) {
    if (b.name == "cpu") cpu = b.available && b.devices.size() == 1;
    if (!b.available) {
      EXPECT_FALSE(b.reason.empty()) << b.name;
      EXPECT_TRUE(b.devices.empty()) << b.name;
    }
  }
  EXPECT_TRUE(cpu);
  auto devs = sy::devices();
  ASSERT_FALSE(devs.empty());
  EXPECT_EQ(devs.front(), &sy::backend_of(sy::cpu()));
  EXPECT_GT(sy::cpu().info().memory_bytes, 0u);
}

TEST(Device, ToMovesDataAndCountsBytes) {
  auto v = random_vec(1000, 3);
  Tensor x = sy::from_vector(v, {10, 100});
  auto& m = mock_device();
  auto up0 = m.counters().bytes_uploaded;
  Tensor y = x.to(m);
  EXPECT_EQ(&y.device(), &m);
  EXPECT_EQ(m.counters().bytes_uploaded - up0, 4000u);
  EXPECT_EQ(x.to(sy::cpu()).impl(), x.impl()) << "same device: the same tensor";
  Tensor back = (y * 2.f).to("cpu", /*non_blocking=*/true);
  auto bv = back.to_vector<float>();
  for (size_t i = 0; i < v.size(); ++i) EXPECT_FLOAT_EQ(bv[i], 2.f * v[i]);
}

TEST(Device, ModuleToMovesParametersGradientsAndOptimizerState) {
  auto model = std::make_shared<sy::nn::Linear>(4, 3);
  Tensor w = model->weight();
  auto before = w.to_vector<float>();
  sy::optim::Adam opt(model->parameters(), 1e-2f);
  sy::sum((*model)(sy::ones({2, 4}))).backward();
  opt.step();
  model->to(mock_device());
  EXPECT_EQ(&w.device(), &mock_device()) << "the parameter keeps its identity";
  EXPECT_EQ(&model->weight().grad().device(), &mock_device());
  opt.zero_grad();
  Tensor x = sy::ones({2, 4}, mock_device());
  sy::sum((*model)(x)).backward();
  opt.step();  // optimizer state follows the parameters
  EXPECT_NE(w.to_vector<float>(), before);
  auto named = model->named_parameters();
  ASSERT_EQ(named.size(), 2u);
  EXPECT_EQ(named[0].first, "weight");
  EXPECT_EQ(named[1].first, "bias");
  EXPECT_EQ(named[0].second.shape(), (sy::Shape{3, 4})) << "PyTorch layout (out, in)";
}

TEST(Device, LinearInitializationFollowsPyTorch) {
  sy::manual_seed(0);
  sy::nn::Linear l(400, 50);
  float bound = 1.f / 20.f;
  auto w = l.weight().to_vector<float>();
  auto b = l.bias().to_vector<float>();
  float mx = 0;
  for (float a : w) mx = std::max(mx, std::fabs(a));
  for (float a : b) EXPECT_LE(std::fabs(a), bound);
  EXPECT_LE(mx, bound);
  EXPECT_GT(mx, 0.95f * bound) << "uniform over the whole range";
}

TEST(Device, CountersTrackAllocationsAndReleases) {
  auto& m = mock_device();
  auto c0 = m.counters();
  sy::Buffer b = m.allocate(1 << 20);
  EXPECT_EQ(m.counters().buffer_allocations - c0.buffer_allocations, 1u);
  EXPECT_EQ(m.counters().bytes_in_use - c0.bytes_in_use, 1u << 20);
  std::vector<float> host(256, 3.f), out(256);
  m.upload(b, 1024, host.data(), 1024);
  m.download(b, 1024, out.data(), 1024);
  m.synchronize();
  EXPECT_EQ(out, host);
  expect_error([&] { m.upload(b, (1 << 20) - 4, host.data(), 8); }, {"[upload]", "exceeds"});
  m.release(b);
  EXPECT_EQ(m.counters().bytes_in_use, c0.bytes_in_use);
  expect_error([&] { m.allocate(0); }, {"[allocate]", "size > 0"});
}

// A backend may lack kernels: the op then fails when the graph is built,
// naming the kernel, the device and what it has, and the kernels it has
// still run. The double is a CPU device that says it has no softmax.
namespace {
class NoSoftmaxDevice final : public CpuDouble {
 public:
  NoSoftmaxDevice() : CpuDouble("partial", "CPU without softmax") {}
  bool supports(sy::Kernel k) const override { return k != sy::Kernel::softmax; }
};
}  // namespace

TEST(Device, AnOpTheDeviceLacksFailsWhenTheGraphIsBuilt) {
  static bool registered = false;
  if (!registered)
    sy::register_backend({"partial", true, "", {std::make_shared<NoSoftmaxDevice>()}});
  registered = true;
  sy::Device& d = sy::device("partial:0");
  Tensor x = sy::from_vector(std::vector<float>{1, -2, 3, -4}, {2, 2}, d);
  EXPECT_EQ(sy::relu(x).to_vector<float>(), (std::vector<float>{1, 0, 3, 0}))
      << "what it has still runs";
  expect_error([&] { (void)sy::softmax(x); },
               {"[softmax]", "partial:0", "it implements:", "unary"});
  expect_error([&] { (void)x.softmax(-1); }, {"[softmax]", "does not"});
}

// Cross-device copies respect both devices' queues. Two doubles over CPU
// devices: "queued" runs nothing until synchronize(), as a GPU's queue, and
// shares its memory with the host (zero-copy); "staged" has no host pointer,
// as a GPU whose memory the host cannot map, so a copy from it into "queued"
// downloads straight into the destination's pooled buffer.
namespace {
class QueuedOrStagedDevice final : public CpuDouble {
 public:
  QueuedOrStagedDevice(const std::string& name, bool queued)
      : CpuDouble(name, name + " CPU double"), queued_(queued) {}
  ~QueuedOrStagedDevice() override { synchronize_impl(); }  // queued releases too
  void* host_pointer(sy::Buffer b) override { return queued_ ? cpu_.host_pointer(b) : nullptr; }

 private:
  void later(std::function<void()> f) {
    if (queued_)
      queue_.push_back(std::move(f));
    else
      f();
  }
  void release_impl(sy::Buffer b) override {
    later([this, b] { cpu_.release(b); });
  }
  void upload_impl(sy::Buffer d, size_t o, const void* s, size_t n) override {
    auto data = std::make_shared<std::vector<char>>(static_cast<const char*>(s),
                                                    static_cast<const char*>(s) + n);
    later([this, d, o, data] { cpu_.upload(d, o, data->data(), data->size()); });
  }
  void download_impl(sy::Buffer s, size_t o, void* d, size_t n) override {
    later([this, s, o, d, n] { cpu_.download(s, o, d, n); });
  }
  void copy_impl(sy::Buffer s, size_t so, sy::Buffer d, size_t dof, size_t n) override {
    later([this, s, so, d, dof, n] { cpu_.copy(s, so, d, dof, n); });
  }
  void execute_impl(const sy::Program& p, std::span<const sy::Binding> b) override {
    later(
        [this, p, bind = std::vector<sy::Binding>(b.begin(), b.end())] { cpu_.execute(p, bind); });
  }
  void synchronize_impl() override {
    ++syncs;
    for (auto& f : queue_) f();
    queue_.clear();
  }

 public:
  int syncs = 0;  // waits for the queue (a submission and a fence on a GPU)

 private:
  bool queued_;
  std::vector<std::function<void()>> queue_;
};

// The doubles' contexts are made with SWITCHYARD_POISON off: the poisoning
// synchronizes the device on every buffer handed out, which would hide the race.
std::map<std::string, QueuedOrStagedDevice*> doubles;
sy::Device& double_device(const std::string& name, bool queued) {
  static std::map<std::string, sy::Device*> made;
  if (!made.count(name)) {
    const char* p = std::getenv("SWITCHYARD_POISON");
    const std::string saved = p ? p : "";
    unset_env("SWITCHYARD_POISON");
    auto dev = std::make_shared<QueuedOrStagedDevice>(name, queued);
    doubles[name] = dev.get();
    sy::register_backend({name, true, "", {dev}});
    made[name] = &sy::device(name + ":0");  // its context is made here, unpoisoned
    if (p) set_env("SWITCHYARD_POISON", saved.c_str());
  }
  return *made[name];
}
}  // namespace

TEST(Device, ACopyIntoZeroCopyMemoryWaitsForTheQueuedUsersOfThatBuffer) {
  sy::Device& q = double_device("queued", true);
  sy::Device& s = double_device("staged", false);
  const std::vector<float> ones(1024, 1.f), sevens(1024, 7.f);
  Tensor src = sy::from_vector(sevens, {1024}, s);
  Tensor doubled;
  void* reused = nullptr;
  {
    Tensor x = sy::from_vector(ones, {1024}, q);  // an upload queued on q
    doubled = sy::mul(x, 2.f);
    sy::eval({doubled});  // queued on q too: reads x's buffer, later
    reused = sy::detail::node_of(x)->storage->buffer.handle;
  }  // x's buffer goes back to q's pool while queued work still uses it
  Tensor y = src.to(q);
  ASSERT_EQ(sy::detail::node_of(y)->storage->buffer.handle, reused)
      << "the copy is expected to land in x's pooled buffer";
  EXPECT_EQ(y.to_vector<float>(), sevens) << "the queued upload of x overwrote the copy";
  EXPECT_EQ(doubled.to_vector<float>(), std::vector<float>(1024, 2.f));
}

// Tensors copied together between devices the host cannot map (GPU to GPU
// through the host) or into mapped memory cost one wait on the source, not
// one per tensor (DataParallel moves every parameter each step).
TEST(Device, TensorsCopiedTogetherWaitOnceForTheirSource) {
  sy::Device& s = double_device("staged", false);
  sy::Device& s2 = double_device("staged2", false);
  sy::Device& q = double_device("queued", true);
  std::vector<Tensor> ts;
  std::vector<std::vector<float>> want;
  for (int i = 0; i < 6; ++i) {
    want.push_back(std::vector<float>(size_t(100 + 37 * i), float(i) + 0.5f));
    ts.push_back(sy::add(sy::from_vector(want.back(), {int64_t(want.back().size())}, s), 1.f));
    for (float& v : want.back()) v += 1.f;
  }
  ts.push_back(sy::from_vector(std::vector<float>{}, {0}, s));  // empty: nothing to copy
  want.push_back({});
  for (sy::Device* to : {&s2, &q}) {
    SCOPED_TRACE(to->str());
    sy::synchronize(s);
    const int before = doubles["staged"]->syncs;
    std::vector<Tensor> out = sy::detail::to_device(ts, *to);
    EXPECT_EQ(doubles["staged"]->syncs - before, 1) << "expected one wait for all 7 copies";
    ASSERT_EQ(out.size(), ts.size());
    for (size_t i = 0; i < out.size(); ++i) {
      EXPECT_EQ(&out[i].device(), to);
      EXPECT_EQ(out[i].to_vector<float>(), want[i]) << "tensor " << i;
    }
  }
  // Tensors of different devices are refused, naming both.
  Tensor other = sy::from_vector(std::vector<float>{1.f}, {1}, q);
  try {
    sy::detail::to_device({ts[0], other}, s2);
    ADD_FAILURE() << "expected an error";
  } catch (const sy::Error& e) {
    EXPECT_NE(std::string(e.what()).find("share a device"), std::string::npos) << e.what();
  }
}

// The GPU backends' shared bookkeeping for asynchronously used memory.
TEST(SerialRing, RegionsAreReusedOnlyAfterTheirSubmissionCompletes) {
  switchyard::SerialRing ring(100);
  auto [a, wa] = ring.probe(40);
  EXPECT_EQ(a, 0u);
  EXPECT_EQ(wa, 0u);
  ring.take(a, 40, 1);
  auto [b, wb] = ring.probe(40);
  EXPECT_EQ(b, 40u);
  EXPECT_EQ(wb, 0u);
  ring.take(b, 40, 2);
  // 40 more do not fit before the end: they wrap to 0, over submission 1's region.
  auto [c, wc] = ring.probe(40);
  EXPECT_EQ(c, 0u);
  EXPECT_EQ(wc, 1u);
  // A region over both needs the newer serial.
  ring.retire_through(0);
  EXPECT_EQ(ring.regions(), 2u);
  auto [d, wd] = ring.probe(100);
  EXPECT_EQ(d, 0u);
  EXPECT_EQ(wd, 2u);
  ring.retire_through(1);
  EXPECT_EQ(ring.regions(), 1u);
  EXPECT_EQ(ring.probe(40).wait, 0u);
  EXPECT_EQ(ring.probe(100).wait, 2u);
  ring.retire_through(2);
  EXPECT_EQ(ring.probe(100).wait, 0u);
}

TEST(SerialRing, DeferredCopiesRunWhenTheirSubmissionIsDone) {
  switchyard::DeferredCopies q;
  const int src[3] = {7, 8, 9};
  int dst[3] = {0, 0, 0};
  q.push(1, &src[0], &dst[0], sizeof(int));
  q.push(2, &src[1], &dst[1], sizeof(int));
  q.push(3, &src[2], &dst[2], sizeof(int));
  q.run_through(2);
  EXPECT_EQ(dst[0], 7);
  EXPECT_EQ(dst[1], 8);
  EXPECT_EQ(dst[2], 0);
  q.clear();  // dropped, never copied
  q.run_through(3);
  EXPECT_EQ(dst[2], 0);
  EXPECT_TRUE(q.empty());
}
