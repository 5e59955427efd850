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

namespace {

// LIBSVM's model text, read in three parts: the header up to "SV", its
// consistency, and one line per support vector.
class ModelReader {
 public:
  explicit ModelReader(const std::string& path) : path_(path), in_(path) {
    if (!in_) throw InputError(path + ": cannot open: " + std::strerror(errno));
  }
  SvmModel read() {
    header();
    check_header();
    m_.coef.assign(nr_class_ - 1, std::vector<double>(total_sv_));
    std::string line;
    for (std::int64_t s = 0; s < total_sv_; ++s) {
      if (!std::getline(in_, line))
        throw InputError(path_ + ": " + std::to_string(s) + " support vectors, total_sv says " +
                         std::to_string(total_sv_));
      ++lineno_;
      sv_line(s, line);
    }
    return std::move(m_);
  }

 private:
  std::string where() const { return path_ + ":" + std::to_string(lineno_); }

  void header() {
    std::string line;
    while (std::getline(in_, line)) {
      ++lineno_;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      std::istringstream ss(line);
      std::string key;
      if (!(ss >> key)) continue;
      if (key == "SV") return;
      header_line(key, ss);
    }
    throw InputError(path_ + ": no 'SV' line: not a LIBSVM model");
  }

  // One header line; lines newer than LIBSVM 3.24's (3.3's
  // prob_density_marks) are not needed to predict, and are skipped.
  void header_line(const std::string& key, std::istringstream& ss) {
    if (key == "svm_type") {
      m_.params.type = static_cast<SvmType>(name_of(ss, key, 5, "is not a LIBSVM type", [](int i) { return model_type_name(static_cast<SvmType>(i)); }));
    } else if (key == "kernel_type") {
      m_.params.kernel = static_cast<KernelType>(name_of(ss, key, 4, "is not supported", [](int i) { return kKernelNames[i]; }));
    } else if (key == "degree") {
      value(ss, key, m_.params.degree);
    } else if (key == "gamma") {
      value(ss, key, m_.params.gamma);
    } else if (key == "coef0") {
      value(ss, key, m_.params.coef0);
    } else if (key == "nr_class") {
      // LIBSVM's own limit is memory; 2^16 classes are 2^31 pairs, far past any model.
      value(ss, key, nr_class_);
      if (nr_class_ < 1 || nr_class_ > (1 << 16)) throw InputError(where() + ": bad nr_class");
    } else if (key == "total_sv") {
      value(ss, key, total_sv_);
      if (total_sv_ < 0) throw InputError(where() + ": bad total_sv");
    } else if (key == "rho" || key == "label" || key == "nr_sv" || key == "probA" || key == "probB") {
      per_class(key, ss);
    }
  }

  // The index of a name among `count` (names(i)), ending the line.
  template <class Names>
  int name_of(std::istringstream& ss, const std::string& key, int count, const char* unknown, Names names) {
    std::string t;
    ss >> t;
    int found = -1;
    for (int i = 0; i < count; ++i)
      if (t == names(i)) found = i;
    if (found < 0) throw InputError(where() + ": " + key + " '" + t + "' " + unknown);
    end_of(ss, key);
    return found;
  }

  // Single-valued lines end with their value (trailing junk is an error).
  template <class T>
  void value(std::istringstream& ss, const std::string& key, T& out) {
    if (!(ss >> out)) throw InputError(where() + ": bad " + key);
    end_of(ss, key);
  }
  void end_of(std::istringstream& ss, const std::string& key) {
    ss >> std::ws;
    if (!ss.eof()) throw InputError(where() + ": '" + key + "' line has trailing text");
  }

  void per_class(const std::string& key, std::istringstream& ss) {
    if (nr_class_ < 1) throw InputError(where() + ": '" + key + "' before nr_class");
    const std::size_t pairs = static_cast<std::size_t>(nr_class_) * (nr_class_ - 1) / 2;
    if (key == "probA") numbers(ss, m_.probA, is_classification(m_.params.type) ? pairs : 1, key);
    if (key == "probB") numbers(ss, m_.probB, pairs, key);
    if (key == "rho") numbers(ss, m_.rho, pairs, key), have_rho_ = true;
    if (key == "label") numbers(ss, m_.labels, nr_class_, key), have_label_ = true;
    if (key == "nr_sv") numbers(ss, m_.n_sv, nr_class_, key), have_nsv_ = true;
  }
  template <class V>
  void numbers(std::istringstream& ss, V& vec, std::size_t want, const std::string& key) {
    using T = typename V::value_type;
    vec.clear();
    T v;
    while (ss >> v) vec.push_back(v);
    if (!ss.eof() || vec.size() != want)
      throw InputError(where() + ": '" + key + "' needs " + std::to_string(want) + " numbers");
  }

