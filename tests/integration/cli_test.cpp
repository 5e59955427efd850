// The `accel` binary as users run it: exit codes, one-line errors naming the
// problem, no output file left behind on failure, JSON that parses.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <limits>
#include <set>
#include <sstream>

#include "accel/config.hpp"
#include "accel/io.hpp"

namespace fs = std::filesystem;

namespace {

struct Proc {
  int code;
  std::string out, err;
};

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("accel_cli_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  Proc run(const std::string& args) {
    const std::string out = (dir_ / "stdout").string(), err = (dir_ / "stderr").string();
    const int status = std::system((args + " >" + out + " 2>" + err).c_str());
    auto slurp = [](const std::string& p) {
      std::ifstream in(p);
      std::stringstream ss;
      ss << in.rdbuf();
      return ss.str();
    };
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out), slurp(err)};
  }
  Proc accel(const std::string& args) { return run(std::string(ACCEL_BIN) + " " + args); }
  std::string file(const std::string& name, const std::string& text) {
    const auto p = (dir_ / name).string();
    std::ofstream(p) << text;
    return p;
  }
  std::string path(const std::string& name) { return (dir_ / name).string(); }
  // A bad-input run: exit 2, one line on stderr containing `needle`, no outputs.
  // `env`: VAR=VALUE settings for the run.
  void expect_bad_input(const std::string& args, const std::string& needle, const std::string& env = "") {
    const Proc r = run((env.empty() ? "" : "env " + env + " ") + ACCEL_BIN + " " + args + " --output-centroids " +
                       path("c.npy") + " --output-labels " + path("l.npy"));
    EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(fs::exists(path("c.npy")));
    EXPECT_FALSE(fs::exists(path("l.npy")));
  }
  fs::path dir_;
};

