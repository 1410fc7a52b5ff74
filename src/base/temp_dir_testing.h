// Test support: a fresh temporary folder per test, removed (with everything in it,
// read-only entries included) when the TempDir goes away.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>

namespace partita::testing {

class TempDir {
 public:
  // A new folder beneath `parent` (the system's temporary folder unless given).
  explicit TempDir(const std::string& prefix = "partita_test",
                   const std::filesystem::path& parent = std::filesystem::temp_directory_path()) {
    std::string tmpl = (parent / (prefix + "_XXXXXX")).string();
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed for " + tmpl);
    root_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& root() const { return root_; }
  std::string path(const std::string& rel) const { return (root_ / rel).string(); }
  // Writes `bytes` to `rel` (its folder created), returns the path.
  std::string write(const std::string& rel, const std::string& bytes) const {
    std::filesystem::create_directories((root_ / rel).parent_path());
    std::ofstream(path(rel), std::ios::binary) << bytes;
    return path(rel);
  }
  std::string read(const std::string& rel) const {
    std::ifstream in(path(rel), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  // The names directly in the folder.
  std::set<std::string> list() const {
    std::set<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(root_)) names.insert(e.path().filename().string());
    return names;
  }

 private:
  std::filesystem::path root_;
};

}  // namespace partita::testing
