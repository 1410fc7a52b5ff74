// partita_bench_dynamic MODEL.onnx INPUT SHAPE... [--runs N] [--threads T] [--hint SHAPE] [--no-layout-probes] [--cpu]
//
// What symbolic shapes cost (docs/dynamic_shapes.md). MODEL.onnx has symbolic dims on
// its input INPUT; it is compiled once without --shape (the shape-polymorphic model,
// its representative shape from --hint when given) and once per SHAPE with --shape
// (fixed), all with --backends dnnl,ewise,host, in memory. For each SHAPE (e.g.
// 1x3x224x224) it prints:
//   fixed      median latency of the model compiled for that shape (steady state)
//   poly       median latency of the polymorphic model at that shape (steady state)
//   first      the polymorphic model's first run at that shape, and of it the time the
//              dnnl module takes to lower its region and create the primitives
//   kept       dnnl steps that read their weights in the stored layout although oneDNN
//              would choose another one at this shape (no repacking at run time)
#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "backend/dnnl/dnnl_module.h"
#include "partita/compiler.h"
#include "partita/model.h"
#include "runtime/graph_executor.h"

namespace {

using Clock = std::chrono::steady_clock;

double ms(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); }

// --cpu: the process's CPU time instead of the wall clock (with --threads 1, the
// latency the run would have on an idle core: other processes' time is not counted).
bool g_cpu = false;
double now() {
  if (g_cpu) {
    timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return double(t.tv_sec) * 1e3 + double(t.tv_nsec) * 1e-6;
  }
  return std::chrono::duration<double, std::milli>(Clock::now().time_since_epoch()).count();
}

std::vector<int64_t> parseShape(const std::string& s) {
  std::vector<int64_t> out;
  size_t start = 0;
  while (true) {
    size_t x = s.find('x', start);
    out.push_back(std::stoll(s.substr(start, x == std::string::npos ? std::string::npos : x - start)));
    if (x == std::string::npos) return out;
    start = x + 1;
  }
}

std::string shapeText(const std::vector<int64_t>& shape) {
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "x" : "") + std::to_string(shape[i]);
  return s;
}

partita::Tensor randomInput(const std::vector<int64_t>& shape) {
  partita::Tensor t(partita::DType::kFloat32, shape);
  uint32_t s = 12345;
  for (int64_t i = 0; i < t.numel(); ++i) {
    s = s * 1664525u + 1013904223u;
    t.as<float>()[i] = float(s >> 8) / float(1 << 24) - 0.5f;
  }
  return t;
}

// The median, or with PARTITA_BENCH_MIN set the fastest run (steadier on a busy machine).
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return std::getenv("PARTITA_BENCH_MIN") ? v.front() : v[v.size() / 2];
}

// Median latencies of two sessions, their runs interleaved (so that drift of a busy
// machine hits both alike), after warm-up runs.
std::pair<double, double> steady(partita::Session& a, partita::Session& b, int runs) {
  for (int i = 0; i < 3; ++i) {
    a.run();
    b.run();
  }
  std::vector<double> ta, tb;
  for (int i = 0; i < runs; ++i) {
    const double t0 = now();
    a.run();
    const double t1 = now();
    b.run();
    const double t2 = now();
    ta.push_back(t1 - t0);
    tb.push_back(t2 - t1);
  }
  return {median(ta), median(tb)};
}

