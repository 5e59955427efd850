#include "accel/registry.hpp"

#include <algorithm>

#include "accel/backends.hpp"
#include "accel/error.hpp"

namespace accel {

Registry Registry::discover_all() {
  std::vector<std::unique_ptr<Backend>> backends;
  backends.push_back(make_cpu_backend());
  backends.push_back(make_fpga_emu_backend());
#if ACCEL_HAVE_CUDA
  backends.push_back(make_cuda_backend());
#endif
#if ACCEL_HAVE_XRT
  backends.push_back(make_xrt_backend());
#endif
  Registry reg;
  for (auto& b : backends) {
    BackendReport rep{b->name(), 0, {}};
    try {
      for (auto& dev : b->discover()) {
        reg.devices_.push_back(std::move(dev));
        ++rep.devices;
      }
    } catch (const std::exception& e) {
      // A backend that throws anyway found nothing usable; say why.
      rep.why_none = e.what();
    }
    if (rep.devices == 0 && rep.why_none.empty()) rep.why_none = b->why_none();
    reg.reports_.push_back(std::move(rep));
  }
  return reg;
}

std::vector<Device*> Registry::select(const std::string& spec, KernelId kernel) const {
  std::vector<Device*> out;
  auto usable = [&](const Device& d) { return d.supports(kernel); };
  auto add = [&](Device* d) {
    if (std::find(out.begin(), out.end(), d) == out.end()) out.push_back(d);
  };
  std::size_t start = 0;
  while (start <= spec.size()) {  // a comma list is the union of its parts
    const std::size_t comma = spec.find(',', start);
    const std::string part = spec.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    start = comma == std::string::npos ? spec.size() + 1 : comma + 1;
    if (part == "all") {
      // Every device with hardware of its own. An emulator (fpga-emu) runs
      // on the host's cores, so beside the cpu device it only takes cores
      // from it (measured: k-means with cpu + fpga-emu on one core ran at
      // half the cpu's rate alone); it joins only when named.
      for (auto& d : devices_)
        if (usable(*d) && d->info().kind != DeviceKind::FpgaEmu) add(d.get());
    } else if (part == "auto") {
      // Hardware accelerators first, then the CPU; emulation only on request.
      const std::size_t before = out.size();
      for (DeviceKind kind : {DeviceKind::Cuda, DeviceKind::Fpga, DeviceKind::Cpu}) {
        for (auto& d : devices_)
          if (d->info().kind == kind && usable(*d)) add(d.get());
        if (out.size() != before) break;
      }
    } else {
      for (auto& d : devices_) {
        const auto& info = d->info();
        if ((info.name == part || to_string(info.kind) == part) && usable(*d)) add(d.get());
      }
    }
  }
  if (out.empty()) {
    std::string known;
    for (auto& d : devices_) known += (known.empty() ? "" : ", ") + d->info().name;
    throw InputError("--device " + spec + ": no such device runs " + to_string(kernel) +
                     " here (found: " + known + "; try `accel devices`)");
  }
  return out;
}

}  // namespace accel
