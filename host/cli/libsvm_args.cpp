#include "libsvm_args.hpp"

namespace po = boost::program_options;

namespace accel::cli {

po::variables_map parse_libsvm_style(const std::vector<std::string>& args, const std::string& with_value,
                                     const po::options_description& opts,
                                     const po::positional_options_description& positional) {
  std::vector<std::string> joined;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.size() == 2 && a[0] == '-' && with_value.find(a[1]) != std::string::npos && i + 1 < args.size()) {
      joined.push_back(a + args[i + 1]);
      ++i;
    } else {
      joined.push_back(a);
    }
  }
  namespace cls = po::command_line_style;
  po::variables_map vm;
  po::store(po::command_line_parser(joined)
                .options(opts)
                .positional(positional)
                .style(cls::allow_short | cls::short_allow_adjacent | cls::allow_dash_for_short | cls::allow_long |
                       cls::long_allow_adjacent | cls::long_allow_next)
                .run(),
            vm);
  return vm;
}

}  // namespace accel::cli
