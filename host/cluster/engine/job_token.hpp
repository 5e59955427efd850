// The job token when none is given on the command line: random per job,
// handed to the workers in a file only its owner can read, or by the
// launcher's environment. The handshake (bootstrap.hpp) keys on it, so a
// guessable default would let anyone on the network join a job.
//
// Where a worker finds it, first match wins: --job, --job-file FILE, the
// environment's ACCEL_JOB_TOKEN, then the coordinator's default file for
// its port, ~/.accel/job-PORT.token (0600, in a 0700 directory; a shared
// home reaches every node). The coordinator without --job draws a random
// token and writes it to --job-file or that default file.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace accel::cluster {

// A random non-zero token (OpenSSL's RAND_bytes).
std::uint64_t random_job_token();
// ~/.accel/job-PORT.token (or $TMPDIR/accel-UID/... without a home).
std::string default_job_file(std::uint16_t port);
// Writes the token to `path` (mode 0600, the directory made 0700 when
// missing); throws InputError naming the path.
void write_job_file(const std::string& path, std::uint64_t token);
// The token in `path`, or nothing when the file is absent; throws InputError
// on a file that does not hold one.
std::optional<std::uint64_t> read_job_file(const std::string& path);
// ACCEL_JOB_TOKEN, when set; throws InputError on a value that is not a
// non-zero 64-bit number.
std::optional<std::uint64_t> env_job_token();
// Parses a token ("0x..." or decimal); throws InputError naming `where`.
std::uint64_t parse_job_token(const std::string& text, const std::string& where);

// A launcher's rendezvous (accel kmeans|svm-train --distributed): the
// coordinator's ADDR:PORT and the job token, written by rank 0 once it
// listens (0600, as the token file) and read by the other ranks.
struct Rendezvous {
  std::string address;
  std::uint64_t token = 0;
};
void write_rendezvous(const std::string& path, const Rendezvous& r);
// Nothing while the file is absent; InputError naming it when it is not
// a rendezvous.
std::optional<Rendezvous> read_rendezvous(const std::string& path);

}  // namespace accel::cluster
