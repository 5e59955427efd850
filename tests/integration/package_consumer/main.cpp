// Runs one kmeans_assign on the CPU device through the installed headers and library.
#include <accel/registry.hpp>
#include <cstdio>
#include <vector>

int main() {
  const auto reg = accel::Registry::discover_all();
  accel::Device* cpu = reg.select("cpu", accel::KernelId::KMeansAssign).at(0);
  std::vector<float> x = {0, 0, 10, 10}, c = {0, 0, 10, 10};
  auto bx = cpu->allocate(16), bc = cpu->allocate(16), bl = cpu->allocate(8), bs = cpu->allocate(32),
       bn = cpu->allocate(16), bi = cpu->allocate(8);
  bx->write(x.data(), 16);
  bc->write(c.data(), 16);
  cpu->launch(accel::KMeansAssignArgs{bx.get(), bc.get(), bl.get(), bs.get(), bn.get(), bi.get(), 2, 2, 2}).wait();
  int labels[2];
  bl->read(labels, 8);
  std::printf("labels %d %d\n", labels[0], labels[1]);
  return labels[0] == 0 && labels[1] == 1 ? 0 : 1;
}
