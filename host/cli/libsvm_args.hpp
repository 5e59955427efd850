// LIBSVM-style command lines ("svm-train -c 10 -r -1 data model") through
// Boost.Program_options, shared by svm-train and svm-predict.
#pragma once

#include <boost/program_options.hpp>
#include <string>
#include <vector>

namespace accel::cli {

// A value that starts with '-' ("-r -1") must not be taken for an option,
// so every short option listed in `with_value` is joined with its value
// ("-r-1") before parsing; then single-dash short options, long options and
// the positional files are parsed into the returned map (not yet notified).
boost::program_options::variables_map parse_libsvm_style(
    const std::vector<std::string>& args, const std::string& with_value,
    const boost::program_options::options_description& opts,
    const boost::program_options::positional_options_description& positional);

// LIBSVM's two regression lines ("<prefix>Mean squared error = %g<suffix>",
// "<prefix>Squared correlation coefficient = %g<suffix>"): svm-predict
// prints them with suffix " (regression)", svm-train -v with prefix
// "Cross Validation ".
void print_regression_quality(const std::vector<double>& pred, const std::vector<double>& truth,
                              const char* prefix, const char* suffix);

}  // namespace accel::cli
