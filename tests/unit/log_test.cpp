// The one diagnostic sink (accel/log.hpp) and the one JSON-lines writer
// (accel/json_lines.hpp): levels filter, a custom sink sees every line with
// its source, and JSON lines are whole objects stamped with t_s.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "accel/json_lines.hpp"
#include "accel/log.hpp"

namespace accel {
namespace {

struct Captured {
  log::Level level;
  std::string source, text;
};

class LogSink : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_ = log::level();
    log::set_sink([this](log::Level l, std::string_view s, std::string_view t) {
      lines_.push_back({l, std::string(s), std::string(t)});
    });
  }
  void TearDown() override {
    log::set_sink(nullptr);
    log::set_level(saved_);
  }
  std::vector<Captured> lines_;
  log::Level saved_{};
};

TEST_F(LogSink, LinesReachTheSinkWithTheirSourceAndLevel) {
  log::set_level(log::Level::Debug);
  log::warn("accel coordinator") << "worker " << 3 << " is gone";
  log::info("accel transport") << "x=" << 1.5;
  ASSERT_EQ(lines_.size(), 2u);
  EXPECT_EQ(lines_[0].level, log::Level::Warn);
  EXPECT_EQ(lines_[0].source, "accel coordinator");
  EXPECT_EQ(lines_[0].text, "worker 3 is gone");
  EXPECT_EQ(lines_[1].text, "x=1.5");
}

TEST_F(LogSink, LinesBelowTheThresholdAreDropped) {
  log::set_level(log::Level::Warn);
  log::error("a") << "e";
  log::warn("a") << "w";
  log::info("a") << "i";
  log::debug("a") << "d";
  ASSERT_EQ(lines_.size(), 2u);
  EXPECT_EQ(lines_[0].text, "e");
  EXPECT_EQ(lines_[1].text, "w");
}

TEST(LogLevel, ParsesTheDocumentedNames) {
  EXPECT_EQ(log::parse_level("error"), log::Level::Error);
  EXPECT_EQ(log::parse_level("warn"), log::Level::Warn);
  EXPECT_EQ(log::parse_level("info"), log::Level::Info);
  EXPECT_EQ(log::parse_level("debug"), log::Level::Debug);
  EXPECT_FALSE(log::parse_level("loud").has_value());
  EXPECT_STREQ(log::to_string(log::Level::Warn), "warn");
}

TEST(JsonLines, OneStampedObjectPerLine) {
  std::ostringstream out;
  JsonLines lines(out);
  lines.write({{"iteration", 1}, {"inertia", 2.5}});
  lines.write({{"iteration", 2}});
  std::istringstream in(out.str());
  std::string a, b, rest;
  ASSERT_TRUE(std::getline(in, a));
  ASSERT_TRUE(std::getline(in, b));
  EXPECT_FALSE(std::getline(in, rest));
  const auto ja = nlohmann::json::parse(a), jb = nlohmann::json::parse(b);
  EXPECT_EQ(ja["iteration"], 1);
  EXPECT_EQ(ja["inertia"], 2.5);
  EXPECT_GE(jb["t_s"].get<double>(), ja["t_s"].get<double>());
  JsonLines nowhere;  // writes nothing, throws nothing
  nowhere.write({{"x", 1}});
}

TEST(JsonLines, AnUnwritablePathIsAnInputError) {
  EXPECT_THROW(JsonLines("/nonexistent-dir/log.jsonl"), InputError);
}

}  // namespace
}  // namespace accel