  void check_header() {
    const bool classify = is_classification(m_.params.type);
    if (nr_class_ < 1 || total_sv_ < 0 || !have_rho_ || (classify && (!have_label_ || !have_nsv_)))
      throw InputError(path_ + ": header lacks nr_class, total_sv, rho" + (classify ? ", label or nr_sv" : ""));
    if (!classify && nr_class_ != 2)
      throw InputError(path_ + ": nr_class " + std::to_string(nr_class_) + " for " + model_type_name(m_.params.type) +
                       " (LIBSVM writes 2)");
    std::int64_t sum = 0;
    for (auto c : m_.n_sv) {
      if (c < 0) throw InputError(path_ + ": nr_sv holds a negative count (" + std::to_string(c) + ")");
      sum += c;
    }
    if (classify && sum != total_sv_)
      throw InputError(path_ + ": nr_sv adds up to " + std::to_string(sum) + ", total_sv is " + std::to_string(total_sv_));
    // Every support vector line holds nr_class - 1 coefficients (a character
    // and a separator each at least): what the rest of the file can hold
    // bounds the allocation that follows.
    if (const std::int64_t left = bytes_left(in_); total_sv_ > left / (2 * std::max(1, nr_class_ - 1)))
      throw InputError(path_ + ": total_sv " + std::to_string(total_sv_) + " is more than the file's " +
                       std::to_string(left) + " remaining bytes can hold");
  }

  // Support vector s: its nr_class - 1 coefficients, then index:value pairs.
  void sv_line(std::int64_t s, std::string_view v) {
    std::size_t pos = 0;
    auto next = [&]() -> std::string_view {
      pos = v.find_first_not_of(" \t\r", pos);
      if (pos == std::string_view::npos) return {};
      const std::size_t end = std::min(v.size(), v.find_first_of(" \t\r", pos));
      const std::string_view tok = v.substr(pos, end - pos);
      pos = end;
      return tok;
    };
    for (int c = 0; c < nr_class_ - 1; ++c) {
      const std::string_view tok = next();
      double d;
      auto [p, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), d);
      if (tok.empty() || ec != std::errc() || p != tok.data() + tok.size())
        throw InputError(where() + ": coefficient '" + std::string(tok) + "' is not a number");
      m_.coef[c][s] = d;
    }
    std::vector<std::pair<std::int32_t, float>> row;
    std::int64_t prev = 0;
    for (std::string_view tok = next(); !tok.empty(); tok = next()) {
      const std::size_t colon = tok.find(':');
      std::int64_t idx = 0;
      float val = 0;
      if (colon == std::string_view::npos) throw InputError(where() + ": '" + std::string(tok) + "' has no ':'");
      auto [p1, e1] = std::from_chars(tok.data(), tok.data() + colon, idx);
      auto [p2, e2] = std::from_chars(tok.data() + colon + 1, tok.data() + tok.size(), val);
      if (e1 != std::errc() || p1 != tok.data() + colon || idx <= prev || idx > INT32_MAX || e2 != std::errc() ||
          p2 != tok.data() + tok.size())
        throw InputError(where() + ": bad index:value '" + std::string(tok) + "'");
      prev = idx;
      if (val != 0.0f) row.emplace_back(static_cast<std::int32_t>(idx - 1), val);
    }
    m_.sv.add_row(std::move(row));
  }

  const std::string path_;
  std::ifstream in_;
  SvmModel m_;
  std::int64_t lineno_ = 0, total_sv_ = -1;
  int nr_class_ = -1;
  bool have_rho_ = false, have_label_ = false, have_nsv_ = false;
};

}  // namespace

SvmModel read_svm_model(const std::string& path) { return ModelReader(path).read(); }

}  // namespace accel