TEST_F(Cli, DevicesJsonListsCpuAndEmuAndExplainsTheRest) {
  const Proc r = accel("devices --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  std::set<std::string> names;
  for (const auto& d : j["devices"]) names.insert(d["name"].get<std::string>());
  EXPECT_TRUE(names.count("cpu"));
  EXPECT_TRUE(names.count("fpga-emu"));
  for (const auto& b : j["backends"])
    if (b["devices"] == 0) EXPECT_FALSE(b["why_none"].get<std::string>().empty()) << b.dump();
}

TEST_F(Cli, KMeansJsonAndOutputs) {
  std::string csv;
  for (int i = 0; i < 200; ++i) csv += std::to_string(i % 2 * 10 + (i % 7) * 0.01) + "," + std::to_string(i % 3) + "\n";
  const auto in = file("x.csv", csv);
  const Proc r = accel("kmeans --input " + in + " --k 2 --seed 3 --json --output-centroids " + path("c.npy") +
                      " --output-labels " + path("l.npy") + " --log-json " + path("log.jsonl"));
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_GT(j["iterations"].get<int>(), 0);
  EXPECT_TRUE(j["seconds"].contains("compute"));
  EXPECT_TRUE(j["seconds"].contains("transfer"));
  const auto c = accel::read_npy(path("c.npy"));
  EXPECT_EQ(c.rows, 2);
  EXPECT_EQ(c.cols, 2);
  std::ifstream log(path("log.jsonl"));
  int lines = 0;
  for (std::string line; std::getline(log, line); ++lines) EXPECT_TRUE(nlohmann::json::parse(line).contains("inertia"));
  EXPECT_EQ(lines, j["iterations"].get<int>());
}

TEST_F(Cli, TolZeroRunsMaxIter) {
  const auto in = file("x.csv", "0,0\n1,1\n5,5\n6,6\n0,1\n");
  const Proc r = accel("kmeans --input " + in + " --k 2 --tol 0 --max-iter 7 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["iterations"], 7);
}

TEST_F(Cli, BadInputsExitTwoWithoutOutputs) {
  expect_bad_input("kmeans --input " + path("missing.csv") + " --k 2", "no such file");
  expect_bad_input("kmeans --input " + file("nan.csv", "1,2\nnan,3\n") + " --k 1", "row 2, column 1 is NaN");
  expect_bad_input("kmeans --input " + file("short.csv", "1,2\n3\n") + " --k 1", "short.csv:2");
  expect_bad_input("kmeans --input " + file("few.csv", "1,2\n3,4\n") + " --k 3", "--k 3 exceeds");
  expect_bad_input("kmeans --input " + file("ok.csv", "1,2\n3,4\n") + " --k 1 --device tpu", "tpu");
  expect_bad_input("kmeans --input " + file("ok2.csv", "1,2\n3,4\n") + " --k 1 --init bogus", "--init bogus");
  expect_bad_input("kmeans --input " + file("ok3.csv", "1,2\n3,4\n") + " --k 1 --max-iter 0", "--max-iter");
  expect_bad_input("kmeans --k 1", "input");
}

// OpenCL's bad cases are one line naming the device and why, and exit 2:
// no platform at all (an ICD directory with no vendor in it), and a kernel
// the device's compiler refuses (ACCEL_OPENCL_KERNELS points the backend at
// a broken copy of kernels_opencl/: the log's first lines are in the line).
// A device too small for a buffer is OpenClBackend.BuffersBeyondTheDevice.
TEST_F(Cli, OpenClFailuresAreOneLineAndExitTwo) {
  const std::string x = file("x.csv", "1,2\n3,4\n5,6\n7,8\n");
  if (accel("devices --json").out.find("\"name\": \"opencl\"") == std::string::npos)
    GTEST_SKIP() << "the OpenCL backend is not built here (ACCEL_WITH_OPENCL off, as in the sanitizer builds)";
  fs::create_directories(path("no_vendors"));
  expect_bad_input("kmeans --input " + x + " --k 2 --device opencl", "no OpenCL platform",
                   "OCL_ICD_VENDORS=" + path("no_vendors"));
  const Proc devices = accel("devices --json");
  if (devices.out.find("\"opencl:0\"") == std::string::npos)
    GTEST_SKIP() << "no OpenCL device here: the build-error case needs one (PoCL's CPU device in CI)";
  fs::create_directories(path("broken"));
  std::ofstream(path("broken/kmeans_assign.cl")) << "__kernel void kmeans_assign(__global float* x) { x[0] = y; }\n";
  // PoCL's compiler prints "1 error generated." itself: accel's own line is one.
  const Proc r = run("env ACCEL_OPENCL_KERNELS=" + path("broken") + " " + ACCEL_BIN + " kmeans --input " + x +
                     " --k 2 --device opencl:0 --output-centroids " + path("c.npy"));
  EXPECT_EQ(r.code, 2) << r.err;
  std::istringstream lines(r.err);
  int ours = 0;
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("accel", 0) == 0) {
      ++ours;
      EXPECT_NE(line.find("opencl:0: building kmeans_assign.cl failed: "), std::string::npos) << line;
      EXPECT_NE(line.find("'y'"), std::string::npos) << "the log's first lines: " << line;
    }
  EXPECT_EQ(ours, 1) << r.err;
  EXPECT_FALSE(fs::exists(path("c.npy")));
  expect_bad_input("kmeans --input " + x + " --k 2 --device opencl:0", "cannot read",
                   "ACCEL_OPENCL_KERNELS=" + path("nowhere"));
}

TEST_F(Cli, InitFileShapeIsChecked) {
  const std::vector<float> c = {1, 2, 3};
  accel::write_npy(path("init.npy"), c.data(), {1, 3});
  expect_bad_input("kmeans --input " + file("x.csv", "1,2\n3,4\n") + " --k 1 --init " + path("init.npy"),
                   "expected 1 x 2");
}

#if ACCEL_HAVE_UCX
// Outside a launcher a worker may leave --id out (the coordinator gives
// one), but an id it names must be a worker's.
TEST_F(Cli, WorkerIdIsAWorkers) {
  const Proc r = run("env -u OMPI_COMM_WORLD_RANK -u SLURM_PROCID -u PMI_RANK " + std::string(ACCEL_BIN) +
                     " worker --coordinator 127.0.0.1:1 --id 0");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--id must be 1 or more"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}
#endif

#if ACCEL_HAVE_UCX
// --resume refuses what it cannot continue, in one line, before listening.
TEST_F(Cli, CoordinatorResumeRefusesWhatItCannotContinue) {
  const std::string x = file("x.csv", "1,2\n3,4\n5,6\n");
  auto refused = [&](const std::string& args, const std::string& needle) {
    const Proc r = accel("coordinator --input " + x + " --k 1 --workers 1 --listen 127.0.0.1:0 " + args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("listening"), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  };
  refused("--resume " + path("none"), "no coordinator checkpoint there");
  fs::create_directories(path("junk"));
  file("junk/coordinator.checkpoint", "ACCCKPT3 and then no checkpoint at all");  // this format's magic
  refused("--resume " + path("junk"), "damaged checkpoint");
  refused("--resume " + path("junk") + " --checkpoint-dir " + path("other"), "different directories");
  refused("--checkpoint-dir " + path("c") + " --mtbf 0", "--mtbf");
}
#endif

#if ACCEL_HAVE_UCX
// The simulator's own options: one line naming the option, exit 2.
TEST_F(Cli, SimulateRefusesBadOptions) {
  auto refused = [&](const std::string& args, const std::string& needle) {
    const Proc r = accel("simulate " + args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  };
  refused("--seeds 5-2", "--seeds 5-2");
  refused("--seeds x", "--seeds x");
  refused("--min-workers 4 --max-workers 3", "--min-workers 4");
  refused("--gbits 0", "--gbits");
  refused("--latency-us -1", "--latency-us");
  refused("--scale 4,x", "--scale 4,x");
  refused("--dir /proc/no-such-folder", "--dir /proc/no-such-folder");
  refused("--workload allreduce", "--workload allreduce");
  refused("--workload svm --scale 4", "--scale");
  refused("--jobs 0", "--jobs 0");
  refused("--keep", "--keep");
  const Proc ok = accel("simulate --seeds 7 --verbose");
  EXPECT_EQ(ok.code, 0) << ok.out << ok.err;
  EXPECT_NE(ok.out.find("seed 7: ok"), std::string::npos) << ok.out;
  EXPECT_NE(ok.out.find("1 seeds, 0 failed"), std::string::npos) << ok.out;
  // Seeds on two threads: the same runs, printed in seed order.
  const Proc one = accel("simulate --seeds 5-8 --workload mixed --verbose");
  const Proc two = accel("simulate --seeds 5-8 --workload mixed --verbose --jobs 2");
  EXPECT_EQ(two.code, 0) << two.out << two.err;
  const auto totals = [](const std::string& out) { return out.substr(0, out.rfind(" in ")); };
  EXPECT_EQ(totals(one.out), totals(two.out));
}
#endif

TEST_F(Cli, UnknownCommand) {
  const Proc r = accel("frobnicate");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("frobnicate"), std::string::npos);
}

TEST_F(Cli, BitstreamDryRunPrintsTheVitisCommands) {
  const std::string script = std::string(ACCEL_SOURCE_DIR) + "/scripts/build_bitstreams.sh";
  Proc r = run(script + " --platform xilinx_u250_gen3x16_xdma_4_1_202210_1 --target hw --dry-run");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("v++ -c -t hw --platform xilinx_u250_gen3x16_xdma_4_1_202210_1 --config "
                       "kernels_hls/cfg/xilinx_u250_gen3x16_xdma.cfg -k kmeans_assign"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("v++ -l -t hw"), std::string::npos);
  EXPECT_NE(r.out.find("bitstreams/xilinx_u250_gen3x16_xdma_4_1_202210_1/hw/accel.xclbin"), std::string::npos);
  r = run(script + " --platform nosuch --target hw --dry-run");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("no connectivity config"), std::string::npos);
  r = run(script + " --platform xilinx_u250_gen3x16_xdma_4_1_202210_1 --target fast");
  EXPECT_EQ(r.code, 2);
  // Without v++ a real build stops with a clear message (skipped where Vitis is installed).
  if (std::system("command -v v++ >/dev/null 2>&1") != 0) {
    r = run("PATH=/usr/bin:/bin " + script + " --platform xilinx_u250_gen3x16_xdma_4_1_202210_1 --target hw");
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find("v++ not found"), std::string::npos) << r.err;
  }
}

}  // namespace