// The dnnl module whose function 0 reads exactly the model's inputs, if any.
const partita::dnnl_backend::DnnlModule* wholeInputModule(const partita::Model& model) {
  const auto* exec = dynamic_cast<const partita::runtime::GraphExecutor*>(&model.executor());
  if (!exec) return nullptr;
  for (const partita::ir::Node& n : exec->graph().nodes) {
    if (!partita::runtime::isCallNode(n) || n.attrs.getInt("function", -1) != 0) continue;
    if (n.inputs != exec->graph().inputs) continue;
    int64_t m = n.attrs.getInt("module", -1);
    return dynamic_cast<const partita::dnnl_backend::DnnlModule*>(exec->modules().at(size_t(m)).get());
  }
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr,
                 "usage: partita_bench_dynamic MODEL.onnx INPUT SHAPE... [--runs N] [--threads T] [--hint SHAPE] "
                 "[--no-layout-probes] [--cpu]\n");
    return 2;
  }
  const std::string path = argv[1], input = argv[2];
  std::vector<std::vector<int64_t>> shapes;
  int runs = 20, threads = 2;
  std::string hint;
  bool probes = true;
  for (int i = 3; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--runs" && i + 1 < argc) runs = std::max(1, std::atoi(argv[++i]));
    else if (a == "--threads" && i + 1 < argc) threads = std::max(1, std::atoi(argv[++i]));
    else if (a == "--hint" && i + 1 < argc) hint = argv[++i];
    else if (a == "--no-layout-probes") probes = false;
    else if (a == "--cpu") g_cpu = true;
    else shapes.push_back(parseShape(a));
  }
  try {
    partita::CompileOptions options;
    options.backends = {"dnnl", "ewise", "host"};
    options.threads = threads;
    options.layout_probes = probes;
    if (!hint.empty()) options.shape_hints[input] = parseShape(hint);
    auto t0 = Clock::now();
    auto poly = partita::compileOnnx(path, options);
    std::printf("%s: polymorphic model compiled in %.0f ms (representative %s%s), %d threads, %s of %d runs%s\n",
                path.c_str(), ms(t0, Clock::now()), hint.empty() ? "default" : hint.c_str(),
                probes ? "" : ", no layout probes", threads, std::getenv("PARTITA_BENCH_MIN") ? "fastest" : "median",
                runs, g_cpu ? " (CPU time)" : "");
    std::fflush(stdout);
    const auto* module = wholeInputModule(*poly);
    std::printf("%-16s %10s %10s %8s %12s %14s %6s\n", "shape", "fixed ms", "poly ms", "poly/fix", "first ms",
                "of it: lower", "kept");
    partita::Session session(poly);
    for (const std::vector<int64_t>& shape : shapes) {
      partita::Tensor x = randomInput(shape);
      session.setInput(input, x);
      double lower = -1;
      size_t kept = 0;
      const double a = now();
      if (module) {
        std::vector<partita::ir::Tensor> in = {x.view()};
        const double l0 = now();
        module->outputShapes(0, in);  // lowers the region and creates its primitives
        lower = now() - l0;
      }
      session.run();
      const double first = now() - a;
      if (module) {
        std::vector<partita::ir::Tensor> in = {x.view()};
        kept = module->instanceFallbackSteps(0, in);
        if (std::getenv("PARTITA_BENCH_STEPS"))  // each step's oneDNN implementation at this shape
          for (const auto& st : module->instanceSteps(0, in))
            std::printf("    %-40s %s\n", st.label.c_str(), st.implementation.c_str());
      }
      if (std::getenv("PARTITA_BENCH_SCAN")) {  // layouts only: no timing
        size_t ref = 0;
        if (module) {
          std::vector<partita::ir::Tensor> in = {x.view()};
          for (const auto& st : module->instanceSteps(0, in)) ref += st.implementation.rfind("ref", 0) == 0;
        }
        std::printf("%-16s kept %zu, reference implementations %zu\n", shapeText(shape).c_str(), kept, ref);
        continue;
      }
      partita::CompileOptions fixed_options = options;
      fixed_options.shape_hints.clear();
      fixed_options.input_shapes[input] = shape;
      auto fixed = partita::compileOnnx(path, fixed_options);
      partita::Session fs(fixed);
      fs.setInput(input, x);
      const auto [p, f] = steady(session, fs, runs);
      std::printf("%-16s %10.3f %10.3f %8.3f %12.1f %14.1f %6zu\n", shapeText(shape).c_str(), f, p, p / f, first,
                  lower, kept);
      std::fflush(stdout);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
