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

}  // namespace accel::cli