namespace {

TEST_F(Cli, TopKSyntheticJsonAndOutput) {
  const Proc r = accel("topk --synthetic laplace --n 100000 --ratio 0.01 --method exact --json --output " + path("s.npy"));
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["k"], 1000);
  EXPECT_EQ(j["selected"], 1000);
  EXPECT_GE(j["passes"].get<int>(), 1);
  EXPECT_TRUE(fs::exists(path("s.npy")));
  // Every method's selection against k: the exact ones select k (ties
  // aside, none in continuous data); the LDTE methods stop within
  // [k, 1.5 k] (TopKOptions::upper); the 1% sample's threshold is an
  // estimate (DGC), within a factor of two here.
  for (const char* m : {"ldte-bs", "ldte-hist", "nth_element", "sample"}) {
    const Proc q = accel(std::string("topk --synthetic gauss --n 5000 --ratio 0.1 --json --method ") + m);
    ASSERT_EQ(q.code, 0) << m << ": " << q.err;
    const auto t = nlohmann::json::parse(q.out);
    const auto k = t["k"].get<std::int64_t>(), selected = t["selected"].get<std::int64_t>();
    EXPECT_EQ(k, 500) << m;
    if (std::string(m) == "nth_element") EXPECT_EQ(selected, k) << m;
    else if (std::string(m) == "sample") EXPECT_TRUE(selected >= k / 2 && selected <= 2 * k) << m << ": " << selected;
    else EXPECT_TRUE(selected >= k && selected <= k + k / 2) << m << ": " << selected;
  }
}

