// partita_bench_load MODEL.pta [--repeat N]: times Model::load of an artifact N times
// in one process (the file stays in the page cache after the first) and prints the
// best and the median in milliseconds. Driven by bench/load_chain.py.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "partita/model.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: partita_bench_load MODEL.pta [--repeat N]\n");
    return 2;
  }
  std::string path = argv[1];
  int repeat = 3;
  if (argc >= 4 && std::string(argv[2]) == "--repeat") repeat = std::max(1, std::atoi(argv[3]));
  try {
    std::vector<double> ms;
    size_t arena = 0;
    for (int i = 0; i < repeat; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      auto model = partita::Model::load(path);
      auto t1 = std::chrono::steady_clock::now();
      arena = model->plannedActivationBytes();
      ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    std::printf("load: best %.1f ms, median %.1f ms over %d loads (planned activations %zu bytes)\n", ms.front(),
                ms[ms.size() / 2], repeat, arena);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
