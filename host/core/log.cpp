#include "accel/log.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace accel::log {
namespace {

std::mutex g_mu;
Sink g_sink;
std::atomic<int> g_level{-1};  // -1: not read from the environment yet

}  // namespace

std::optional<Level> parse_level(std::string_view name) {
  if (name == "error") return Level::Error;
  if (name == "warn" || name == "warning") return Level::Warn;
  if (name == "info") return Level::Info;
  if (name == "debug") return Level::Debug;
  return std::nullopt;
}

const char* to_string(Level level) {
  switch (level) {
    case Level::Error: return "error";
    case Level::Warn: return "warn";
    case Level::Info: return "info";
    case Level::Debug: return "debug";
  }
  return "?";
}

Level level() {
  int l = g_level.load(std::memory_order_relaxed);
  if (l < 0) {
    const char* env = std::getenv("ACCEL_LOG_LEVEL");
    const auto parsed = env ? parse_level(env) : std::nullopt;
    l = static_cast<int>(parsed.value_or(Level::Info));
    g_level.store(l, std::memory_order_relaxed);
  }
  return static_cast<Level>(l);
}

void set_level(Level level) { g_level.store(static_cast<int>(level), std::memory_order_relaxed); }

void set_sink(Sink sink) {
  std::lock_guard lock(g_mu);
  g_sink = std::move(sink);
}

// Whole lines under one lock: threads (the snapshot writer, the bootstrap
// server's refusals) never interleave within a line.
void write(Level lv, std::string_view source, std::string_view text) {
  if (lv > level()) return;
  std::lock_guard lock(g_mu);
  if (g_sink) {
    g_sink(lv, source, text);
    return;
  }
  std::string line;
  line.reserve(source.size() + text.size() + 3);
  line.append(source).append(": ").append(text).push_back('\n');
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace accel::log
