#pragma once

#include <string>
#include <vector>

namespace accel::cli {

// Each subcommand takes the arguments after its name and returns the exit code.
int devices_main(const std::vector<std::string>& args);
int kmeans_main(const std::vector<std::string>& args);
int calibrate_main(const std::vector<std::string>& args);
int bench_kernels_main(const std::vector<std::string>& args);
int topk_main(const std::vector<std::string>& args);
int coordinator_main(const std::vector<std::string>& args);
int worker_main(const std::vector<std::string>& args);
int sparse_allreduce_main(const std::vector<std::string>& args);
int svm_train_main(const std::vector<std::string>& args);
int svm_predict_main(const std::vector<std::string>& args);

}  // namespace accel::cli
