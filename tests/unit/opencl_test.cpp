// The opencl backend as the registry sees it: discovered with the facts it
// states about itself, selectable by name and family, and strict about the
// buffers a launch gets (another device's, or too short, is a DeviceError
// naming the kernel and the argument). The kernels' results are checked
// by the conformance suites, which run every device.
#include <gtest/gtest.h>

#include <algorithm>

#include "accel/error.hpp"
#include "accel/registry.hpp"

namespace accel {
namespace {

Device* first_opencl(const Registry& reg) {
  for (const auto& d : reg.devices())
    if (d->info().family == "opencl") return d.get();
  return nullptr;
}

TEST(OpenClBackend, RegistersItselfAndSaysWhyWhenItFindsNothing) {
  const Registry reg = Registry::discover_all();
  const auto& reps = reg.reports();
  const auto it = std::find_if(reps.begin(), reps.end(), [](const auto& r) { return r.backend == "opencl"; });
  ASSERT_NE(it, reps.end()) << "the opencl backend is built but did not register";
  if (it->devices == 0) EXPECT_FALSE(it->why_none.empty());
}

TEST(OpenClBackend, DevicesStateTheirFacts) {
  const Registry reg = Registry::discover_all();
  Device* d = first_opencl(reg);
  if (d == nullptr) GTEST_SKIP() << "no OpenCL device here (install pocl-opencl-icd for PoCL's CPU device)";
  const auto& i = d->info();
  EXPECT_EQ(i.name.rfind("opencl:", 0), 0u) << i.name;
  EXPECT_TRUE(i.type == "cpu" || i.type == "gpu" || i.type == "accelerator") << i.type;
  EXPECT_EQ(i.on_host_cores, i.type == "cpu");
  EXPECT_FALSE(i.description.empty());
  // By name and by family; a CPU runtime only when named.
  EXPECT_EQ(reg.select(i.name, KernelId::KMeansAssign).front(), d);
  EXPECT_EQ(reg.select("opencl", KernelId::KMeansAssign).front(), d);
  if (i.on_host_cores)
    for (auto* a : reg.select("all", KernelId::KMeansAssign)) EXPECT_NE(a, d);
}

TEST(OpenClBackend, ForeignOrShortBuffersAreDeviceErrors) {
  const Registry reg = Registry::discover_all();
  Device* d = first_opencl(reg);
  if (d == nullptr) GTEST_SKIP() << "no OpenCL device here";
  Device* cpu = reg.select("cpu", KernelId::KMeansAssign).front();
  const std::int64_t n = 8, dd = 2, k = 2;
  auto x = d->allocate(n * dd * 4), c = d->allocate(k * dd * 4), l = d->allocate(n * 4), s = d->allocate(k * dd * 8),
       cnt = d->allocate(k * 8), in = d->allocate(8);
  auto foreign = cpu->allocate(n * dd * 4), short_labels = d->allocate(n * 4 - 4);
  auto expect_error = [&](const KMeansAssignArgs& a, const std::string& needle) {
    try {
      d->launch(a).wait();
      FAIL() << "no error for " << needle;
    } catch (const DeviceError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("kmeans_assign"), std::string::npos) << e.what();
    }
  };
  expect_error({foreign.get(), c.get(), l.get(), s.get(), cnt.get(), in.get(), n, dd, k}, "buffer 'x'");
  expect_error({x.get(), c.get(), short_labels.get(), s.get(), cnt.get(), in.get(), n, dd, k}, "buffer 'labels'");
  // And a good launch after them runs.
  const std::vector<float> xs = {0, 0, 0, 1, 1, 0, 1, 1, 9, 9, 9, 8, 8, 9, 8, 8}, cs = {0, 0, 9, 9};
  x->write(xs.data(), xs.size() * 4);
  c->write(cs.data(), cs.size() * 4);
  d->launch(KMeansAssignArgs{x.get(), c.get(), l.get(), s.get(), cnt.get(), in.get(), n, dd, k}).wait();
  std::vector<std::int32_t> labels(n);
  l->read(labels.data(), n * 4);
  EXPECT_EQ(labels, (std::vector<std::int32_t>{0, 0, 0, 0, 1, 1, 1, 1}));
}

}  // namespace
}  // namespace accel

namespace accel {
namespace {

// A buffer beyond what the device allocates at once is refused up front,
// naming the device and both sizes (the runtime might report it only at
// first use).
TEST(OpenClBackend, BuffersBeyondTheDeviceAreRefusedByName) {
  const Registry reg = Registry::discover_all();
  Device* d = first_opencl(reg);
  if (d == nullptr) GTEST_SKIP() << "no OpenCL device here";
  const std::size_t huge = static_cast<std::size_t>(d->info().memory_bytes) + (std::size_t{1} << 30);
  try {
    d->allocate(huge);
    FAIL() << "a buffer of " << huge << " bytes was made";
  } catch (const DeviceError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind(d->info().name + ": not enough device memory", 0), 0u) << what;
    EXPECT_NE(what.find("MiB"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace accel
