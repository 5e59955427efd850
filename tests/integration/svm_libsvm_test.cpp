// accel svm-train / svm-predict against LIBSVM's own tools on data generated
// here: the same dual objective (1e-3 relative) and rho (1e-3) per class
// pair, the same support vectors up to eps effects, the same test accuracy
// (0.3 points), for every shrinking heuristic and both selection rules; each
// side's predictor reads the other's model. Then bad input on the command
// line: exit 2, one line naming file:line, no model written.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <set>
#include <sstream>

namespace fs = std::filesystem;

namespace {

struct Proc {
  int code;
  std::string out, err;
};

std::string slurp(const std::string& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class SvmVsLibsvm : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("accel_svm_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  // ACCEL_KEEP_TEST_DIR=1 keeps the data and models for a look afterwards.
  void TearDown() override {
    if (!std::getenv("ACCEL_KEEP_TEST_DIR")) fs::remove_all(dir_);
  }
  Proc run(const std::string& cmd) {
    const std::string out = path("stdout"), err = path("stderr");
    const int status = std::system((cmd + " >" + out + " 2>" + err).c_str());
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out), slurp(err)};
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::string file(const std::string& name, const std::string& text) {
    std::ofstream(path(name)) << text;
    return path(name);
  }
  static bool have_libsvm() { return ::access("/usr/bin/svm-train", X_OK) == 0 && ::access("/usr/bin/svm-predict", X_OK) == 0; }
  fs::path dir_;
};

// Overlapping Gaussian classes, sparse (a feature is present with
// probability 0.6), values with two decimals so both tools read them exactly
// alike. Labels are listed in `labels`; the first row's class comes first.
std::string make_data(int n, const std::vector<int>& labels, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> noise(0.0, 0.35);
  std::uniform_real_distribution<double> coin(0.0, 1.0);
  std::string text;
  char buf[32];
  for (int i = 0; i < n; ++i) {
    const int c = i % static_cast<int>(labels.size());
    text += std::to_string(labels[c]);
    for (int j = 0; j < 12; ++j) {
      if (coin(rng) > 0.6) continue;
      const double v = std::round((0.5 + 0.3 * std::cos(2.1 * c + j) + noise(rng)) * 100) / 100;
      if (v == 0) continue;
      std::snprintf(buf, sizeof buf, " %d:%.2f", j + 1, v);
      text += buf;
    }
    text += "\n";
  }
  return text;
}

struct Pair {
  double obj, rho;
  long long nsv;
};

std::vector<Pair> libsvm_pairs(const std::string& stdout_text) {
  std::vector<Pair> out;
  const std::regex re(R"(obj = (-?[0-9.e+-]+), rho = (-?[0-9.e+-]+)\nnSV = ([0-9]+))");
  for (auto it = std::sregex_iterator(stdout_text.begin(), stdout_text.end(), re); it != std::sregex_iterator(); ++it)
    out.push_back({std::stod((*it)[1]), std::stod((*it)[2]), std::stoll((*it)[3])});
  return out;
}

// The feature part of every support-vector line of a model, as a set.
std::multiset<std::string> sv_rows(const std::string& model) {
  std::multiset<std::string> out;
  std::istringstream in(slurp(model));
  std::string line;
  bool body = false;
  while (std::getline(in, line)) {
    if (body) {
      const auto colon = line.find(':');
      const auto start = line.rfind(' ', colon == std::string::npos ? line.size() : colon);
      out.insert(colon == std::string::npos ? std::string() : line.substr(start + 1));
    }
    if (line == "SV") body = true;
  }
  return out;
}

double accuracy(const std::string& predict_stdout) {
  std::smatch m;
  const std::regex re(R"(Accuracy = ([0-9.]+)%)");
  return std::regex_search(predict_stdout, m, re) ? std::stod(m[1]) : -1;
}

class SvmVsLibsvmData : public SvmVsLibsvm {
 protected:
  void check_dataset(const std::vector<int>& labels, const std::string& opts) {
    if (!have_libsvm()) GTEST_SKIP() << "LIBSVM's svm-train/svm-predict not in /usr/bin (Debian: libsvm-tools)";
    const auto train = file("train.txt", make_data(600, labels, 11));
    const auto test = file("test.txt", make_data(1000, labels, 12));
    const auto lib_model = path("lib.model");
    const Proc lt = run("/usr/bin/svm-train " + opts + " " + train + " " + lib_model);
    ASSERT_EQ(lt.code, 0) << lt.err;
    const auto want = libsvm_pairs(lt.out);
    ASSERT_EQ(want.size(), labels.size() * (labels.size() - 1) / 2) << lt.out;
    const Proc lp = run("/usr/bin/svm-predict " + test + " " + lib_model + " " + path("lib.pred"));
    ASSERT_EQ(lp.code, 0) << lp.err;
    const double lib_acc = accuracy(lp.out);
    const auto lib_svs = sv_rows(lib_model);

    // accel's predictor on LIBSVM's model: identical predictions.
    const Proc ap = run(std::string(ACCEL_BIN) + " svm-predict " + test + " " + lib_model + " " + path("acc_on_lib.pred"));
    ASSERT_EQ(ap.code, 0) << ap.err;
    EXPECT_EQ(slurp(path("acc_on_lib.pred")), slurp(path("lib.pred")));
    EXPECT_DOUBLE_EQ(accuracy(ap.out), lib_acc);

    // Each tool's rho lies in its own final [beta_up, beta_low], an interval
    // of width up to eps around the optimum's: two answers may differ by up
    // to 2 eps (seen: 1.04e-3 at the default 1e-3, batched solver, -m 0).
    const std::size_t e_at = opts.find("-e ");
    const double eps = e_at == std::string::npos ? 1e-3 : std::stod(opts.substr(e_at + 3));
    const double rho_tol = std::max(1e-3, 2 * eps);
    std::vector<std::string> variants;
    for (const char* h : {"none", "single2", "single500", "single1000", "single5pc", "single10pc", "single50pc",
                          "multi2", "multi500", "multi1000", "multi5pc", "multi10pc", "multi50pc"})
      variants.push_back(std::string("--shrink ") + h);
    variants.push_back("--wss 2 --shrink none");
    variants.push_back("--wss 2 --shrink multi5pc");
    variants.push_back("-h 0 -m 0");
    // The batched solver (the default) at other working-set sizes, and the
    // pair solver ([Narasimhan14]'s SMO) it replaced as the default.
    for (const char* v : {"--ws-size 2", "--ws-size 16 --wss 2", "--ws-size 600 --shrink multi2", "--solver pair",
                          "--solver pair --shrink single2", "--solver pair --wss 2 --shrink multi5pc",
                          "--solver pair -h 0 -m 0"})
      variants.push_back(v);
    for (const auto& v : variants) {
      SCOPED_TRACE(v);
      const auto model = path("acc.model");
      const Proc at = run(std::string(ACCEL_BIN) + " svm-train " + opts + " " + v + " --json " + train + " " + model);
      ASSERT_EQ(at.code, 0) << at.err;
      const auto j = nlohmann::json::parse(at.out);
      ASSERT_EQ(j["problems"].size(), want.size());
      for (std::size_t p = 0; p < want.size(); ++p) {
        const auto& got = j["problems"][p];
        EXPECT_NEAR(got["obj"].get<double>(), want[p].obj, 1e-3 * std::abs(want[p].obj)) << "pair " << p;
        EXPECT_NEAR(got["rho"].get<double>(), want[p].rho, rho_tol) << "pair " << p;
      }
      // Support vectors: the same rows up to eps effects (a few multipliers
      // within eps of zero may land on either side).
      const auto svs = sv_rows(model);
      std::vector<std::string> diff;
      std::set_symmetric_difference(svs.begin(), svs.end(), lib_svs.begin(), lib_svs.end(), std::back_inserter(diff));
      EXPECT_LE(diff.size(), std::max<std::size_t>(2, lib_svs.size() / 50)) << svs.size() << " vs " << lib_svs.size();
      // LIBSVM's predictor reads accel's model, and predicts as accel's own.
      const Proc lp2 = run("/usr/bin/svm-predict " + test + " " + model + " " + path("lib_on_acc.pred"));
      ASSERT_EQ(lp2.code, 0) << lp2.err;
      const Proc ap2 = run(std::string(ACCEL_BIN) + " svm-predict " + test + " " + model + " " + path("acc.pred"));
      ASSERT_EQ(ap2.code, 0) << ap2.err;
      EXPECT_EQ(slurp(path("acc.pred")), slurp(path("lib_on_acc.pred")));
      EXPECT_NEAR(accuracy(ap2.out), lib_acc, 0.3);
    }
  }
};

// Both tools run at -e 1e-4: at LIBSVM's default 1e-3 each one's rho is
// only that accurate (on the three-class data LIBSVM's own rho moves by
// 1.1e-3 between -e 1e-3 and -e 1e-5, while the two tools agree to 5e-6 at
// 1e-5), so a 1e-3 bound on the difference would test luck, not correctness.
TEST_F(SvmVsLibsvmData, BinaryRbfEveryHeuristic) { check_dataset({-1, 1}, "-c 4 -g 0.5 -e 1e-4"); }
TEST_F(SvmVsLibsvmData, ThreeClassesOneAgainstOne) { check_dataset({3, 1, 7}, "-c 2 -e 1e-4"); }
TEST_F(SvmVsLibsvmData, PolynomialKernel) { check_dataset({2, 4}, "-t 1 -d 2 -g 0.5 -r 1 -c 1 -e 1e-4"); }
TEST_F(SvmVsLibsvmData, DefaultsAtDefaultEps) { check_dataset({-1, 1}, ""); }

TEST_F(SvmVsLibsvm, BadInputExitsTwoNamesLineAndWritesNoModel) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"1 1:0.5\n-1 2 3:1\n", ":2: '2' has no ':'"},
      {"1 1:0.5\n-1 2:zz\n", ":2: value 'zz'"},
      {"1 1:0.5\n-1 3:1 2:1\n", ":2: feature index 2 does not increase"},
      {"1 1:0.5\nabc 2:1\n", ":2: label 'abc'"},
      {"1 1:0.5\n1 2:1\n", "only one class"},
      {"1 1:0.5\n1.5 2:1\n", ":2: label 1.5"},
      {"", "no data rows"},
  };
  for (const auto& [text, needle] : cases) {
    const auto in = file("in.txt", text);
    const auto model = path("out.model");
    const Proc r = run(std::string(ACCEL_BIN) + " svm-train " + in + " " + model);
    EXPECT_EQ(r.code, 2) << text << r.err;
    EXPECT_NE(r.err.find(in), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(fs::exists(model)) << text;
  }
  const auto ok = file("ok.txt", "1 1:0.5\n-1 1:1\n");
  // Each bad option: exit 2, one line naming the option, no model.
  for (const auto& [opts, needle] : std::vector<std::pair<std::string, std::string>>{
           {"-s 5", "-s 5"}, {"-t 7", "-t 7"}, {"-h 2", "-h 2"}, {"--shrink multi3", "multi3"}, {"-c 0", "-c 0"},
           {"--wss 3", "--wss 3"}, {"-b 2", "-b 2"}, {"-s 2 -b 1", "-b 1"}, {"-s 1 -n 0", "-n 0"}, {"-s 2 -n 1.5", "-n 1.5"},
           {"-s 3 -p -1", "-p -1"}, {"-v 1", "-v 1"}, {"-w1 x", "-w1 x"}, {"--ws-size 1", "--ws-size 1"}}) {
    const Proc r = run(std::string(ACCEL_BIN) + " svm-train " + opts + " " + ok + " " + path("out.model"));
    EXPECT_EQ(r.code, 2) << opts << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << opts << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(fs::exists(path("out.model"))) << opts;
  }
  // A weight for an absent class: LIBSVM's warning, and the model is written.
  {
    const Proc r = run(std::string(ACCEL_BIN) + " svm-train -q -w5 2 " + ok + " " + path("w.model"));
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.err.find("WARNING: class label 5 specified in weight is not found"), std::string::npos) << r.err;
    EXPECT_TRUE(fs::exists(path("w.model")));
  }
  // No arguments: the usage, exit 1, as svm-train.
  {
    const Proc r = run(std::string(ACCEL_BIN) + " svm-train");
    EXPECT_EQ(r.code, 1);
    EXPECT_NE(r.out.find("training_file"), std::string::npos) << r.out;
  }
  const Proc r = run(std::string(ACCEL_BIN) + " svm-predict " + ok + " " + path("missing.model") + " " + path("o.txt"));
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_FALSE(fs::exists(path("o.txt")));
  // -b 1 at predict time with a model trained without probabilities.
  const Proc b = run(std::string(ACCEL_BIN) + " svm-predict -b 1 " + ok + " " + path("w.model") + " " + path("o.txt"));
  EXPECT_EQ(b.code, 2) << b.err;
  EXPECT_NE(b.err.find("w.model: -b 1 but the model has no probability estimates"), std::string::npos) << b.err;
  EXPECT_EQ(std::count(b.err.begin(), b.err.end(), '\n'), 1) << b.err;
  EXPECT_FALSE(fs::exists(path("o.txt")));
}

}  // namespace
