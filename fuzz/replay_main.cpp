// Replays inputs through a fuzz target's LLVMFuzzerTestOneInput without libFuzzer:
// the normal build links each target's body with this driver (<target>_replay), and
// CTest runs it over the committed seeds and findings (fuzz/corpus/<target>/,
// fuzz/findings/<target>/), so a fixed finding stays fixed in every build -- under
// ASan+UBSan in `make asan`. Arguments are files or folders (each regular file in a
// folder, in name order). A target that crashes ends the process (as under libFuzzer);
// otherwise the driver prints how many inputs it ran and exits 0.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

bool replayFile(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "replay: cannot read %s\n", p.c_str());
    return false;
  }
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::fprintf(stderr, "replay: %s (%zu bytes)\n", p.c_str(), bytes.size());
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  size_t ran = 0;
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path arg(argv[i]);
    std::error_code ec;
    if (std::filesystem::is_directory(arg, ec)) {
      std::vector<std::filesystem::path> files;
      for (const auto& e : std::filesystem::directory_iterator(arg))
        if (e.is_regular_file() && e.path().filename().string()[0] != '.') files.push_back(e.path());
      std::sort(files.begin(), files.end());
      for (const auto& f : files) {
        if (!replayFile(f)) return 2;
        ++ran;
      }
    } else {
      if (!replayFile(arg)) return 2;
      ++ran;
    }
  }
  std::printf("replay: %zu inputs, no crash\n", ran);
  return 0;
}
