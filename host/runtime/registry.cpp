#include "accel/registry.hpp"

#include <algorithm>
#include <mutex>

#include "accel/error.hpp"

namespace accel {
namespace {

struct Registered {
  int order;
  std::string name, family;
  bool numbered;
  BackendFactory factory;
};

// Constructed on first use: registrations run during static initialisation,
// in no defined order across files.
std::vector<Registered>& registered() {
  static std::vector<Registered> all;
  return all;
}

}  // namespace

bool register_backend(int order, const char* name, const char* family, bool numbered, BackendFactory factory) {
  registered().push_back({order, name, family, numbered, factory});
  return true;
}

std::string device_option_help(const std::string& what) {
  auto list = registered();
  std::sort(list.begin(), list.end(), [](const auto& a, const auto& b) { return a.order < b.order; });
  std::string families;
  for (const auto& r : list) families += " | " + r.family + (r.numbered ? "[:N]" : "");
  return what + ": auto (the fastest kind present) | all (every device with cores of its own)" + families +
         " | a device's name (accel devices), or a comma list";
}

Registry Registry::discover_all() {
  // One discovery at a time in a process: vendor runtimes are not all safe
  // to initialise from two threads at once (PoCL 3.1 can crash in
  // clGetDeviceInfo when the Python module's registry and a sparse
  // allreduce group's engine discover together).
  static std::mutex discovering;
  std::lock_guard lock(discovering);
  auto list = registered();
  std::stable_sort(list.begin(), list.end(), [](const auto& a, const auto& b) { return a.order < b.order; });
  std::vector<std::unique_ptr<Backend>> backends;
  for (const auto& r : list) backends.push_back(r.factory());
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
      // Every device with cores of its own (DeviceInfo::on_host_cores).
      for (auto& d : devices_)
        if (usable(*d) && !d->info().on_host_cores) add(d.get());
    } else if (part == "auto") {
      // The devices of the highest priority present, never ones that share
      // the host's cores.
      int best = -1;
      for (auto& d : devices_)
        if (usable(*d) && !d->info().on_host_cores) best = std::max(best, d->info().auto_priority);
      for (auto& d : devices_)
        if (usable(*d) && !d->info().on_host_cores && d->info().auto_priority == best) add(d.get());
    } else {
      for (auto& d : devices_) {
        const auto& info = d->info();
        if ((info.name == part || info.family == part) && usable(*d)) add(d.get());
      }
    }
  }
  if (out.empty()) {
    std::string known, why;
    for (auto& d : devices_) known += (known.empty() ? "" : ", ") + d->info().name;
    // A backend the spec names that found nothing says why (no platform,
    // no driver): the likeliest answer to the user's question.
    for (const auto& r : reports_)
      if (r.devices == 0 && !r.why_none.empty() && (spec == r.backend || spec.rfind(r.backend + ":", 0) == 0 ||
                                                    spec.find(r.backend) != std::string::npos))
        why += "; " + r.why_none;
    throw InputError("--device " + spec + ": no such device runs " + to_string(kernel) + " here (found: " + known +
                     why + "; try `accel devices`)");
  }
  return out;
}

}  // namespace accel
