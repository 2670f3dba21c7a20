// SPDX-License-Identifier: MIT
// What the Vulkan backend tells debugging tools, and how it lets go of a
// lost device (white-box): every object named through VK_EXT_debug_utils
// and every launch inside a label naming its kernel, so validation
// messages, RenderDoc and Nsight point at a launch; a missing barrier
// caught by synchronization validation with the launch named; a lost
// device's message carrying the driver's account of the loss
// (VK_EXT_device_fault, which lavapipe lacks: a fake driver function stands
// in for it); and a hung device's teardown, bounded.
//
// The device tests run a child process (a fresh device) whose Vulkan calls
// go through shims installed in the backend's function table: they record
// what the backend asks for, or act as a broken GPU would.
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

#include "helpers.h"
#include "switchyard/error.h"
#include "vk_context.h"
#include "vk_device.h"
#include "vk_loader.h"

namespace vi = switchyard::vk_impl;

namespace {

// Runs this test again in a child process with `env` set, its output in a
// file; returns the exit status and the output.
std::pair<int, std::string> run_child(const std::string& test, const std::string& env) {
  const std::string out = ::testing::TempDir() + "sy_vk_debug_" + std::to_string(getpid()) + "_" +
                          test.substr(test.find('.') + 1) + ".txt";
  const std::string cmd = "SY_TEST_CHILD=1 " + env + " " + ::testing::internal::GetArgvs()[0] +
                          " --gtest_filter=" + test + " > " + out + " 2>&1";
  const int rc = std::system(cmd.c_str());
  std::ifstream f(out);
  std::stringstream ss;
  ss << f.rdbuf();
  std::remove(out.c_str());
  return {rc, ss.str()};
}

// A short training step and a cross-entropy over more rows than one
// workgroup takes (planned as two launches) on vulkan:0.
void some_work(sy::Device& d) {
  sy::manual_seed(1);
  auto model = std::make_shared<sy::nn::Sequential>();
  model->add(std::make_shared<sy::nn::Linear>(12, 16))
      .add(std::make_shared<sy::nn::ReLU>())
      .add(std::make_shared<sy::nn::Linear>(16, 3));
  model->to(d);
  sy::optim::SGD opt(model->parameters(), 0.1f);
  auto x = sy::from_vector(random_vec(8 * 12, 2), {8, 12}, d);
  auto y = sy::from_vector(std::vector<int32_t>{0, 1, 2, 0, 1, 2, 0, 1}, {8}, d);
  for (int s = 0; s < 2; ++s) {
    opt.zero_grad();
    auto loss = sy::cross_entropy((*model)(x), y);
    loss.backward();
    opt.step();
    (void)loss.item();
  }
  std::vector<int32_t> labels(20000);
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = int32_t(i % 10);
  auto logits = sy::from_vector(random_vec(20000 * 10, 3), {20000, 10}, d);
  (void)sy::cross_entropy(logits, sy::from_vector(labels, {20000}, d)).item();
}

// ---- the shims ----------------------------------------------------------------------
struct Seen {
  std::mutex mu;  // pipelines are named on the compiling threads
  std::multimap<VkObjectType, std::string> names;
  std::map<VkCommandBuffer, std::vector<std::string>> open;  // each command buffer's labels
  std::vector<std::string> dispatches;                       // the label each dispatch was in
  int unlabelled = 0, unbalanced = 0;
};
Seen seen;
PFN_vkSetDebugUtilsObjectNameEXT real_name = nullptr;
PFN_vkCmdBeginDebugUtilsLabelEXT real_begin = nullptr;
PFN_vkCmdEndDebugUtilsLabelEXT real_end = nullptr;
PFN_vkCmdDispatch real_dispatch = nullptr;

VKAPI_ATTR VkResult VKAPI_CALL name_shim(VkDevice dev, const VkDebugUtilsObjectNameInfoEXT* n) {
  {
    std::lock_guard lock(seen.mu);
    seen.names.emplace(n->objectType, n->pObjectName ? n->pObjectName : "");
  }
  return real_name(dev, n);
}
VKAPI_ATTR void VKAPI_CALL begin_shim(VkCommandBuffer cb, const VkDebugUtilsLabelEXT* l) {
  {
    std::lock_guard lock(seen.mu);
    seen.open[cb].push_back(l->pLabelName);
  }
  real_begin(cb, l);
}
VKAPI_ATTR void VKAPI_CALL end_shim(VkCommandBuffer cb) {
  {
    std::lock_guard lock(seen.mu);
    auto& o = seen.open[cb];
    if (o.empty())
      ++seen.unbalanced;
    else
      o.pop_back();
  }
  real_end(cb);
}
VKAPI_ATTR void VKAPI_CALL dispatch_shim(VkCommandBuffer cb, uint32_t x, uint32_t y, uint32_t z) {
  {
    std::lock_guard lock(seen.mu);
    auto& o = seen.open[cb];
    if (o.empty())
      ++seen.unlabelled;
    else
      seen.dispatches.push_back(o.back());
  }
  real_dispatch(cb, x, y, z);
}
VKAPI_ATTR void VKAPI_CALL no_barrier(VkCommandBuffer, VkPipelineStageFlags, VkPipelineStageFlags,
                                      VkDependencyFlags, uint32_t, const VkMemoryBarrier*, uint32_t,
                                      const VkBufferMemoryBarrier*, uint32_t,
                                      const VkImageMemoryBarrier*) {}

bool any_name(VkObjectType t, const std::string& part) {
  auto [b, e] = seen.names.equal_range(t);
  for (auto it = b; it != e; ++it)
    if (it->second.find(part) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST(VulkanDebugUtils, ObjectsAreNamedAndEveryLaunchIsLabelled) {
  SKIP_UNLESS_AVAILABLE("vulkan:0");
  if (!std::getenv("SY_TEST_CHILD")) {
    auto [rc, out] = run_child("VulkanDebugUtils.ObjectsAreNamedAndEveryLaunchIsLabelled", "");
    EXPECT_EQ(rc, 0) << out;
    return;
  }
  sy::BackendDevice& d = sy::backend_device("vulkan:0");
  ASSERT_EQ(d.counters().memory_allocations, 0u) << "the device was set up before the shims";
  ASSERT_TRUE(vi::vk.vkSetDebugUtilsObjectNameEXT && vi::vk.vkCmdBeginDebugUtilsLabelEXT)
      << "the instance has no VK_EXT_debug_utils (lavapipe's loader lists it)";
  real_name = std::exchange(vi::vk.vkSetDebugUtilsObjectNameEXT, &name_shim);
  real_begin = std::exchange(vi::vk.vkCmdBeginDebugUtilsLabelEXT, &begin_shim);
  real_end = std::exchange(vi::vk.vkCmdEndDebugUtilsLabelEXT, &end_shim);
  real_dispatch = std::exchange(vi::vk.vkCmdDispatch, &dispatch_shim);
  some_work(d);
  sy::synchronize(d);

  std::lock_guard lock(seen.mu);
  for (auto& [t, n] : seen.names)
    EXPECT_EQ(n.rfind("switchyard vulkan:0 ", 0), 0u) << "a name without its device: " << n;
  const std::pair<VkObjectType, const char*> expected[] = {
      {VK_OBJECT_TYPE_DEVICE, "device"},
      {VK_OBJECT_TYPE_QUEUE, "queue (family "},
      {VK_OBJECT_TYPE_COMMAND_POOL, "command pool"},
      {VK_OBJECT_TYPE_PIPELINE, "pipeline gemm"},
      {VK_OBJECT_TYPE_PIPELINE, "pipeline cross_entropy"},
      {VK_OBJECT_TYPE_BUFFER, "tensor block 0"},
      {VK_OBJECT_TYPE_DEVICE_MEMORY, "tensor block 0"},
      {VK_OBJECT_TYPE_BUFFER, "launch table"},
      {VK_OBJECT_TYPE_BUFFER, "status word"},
      {VK_OBJECT_TYPE_DESCRIPTOR_POOL, "descriptor pool 0"},
      {VK_OBJECT_TYPE_COMMAND_BUFFER, "Program recording"},
      {VK_OBJECT_TYPE_FENCE, "submission fence"},
      {VK_OBJECT_TYPE_DESCRIPTOR_SET, "gemm [instruction "}};
  for (auto& [type, part] : expected)
    EXPECT_TRUE(any_name(type, part))
        << "no object of type " << type << " named '..." << part << "...'";
  // Every dispatch in a label that starts with a kernel's name; all labels
  // closed; the split cross-entropy's launches numbered.
  EXPECT_EQ(seen.unlabelled, 0);
  EXPECT_EQ(seen.unbalanced, 0);
  for (auto& [cb, o] : seen.open) EXPECT_TRUE(o.empty()) << o.size() << " labels left open";
  std::set<std::string> kernels;
  for (int k = 0; k < sy::kNumKernels; ++k) kernels.insert(sy::kernel_name(sy::Kernel(k)));
  ASSERT_FALSE(seen.dispatches.empty());
  for (const std::string& l : seen.dispatches)
    EXPECT_TRUE(kernels.count(l.substr(0, l.find(" [instruction "))) &&
                l.find(" [instruction ") != std::string::npos)
        << "a launch labelled '" << l << "'";
  auto labelled = [&](const std::string& part) {
    for (const std::string& l : seen.dispatches)
      if (l.find(part) != std::string::npos) return true;
    return false;
  };
  EXPECT_TRUE(labelled("gemm [instruction "));
  EXPECT_TRUE(labelled("cross_entropy [instruction 0] launch 1 of 2"));
  EXPECT_TRUE(labelled("cross_entropy [instruction 0] launch 2 of 2"));
}

// With the backend's barriers dropped (a shim that records nothing), the
// validation layer's synchronization checks report the hazard, and the
// message names the launch (its descriptor set's name) and its pipeline.
// This also shows the suite's premise: a missing barrier fails a test.
TEST(VulkanDebugUtils, AMissingBarrierIsReportedNamingTheLaunch) {
  SKIP_UNLESS_AVAILABLE("vulkan:0");
  if (!std::getenv("SY_TEST_CHILD")) {
    const char* v = std::getenv("SWITCHYARD_VK_VALIDATION");
    ASSERT_TRUE(v && std::string(v) == "1") << "needs the validation layer (the tests set it)";
    auto [rc, out] = run_child("VulkanDebugUtils.AMissingBarrierIsReportedNamingTheLaunch", "");
    EXPECT_NE(rc, 0) << "the child saw no validation message: " << out;
    EXPECT_NE(out.find("SYNC-HAZARD-READ-AFTER-WRITE"), std::string::npos) << out;
    EXPECT_NE(out.find("VkDescriptorSet"), std::string::npos) << out;
    EXPECT_NE(out.find("[switchyard vulkan:0 gemm [instruction "), std::string::npos) << out;
    EXPECT_NE(out.find("[switchyard vulkan:0 pipeline gemm"), std::string::npos) << out;
    return;
  }
  vi::vk.vkCmdPipelineBarrier = &no_barrier;
  sy::Device& d = sy::device("vulkan:0");
  auto a = sy::from_vector(random_vec(64 * 64, 1), {64, 64}, d);
  auto b = sy::matmul(sy::matmul(a, a), a);  // the second GEMM reads the first's output
  (void)b.sum().item();
}

// ---- VK_EXT_device_fault ----------------------------------------------------------
#ifdef VK_EXT_device_fault
namespace {
int fault_calls = 0;
VKAPI_ATTR VkResult VKAPI_CALL fake_fault_info(VkDevice, VkDeviceFaultCountsEXT* counts,
                                               VkDeviceFaultInfoEXT* info) {
  ++fault_calls;
  if (!info) {
    counts->addressInfoCount = 2;
    counts->vendorInfoCount = 1;
    counts->vendorBinarySize = 4096;
    return VK_SUCCESS;
  }
  EXPECT_EQ(counts->vendorBinarySize, 0u) << "the dump is not asked for";
  if (counts->addressInfoCount < 2 || counts->vendorInfoCount < 1) {
    ADD_FAILURE() << "the arrays are smaller than the counts given";
    return VK_INCOMPLETE;
  }
  std::snprintf(info->description, sizeof info->description, "page fault in compute shader");
  info->pAddressInfos[0] = {VK_DEVICE_FAULT_ADDRESS_TYPE_READ_INVALID_EXT, 0x7f0012340000ull, 4096};
  info->pAddressInfos[1] = {VK_DEVICE_FAULT_ADDRESS_TYPE_INSTRUCTION_POINTER_FAULT_EXT, 0xdead0, 1};
  std::snprintf(info->pVendorInfos[0].description, VK_MAX_DESCRIPTION_SIZE, "SQ_INTERRUPT");
  info->pVendorInfos[0].vendorFaultCode = 0x2a;
  info->pVendorInfos[0].vendorFaultData = 0x1234;
  counts->addressInfoCount = 2;
  counts->vendorInfoCount = 1;
  return VK_SUCCESS;
}
}  // namespace

TEST(VulkanDeviceFault, ALostDeviceSaysWhatTheDriverReported) {
  sy::BackendDevice& owner = sy::backend_of(sy::cpu());  // only its name is used
  sy::Counters counters{};
  vi::Context c(owner, counters, std::make_shared<vi::Instance>(), vi::Physical{},
                vi::MemoryPolicy{});
  fault_calls = 0;
  c.dev = reinterpret_cast<VkDevice>(uintptr_t(0x1));  // only the fake sees it
  c.fault_info = &fake_fault_info;
  int waits = 0;  // the first loss waits (bounded) for what was queued
  c.on_lost = [&] { ++waits; };
  std::string first;
  try {
    c.check(VK_ERROR_DEVICE_LOST, "synchronize", "vkWaitForFences");
  } catch (const sy::DeviceLost& e) {
    first = e.what();
  }
  c.dev = VK_NULL_HANDLE;
  for (const char* part :
       {"[synchronize] vkWaitForFences on cpu failed: VK_ERROR_DEVICE_LOST",
        "the driver says (VK_EXT_device_fault): page fault in compute shader",
        "addresses: invalid read at 0x7f0012340000 (within 4096 bytes), instruction pointer "
        "(fault) at 0xdead0",
        "vendor: SQ_INTERRUPT (code 0x2a, data 0x1234)",
        "a vendor crash dump of 4096 bytes was not saved"})
    EXPECT_NE(first.find(part), std::string::npos) << "expected '" << part << "' in: " << first;
  EXPECT_TRUE(c.lost);
  EXPECT_EQ(c.lost_what, first);
  EXPECT_EQ(fault_calls, 2);  // the counts, then the detail
  // A later failure does not ask again (the first loss is the one to explain).
  c.dev = reinterpret_cast<VkDevice>(uintptr_t(0x1));
  EXPECT_THROW(c.check(VK_ERROR_DEVICE_LOST, "execute", "vkQueueSubmit"), sy::DeviceLost);
  c.dev = VK_NULL_HANDLE;
  EXPECT_EQ(fault_calls, 2);
  EXPECT_EQ(waits, 1);
  EXPECT_EQ(c.lost_what, first);
}
#endif

// ---- a hung device's teardown -------------------------------------------------------
// A GPU that never finishes (the driver never reports the loss): its fences
// never signal, and vkDeviceWaitIdle would block forever. The shims make the
// device look so after some real work (submissions are taken and never run,
// fences time out): the next wait is taken for one past
// SWITCHYARD_VK_WAIT_LIMIT_MS and the device is lost; its teardown (at exit,
// or here through shutdown) must then neither wait for it unbounded nor
// destroy objects the GPU may still be using, and the instance, their
// parent, is left too (so the validation layer has nothing to report).
namespace {
int idle_waits = 0, devices_destroyed = 0, submits = 0;
VKAPI_ATTR VkResult VKAPI_CALL swallow_submit(VkQueue, uint32_t, const VkSubmitInfo*, VkFence) {
  ++submits;  // taken, never run: nothing real is in flight at exit
  return VK_SUCCESS;
}
VKAPI_ATTR VkResult VKAPI_CALL never_signalled(VkDevice, uint32_t, const VkFence*, VkBool32,
                                               uint64_t) {
  return VK_TIMEOUT;
}
VKAPI_ATTR VkResult VKAPI_CALL never_ready(VkDevice, VkFence) { return VK_NOT_READY; }
VKAPI_ATTR VkResult VKAPI_CALL device_idle_forever(VkDevice) {
  ++idle_waits;  // a real hung device would never return from this
  return VK_SUCCESS;
}
VKAPI_ATTR VkResult VKAPI_CALL queue_idle_forever(VkQueue) {
  ++idle_waits;
  return VK_SUCCESS;
}
VKAPI_ATTR void VKAPI_CALL destroy_device(VkDevice, const VkAllocationCallbacks*) {
  ++devices_destroyed;
}
}  // namespace

TEST(VulkanLostDevice, AHungDeviceIsLeftToTheDriverNotWaitedOnForever) {
  SKIP_UNLESS_AVAILABLE("vulkan:0");
  if (!std::getenv("SY_TEST_CHILD")) {
    auto [rc, out] =
        run_child("VulkanLostDevice.AHungDeviceIsLeftToTheDriverNotWaitedOnForever", "");
    EXPECT_EQ(rc, 0) << out;
    EXPECT_NE(out.find("vulkan:0 is hung: the work it was given has not finished"),
              std::string::npos)
        << out;
    EXPECT_EQ(out.find("[vulkan validation]"), std::string::npos) << out;
    return;
  }
  sy::BackendDevice& d = sy::backend_device("vulkan:0");
  some_work(d);
  sy::synchronize(d);
  vi::vk.vkQueueSubmit = &swallow_submit;
  vi::vk.vkWaitForFences = &never_signalled;
  vi::vk.vkGetFenceStatus = &never_ready;
  vi::vk.vkDeviceWaitIdle = &device_idle_forever;
  vi::vk.vkQueueWaitIdle = &queue_idle_forever;
  vi::vk.vkDestroyDevice = &destroy_device;
  std::string lost;
  try {
    (void)(sy::ones({4}, d) + 1.f).to_vector<float>();
  } catch (const sy::DeviceLost& e) {
    lost = e.what();
  }
  EXPECT_NE(lost.find("SWITCHYARD_VK_WAIT_LIMIT_MS"), std::string::npos) << lost;
  expect_error([&] { (void)sy::ones({4}, d).to_vector<float>(); },
               {"vulkan:0 lost", "It was lost here: [synchronize]"});
  dynamic_cast<vi::VulkanDevice&>(d).shutdown();  // what the exit handler does
  EXPECT_EQ(idle_waits, 0) << "a hung device's teardown waited for it without a bound";
  EXPECT_EQ(devices_destroyed, 0) << "a hung device's objects were destroyed while in use";
  EXPECT_GT(submits, 0);
  EXPECT_EQ(sy::ones({3}, sy::cpu()).to_vector<float>(), (std::vector<float>{1, 1, 1}));
}
