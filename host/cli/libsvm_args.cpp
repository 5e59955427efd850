#include "libsvm_args.hpp"

#include <cstdio>

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

void print_regression_quality(const std::vector<double>& pred, const std::vector<double>& truth,
                              const char* prefix, const char* suffix) {
  const double n = double(pred.size());
  double err = 0, sv = 0, sy = 0, svv = 0, syy = 0, svy = 0;
  for (std::size_t i = 0; i < pred.size(); ++i) {
    const double v = pred[i], y = truth[i];
    err += (v - y) * (v - y);
    sv += v;
    sy += y;
    svv += v * v;
    syy += y * y;
    svy += v * y;
  }
  std::printf("%sMean squared error = %g%s\n", prefix, err / n, suffix);
  std::printf("%sSquared correlation coefficient = %g%s\n", prefix,
              ((n * svy - sv * sy) * (n * svy - sv * sy)) / ((n * svv - sv * sv) * (n * syy - sy * sy)), suffix);
}

}  // namespace accel::cli
