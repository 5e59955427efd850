// LIBSVM's model text format, every svm_type: a header of "key value"
// lines, "SV", then one line per support vector: its (classes - 1)
// coefficients (one for one-class and regression, whose header has no label
// and nr_sv lines) and its index:value pairs (1-based). Written so that LIBSVM's svm-predict reads it,
// and read so that models from LIBSVM's svm-train load here.
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <sstream>

#include "accel/error.hpp"
#include "accel/io.hpp"
#include "accel/svm.hpp"

namespace accel {
namespace {

const char* const kKernelNames[] = {"linear", "polynomial", "rbf", "sigmoid"};

std::string g17(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

}  // namespace

void write_svm_model(const std::string& path, const SvmModel& m) {
  atomic_write(path, [&](std::ostream& o) {
    const auto& p = m.params;
    const bool classify = is_classification(p.type);
    o << "svm_type " << model_type_name(p.type) << "\n";
    o << "kernel_type " << kKernelNames[static_cast<int>(p.kernel)] << "\n";
    if (p.kernel == KernelType::Polynomial) o << "degree " << p.degree << "\n";
    if (p.kernel != KernelType::Linear) o << "gamma " << g17(p.gamma) << "\n";
    if (p.kernel == KernelType::Polynomial || p.kernel == KernelType::Sigmoid) o << "coef0 " << g17(p.coef0) << "\n";
    o << "nr_class " << (classify ? m.labels.size() : 2) << "\n";
    o << "total_sv " << m.sv.rows << "\n";
    o << "rho";
    for (double r : m.rho) o << " " << g17(r);
    if (classify) {
      o << "\nlabel";
      for (int l : m.labels) o << " " << l;
    }
    if (!m.probA.empty()) {
      o << "\nprobA";
      for (double v : m.probA) o << " " << g17(v);
    }
    if (!m.probB.empty()) {
      o << "\nprobB";
      for (double v : m.probB) o << " " << g17(v);
    }
    if (classify) {
      o << "\nnr_sv";
      for (auto c : m.n_sv) o << " " << c;
    }
    o << "\nSV\n";
    char buf[64];
    for (std::int64_t s = 0; s < m.sv.rows; ++s) {
      std::string line;
      for (const auto& row : m.coef) line += g17(row[s]) + " ";
      for (std::int64_t t = m.sv.row_ptr[s]; t < m.sv.row_ptr[s + 1]; ++t) {
        // Shortest text that reads back as the same float: the value the
        // training file held (to float precision), not float noise like
        // 0.56999999 for 0.57.
        char* p = std::to_chars(buf, buf + sizeof buf, m.sv.col_idx[t] + 1).ptr;
        *p++ = ':';
        p = std::to_chars(p, buf + sizeof buf, m.sv.values[t]).ptr;
        *p++ = ' ';
        line.append(buf, p);
      }
      o << line << "\n";
    }
  });
}

SvmModel read_svm_model(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(path + ": cannot open: " + std::strerror(errno));
  auto where = [&](std::int64_t l) { return path + ":" + std::to_string(l); };
  SvmModel m;
  std::string line;
  std::int64_t lineno = 0, total_sv = -1;
  int nr_class = -1;
  bool seen_sv = false, have_rho = false, have_label = false, have_nsv = false;
  auto numbers = [&](std::istringstream& ss, auto& vec, std::size_t want, const std::string& key) {
    using T = typename std::decay_t<decltype(vec)>::value_type;
    vec.clear();
    T v;
    while (ss >> v) vec.push_back(v);
    if (!ss.eof() || vec.size() != want)
      throw InputError(where(lineno) + ": '" + key + "' needs " + std::to_string(want) + " numbers");
  };
  while (std::getline(in, line)) {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::istringstream ss(line);
    std::string key;
    if (!(ss >> key)) continue;
    if (key == "SV") {
      seen_sv = true;
      break;
    }
    // Single-valued lines end with their value (trailing junk is an error).
    auto done = [&](const std::string& k) {
      ss >> std::ws;
      if (!ss.eof()) throw InputError(where(lineno) + ": '" + k + "' line has trailing text");
    };
    if (key == "svm_type") {
      std::string t;
      ss >> t;
      int found = -1;
      for (int i = 0; i < 5; ++i)
        if (t == model_type_name(static_cast<SvmType>(i))) found = i;
      if (found < 0) throw InputError(where(lineno) + ": svm_type '" + t + "' is not a LIBSVM type");
      m.params.type = static_cast<SvmType>(found);
      done(key);
    } else if (key == "kernel_type") {
      std::string t;
      ss >> t;
      int found = -1;
      for (int i = 0; i < 4; ++i)
        if (t == kKernelNames[i]) found = i;
      if (found < 0) throw InputError(where(lineno) + ": kernel_type '" + t + "' is not supported");
      m.params.kernel = static_cast<KernelType>(found);
      done(key);
    } else if (key == "degree") {
      if (!(ss >> m.params.degree)) throw InputError(where(lineno) + ": bad degree");
      done(key);
    } else if (key == "gamma") {
      if (!(ss >> m.params.gamma)) throw InputError(where(lineno) + ": bad gamma");
      done(key);
    } else if (key == "coef0") {
      if (!(ss >> m.params.coef0)) throw InputError(where(lineno) + ": bad coef0");
      done(key);
    } else if (key == "nr_class") {
      // LIBSVM's own limit is memory; 2^16 classes are 2^31 pairs, far past any model.
      if (!(ss >> nr_class) || nr_class < 1 || nr_class > (1 << 16)) throw InputError(where(lineno) + ": bad nr_class");
      done(key);
    } else if (key == "total_sv") {
      if (!(ss >> total_sv) || total_sv < 0) throw InputError(where(lineno) + ": bad total_sv");
      done(key);
    } else if (key == "rho" || key == "label" || key == "nr_sv" || key == "probA" || key == "probB") {
      if (nr_class < 1) throw InputError(where(lineno) + ": '" + key + "' before nr_class");
      const std::size_t pairs = static_cast<std::size_t>(nr_class) * (nr_class - 1) / 2;
      if (key == "probA") numbers(ss, m.probA, is_classification(m.params.type) ? pairs : 1, key);
      if (key == "probB") numbers(ss, m.probB, pairs, key);
      if (key == "rho") numbers(ss, m.rho, pairs, key), have_rho = true;
      if (key == "label") numbers(ss, m.labels, nr_class, key), have_label = true;
      if (key == "nr_sv") numbers(ss, m.n_sv, nr_class, key), have_nsv = true;
    }
    // Anything newer (LIBSVM 3.3's prob_density_marks): not needed to predict.
  }
  if (!seen_sv) throw InputError(path + ": no 'SV' line: not a LIBSVM model");
  const bool classify = is_classification(m.params.type);
  if (nr_class < 1 || total_sv < 0 || !have_rho || (classify && (!have_label || !have_nsv)))
    throw InputError(path + ": header lacks nr_class, total_sv, rho" + (classify ? ", label or nr_sv" : ""));
  if (!classify && nr_class != 2)
    throw InputError(path + ": nr_class " + std::to_string(nr_class) + " for " + model_type_name(m.params.type) +
                     " (LIBSVM writes 2)");
  std::int64_t sum = 0;
  for (auto c : m.n_sv) {
    if (c < 0) throw InputError(path + ": nr_sv holds a negative count (" + std::to_string(c) + ")");
    sum += c;
  }
  if (classify && sum != total_sv)
    throw InputError(path + ": nr_sv adds up to " + std::to_string(sum) + ", total_sv is " + std::to_string(total_sv));
  // Every support vector line holds nr_class - 1 coefficients (a character
  // and a separator each at least): what the rest of the file can hold
  // bounds the allocation below.
  if (const std::int64_t left = bytes_left(in); total_sv > left / (2 * std::max(1, nr_class - 1)))
    throw InputError(path + ": total_sv " + std::to_string(total_sv) + " is more than the file's " +
                     std::to_string(left) + " remaining bytes can hold");
  m.coef.assign(nr_class - 1, std::vector<double>(total_sv));
  for (std::int64_t s = 0; s < total_sv; ++s) {
    if (!std::getline(in, line))
      throw InputError(path + ": " + std::to_string(s) + " support vectors, total_sv says " + std::to_string(total_sv));
    ++lineno;
    std::string_view v(line);
    std::size_t pos = 0;
    auto next = [&]() -> std::string_view {
      pos = v.find_first_not_of(" \t\r", pos);
      if (pos == std::string_view::npos) return {};
      const std::size_t end = std::min(v.size(), v.find_first_of(" \t\r", pos));
      const std::string_view tok = v.substr(pos, end - pos);
      pos = end;
      return tok;
    };
    for (int c = 0; c < nr_class - 1; ++c) {
      const std::string_view tok = next();
      double d;
      auto [p, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), d);
      if (tok.empty() || ec != std::errc() || p != tok.data() + tok.size())
        throw InputError(where(lineno) + ": coefficient '" + std::string(tok) + "' is not a number");
      m.coef[c][s] = d;
    }
    std::vector<std::pair<std::int32_t, float>> row;
    std::int64_t prev = 0;
    for (std::string_view tok = next(); !tok.empty(); tok = next()) {
      const std::size_t colon = tok.find(':');
      std::int64_t idx = 0;
      float val = 0;
      if (colon == std::string_view::npos) throw InputError(where(lineno) + ": '" + std::string(tok) + "' has no ':'");
      auto [p1, e1] = std::from_chars(tok.data(), tok.data() + colon, idx);
      auto [p2, e2] = std::from_chars(tok.data() + colon + 1, tok.data() + tok.size(), val);
      if (e1 != std::errc() || p1 != tok.data() + colon || idx <= prev || idx > INT32_MAX || e2 != std::errc() ||
          p2 != tok.data() + tok.size())
        throw InputError(where(lineno) + ": bad index:value '" + std::string(tok) + "'");
      prev = idx;
      if (val != 0.0f) row.emplace_back(static_cast<std::int32_t>(idx - 1), val);
    }
    m.sv.add_row(std::move(row));
  }
  return m;
}

}  // namespace accel
