// What the readers' error messages share: a bad value shown as text (a NUL
// byte inside one had cut the whole message short), and the one-line
// refusal of a path that is not a regular file.
#pragma once

#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>

#include "accel/error.hpp"

namespace accel::io {

// s between quotes, control bytes and bytes past ASCII as \xNN, at most
// 64 of its characters (the rest as "...").
inline std::string quoted(std::string_view s) {
  std::string out = "'";
  std::size_t shown = 0;
  for (const char ch : s) {
    if (++shown > 64) {
      out += "...";
      break;
    }
    const auto c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += ch;
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    }
  }
  return out + "'";
}

// InputError unless path names a file that exists and is not a directory.
inline void require_file(const std::string& path) {
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(st)) throw InputError(path + ": no such file");
  if (std::filesystem::is_directory(st)) throw InputError(path + ": is a directory, not a file");
}

}  // namespace accel::io
