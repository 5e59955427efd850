#include <boost/program_options.hpp>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>

#include "accel/registry.hpp"
#include "commands.hpp"

namespace po = boost::program_options;

namespace accel::cli {

int devices_main(const std::vector<std::string>& args) {
  po::options_description opts("accel devices [--json]");
  opts.add_options()("help,h", "this help")("json", "print JSON instead of a table");
  po::variables_map vm;
  if (!parse_or_help(args, opts, vm)) return 0;
  const Registry reg = Registry::discover_all();
  if (vm.count("json")) {
    nlohmann::json j;
    j["devices"] = nlohmann::json::array();
    for (const auto& d : reg.devices()) {
      const auto& i = d->info();
      nlohmann::json kernels = nlohmann::json::array();
      for (auto k : i.kernels) kernels.push_back(to_string(k));
      j["devices"].push_back({{"name", i.name}, {"family", i.family}, {"kind", i.type},
                              {"on_host_cores", i.on_host_cores}, {"description", i.description},
                              {"memory_bytes", i.memory_bytes}, {"compute_units", i.compute_units},
                              {"kernels", kernels}, {"limits", i.limits}});
    }
    j["backends"] = nlohmann::json::array();
    for (const auto& r : reg.reports())
      j["backends"].push_back({{"name", r.backend}, {"devices", r.devices}, {"why_none", r.why_none}});
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::cout << std::left << std::setw(12) << "DEVICE" << std::setw(12) << "KIND" << std::setw(12) << "MEMORY"
            << std::setw(7) << "UNITS" << "KERNELS / DESCRIPTION\n";
  for (const auto& d : reg.devices()) {
    const auto& i = d->info();
    std::string kernels;
    for (auto k : i.kernels) {  // appended in two steps: GCC 12 warned (-Wrestrict) on "" + string
      if (!kernels.empty()) kernels += ',';
      kernels += to_string(k);
    }
    const std::string mem = i.memory_bytes ? std::to_string(i.memory_bytes >> 20) + " MiB" : "host";
    std::cout << std::setw(12) << i.name << std::setw(12) << i.type << std::setw(12) << mem
              << std::setw(7) << i.compute_units << kernels << "\n"
              << std::string(43, ' ') << i.description << (i.limits.empty() ? "" : "; " + i.limits) << "\n";
  }
  for (const auto& r : reg.reports())
    if (r.devices == 0) std::cout << "backend " << r.backend << ": no devices (" << r.why_none << ")\n";
  return 0;
}

}  // namespace accel::cli
