#include "job_token.hpp"

#include <fcntl.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "accel/error.hpp"

namespace accel::cluster {

std::uint64_t random_job_token() {
  std::uint64_t t = 0;
  while (t == 0)
    if (RAND_bytes(reinterpret_cast<unsigned char*>(&t), sizeof t) != 1)
      throw std::runtime_error("no random bytes for the job token");
  return t;
}

std::string default_job_file(std::uint16_t port) {
  const char* home = std::getenv("HOME");
  std::filesystem::path dir;
  if (home != nullptr && *home != '\0') dir = std::filesystem::path(home) / ".accel";
  else dir = std::filesystem::temp_directory_path() / ("accel-" + std::to_string(::getuid()));
  return (dir / ("job-" + std::to_string(port) + ".token")).string();
}

std::uint64_t parse_job_token(const std::string& text, const std::string& where) {
  std::string t = text;
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back()))) t.pop_back();
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(t.c_str(), &end, 0);
  if (t.empty() || t[0] == '-' || errno != 0 || end == nullptr || *end != '\0' || v == 0)
    throw InputError(where + ": not a job token (a non-zero 64-bit number): '" + t.substr(0, 40) + "'");
  return v;
}

namespace {

// `text` into `path`, mode 0600, the directory made 0700 when missing.
void write_private_file(const std::string& path, const std::string& text, const char* what) {
  const auto dir = std::filesystem::path(path).parent_path();
  if (!dir.empty() && !std::filesystem::exists(dir)) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) throw InputError(dir.string() + ": cannot create the " + what + "'s directory: " + ec.message());
    ::chmod(dir.c_str(), 0700);
  }
  // A new file each time (write, then rename): a reader never sees half of
  // it, and an earlier job's file of other permissions is replaced.
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) throw InputError(path + ": cannot write the " + what + ": " + std::strerror(errno));
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw InputError(path + ": cannot write the " + what);
  }
}

std::string hex(std::uint64_t token) {
  std::ostringstream s;
  s << "0x" << std::hex << token;
  return s.str();
}

}  // namespace

void write_job_file(const std::string& path, std::uint64_t token) {
  write_private_file(path, hex(token) + "\n", "job token");
}

void write_rendezvous(const std::string& path, const Rendezvous& r) {
  write_private_file(path, r.address + " " + hex(r.token) + "\n", "rendezvous");
}

std::optional<Rendezvous> read_rendezvous(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  Rendezvous r;
  std::string token;
  if (!(in >> r.address >> token) || r.address.find(':') == std::string::npos)
    throw InputError(path + ": not a rendezvous (ADDR:PORT and a job token)");
  r.token = parse_job_token(token, path);
  return r;
}

std::optional<std::uint64_t> read_job_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::string text(64, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  return parse_job_token(text, path);
}

std::optional<std::uint64_t> env_job_token() {
  const char* v = std::getenv("ACCEL_JOB_TOKEN");
  if (v == nullptr || *v == '\0') return std::nullopt;
  return parse_job_token(v, "ACCEL_JOB_TOKEN");
}

}  // namespace accel::cluster