// bench-kernels runs each kernel on every device and compares its outputs
// with the cpu's: in the quick shapes every device must agree with it.
TEST_F(Cli, BenchKernelsEveryDeviceAgreesWithTheCpu) {
  const Proc r = accel("bench-kernels --quick --repeats 1 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  std::map<std::string, int> devices;
  for (const auto& line : j["results"]) {
    const std::string what = line["kernel"].get<std::string>() + " on " + line["device"].get<std::string>();
    ++devices[line["kernel"].get<std::string>()];
    EXPECT_GT(line["rate"].get<double>(), 0) << what;
    const auto& c = line["against_cpu"];
    if (c.contains("labels_differ")) {
      EXPECT_LE(c["labels_differ"].get<std::int64_t>(), 2) << what;  // float near-ties only
    } else if (c.contains("max_abs_difference")) {
      EXPECT_LE(c["max_abs_difference"].get<double>(), 1e-5) << what;
    } else {
      EXPECT_EQ(c["bins_differ"].get<std::int64_t>(), 0) << what;
    }
  }
  for (const char* k : {"kmeans_assign", "csr_kernel_rows", "topk_histogram"})
    EXPECT_GE(devices[k], 2) << k << ": the cpu and fpga-emu at least";
  EXPECT_EQ(accel("bench-kernels --repeats 0").code, 2);
  EXPECT_EQ(accel("bench-kernels --quick --device nosuch").code, 2);
}

TEST_F(Cli, TopKInputNonFinite) {
  std::vector<float> v = {1, 2, 3, 4, 5, 6, 7, 8};
  v[5] = std::numeric_limits<float>::quiet_NaN();
  accel::write_npy(path("r.npy"), v.data(), {8});
  Proc r = accel("topk --input " + path("r.npy") + " --ratio 0.25 --output " + path("o.npy"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("R[5] is NaN"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(path("o.npy")));
  r = accel("topk --input " + path("r.npy") + " --ratio 0.25 --nonfinite exclude --json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["nonfinite"], 1);
}

TEST_F(Cli, TopKBadArguments) {
  EXPECT_EQ(accel("topk --synthetic laplace --n 10 --ratio 2").code, 2);
  EXPECT_EQ(accel("topk --synthetic cauchy --n 10 --ratio 0.1").code, 2);
  EXPECT_EQ(accel("topk --ratio 0.1").code, 2);
  EXPECT_EQ(accel("topk --synthetic laplace --n 10 --ratio 0.1 --method bogus").code, 2);
  const Proc r = accel("topk --input " + file("x.npy", "not numpy") + " --ratio 0.1");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("bad magic"), std::string::npos);
}

}  // namespace
