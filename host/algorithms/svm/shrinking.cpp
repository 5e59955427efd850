// The shrinking heuristics of Narasimhan et al. 2014 Table 3 by name.
#include <algorithm>
#include <string>

#include "accel/error.hpp"
#include "accel/svm.hpp"

namespace accel {
namespace {

struct Named {
  const char* suffix;
  std::int64_t every;
  double fraction;
};
constexpr Named kSchedules[] = {{"2", 2, 0}, {"500", 500, 0}, {"1000", 1000, 0},
                                {"5pc", 0, 0.05}, {"10pc", 0, 0.10}, {"50pc", 0, 0.50}};

}  // namespace

std::int64_t ShrinkHeuristic::period(std::int64_t n) const {
  if (kind == Kind::None) return 0;
  if (fraction > 0) return std::max<std::int64_t>(1, static_cast<std::int64_t>(fraction * n));
  return std::max<std::int64_t>(1, every);
}

std::vector<std::string> shrink_heuristic_names() {
  std::vector<std::string> out = {"none"};
  for (const char* kind : {"single", "multi"})
    for (const auto& s : kSchedules) out.push_back(std::string(kind) + s.suffix);
  return out;
}

ShrinkHeuristic parse_shrink(const std::string& name) {
  ShrinkHeuristic h;
  h.name = name;
  if (name == "none") return h;
  if (name == "auto") {
    h.kind = ShrinkHeuristic::Kind::Auto;
    return h;
  }
  for (const auto& [prefix, kind] : {std::pair{"single", ShrinkHeuristic::Kind::Single},
                                     std::pair{"multi", ShrinkHeuristic::Kind::Multi}}) {
    const std::string p = prefix;
    if (name.rfind(p, 0) != 0) continue;
    for (const auto& s : kSchedules)
      if (name.substr(p.size()) == s.suffix) {
        h.kind = kind;
        h.every = s.every;
        h.fraction = s.fraction;
        return h;
      }
  }
  std::string all;
  for (const auto& n : shrink_heuristic_names()) all += (all.empty() ? "" : ", ") + n;
  throw InputError("--shrink " + name + ": unknown heuristic (one of: auto, " + all + ")");
}

ShrinkHeuristic resolve_shrink(const ShrinkHeuristic& h, double cache_mb, std::int64_t n) {
  if (h.kind != ShrinkHeuristic::Kind::Auto) return h;
  const double rows_cached = std::max(0.0, cache_mb) * 1048576.0 / (4.0 * std::max<std::int64_t>(1, n));
  return parse_shrink(rows_cached * 8 >= double(n) ? "none" : "multi2");
}

}  // namespace accel
