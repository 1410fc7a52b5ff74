// partita_bench_model: the partita side of bench/bench.py's timing workers.
//
//   partita_bench_model MODEL(.onnx|.pta) --input NAME=X.npy [--input ...] --threads N
//                       [--output OUT.npy] [--backends dnnl,host] [--feedback OUT=IN ...]
//
// Loads the model (a .pta artifact, or an .onnx compiled in memory for --backends),
// binds the inputs, runs once, writes output 0 to OUT.npy and prints one JSON line:
//   {"event":"ready","load_ms":..,"first_run_ms":..,"memory":{...}}
// where memory is read from /proc/self right after that first run. It then serves
// commands on stdin, one per line, so the driver can interleave several workers:
//   run K   -> {"event":"times","ms":[..K timings..]}
//   quit    -> exits 0
// --feedback OUT=IN (streaming models): after every run, output OUT is copied into
// input IN for the next one (a recurrent state fed back frame by frame; the timed runs
// include the copy). Any failure prints {"event":"error","message":".."} and exits 1. The same protocol
// is spoken by bench/ort_runner.js and bench/torch_runner.py.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "partita/npy.h"
#include "partita/compiler.h"
#include "partita/model.h"

namespace {

using Clock = std::chrono::steady_clock;

double msSince(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

std::string jsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// "Key:   123 kB" lines of a /proc file -> {key: kB} for the keys asked for.
std::map<std::string, long> readProcKb(const char* path, const std::vector<std::string>& keys) {
  std::map<std::string, long> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon);
    for (const std::string& k : keys)
      if (k == key) out[key] = std::strtol(line.c_str() + colon + 1, nullptr, 10);
  }
  return out;
}

// Peak RSS, RSS split by kind, and private (not shared with any other process) bytes.
std::string memoryJson() {
  auto status = readProcKb("/proc/self/status", {"VmHWM", "VmRSS", "RssAnon", "RssFile"});
  auto rollup = readProcKb("/proc/self/smaps_rollup", {"Private_Clean", "Private_Dirty", "Shared_Clean"});
  std::ostringstream os;
  os << "{\"peak_rss_kb\":" << status["VmHWM"] << ",\"rss_kb\":" << status["VmRSS"]
     << ",\"rss_anon_kb\":" << status["RssAnon"] << ",\"rss_file_kb\":" << status["RssFile"]
     << ",\"private_clean_kb\":" << rollup["Private_Clean"] << ",\"private_dirty_kb\":" << rollup["Private_Dirty"]
     << ",\"shared_clean_kb\":" << rollup["Shared_Clean"] << "}";
  return os.str();
}

void emit(const std::string& json) {
  std::cout << json << "\n";
  std::cout.flush();
}

struct Args {
  std::string model;
  std::vector<std::pair<std::string, std::string>> inputs;
  std::string output;
  std::vector<std::string> backends;  // for an .onnx; empty: the compiler's default
  std::vector<std::pair<std::string, std::string>> feedback;  // output -> input
  int threads = 1;
};

Args parseArgs(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--input") {
      std::string spec = value();
      auto eq = spec.find('=');
      if (eq == std::string::npos) throw std::runtime_error("--input expects NAME=PATH, got " + spec);
      a.inputs.emplace_back(spec.substr(0, eq), spec.substr(eq + 1));
    } else if (arg == "--feedback") {
      std::string spec = value();
      auto eq = spec.find('=');
      if (eq == std::string::npos) throw std::runtime_error("--feedback expects OUT=IN, got " + spec);
      a.feedback.emplace_back(spec.substr(0, eq), spec.substr(eq + 1));
    } else if (arg == "--threads") {
      a.threads = std::stoi(value());
    } else if (arg == "--output") {
      a.output = value();
    } else if (arg == "--backends") {
      std::istringstream list(value());
      for (std::string b; std::getline(list, b, ',');)
        if (!b.empty()) a.backends.push_back(b);
    } else if (!arg.empty() && arg[0] != '-' && a.model.empty()) {
      a.model = arg;
    } else {
      throw std::runtime_error("unknown argument " + arg);
    }
  }
  if (a.model.empty()) throw std::runtime_error("usage: partita_bench_model MODEL --input NAME=X.npy --threads N");
  return a;
}

bool endsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

int serve(const Args& args) {
  partita::CompileOptions options;
  options.threads = args.threads;
  if (!args.backends.empty()) options.backends = args.backends;
  auto t0 = Clock::now();
  std::shared_ptr<const partita::Model> model =
      endsWith(args.model, ".onnx") ? partita::compileOnnx(args.model, options) : partita::Model::load(args.model, {args.threads});
  double load_ms = msSince(t0);

  partita::Session session(model);
  std::vector<partita::Tensor> held;
  held.reserve(args.inputs.size());
  for (const auto& [name, path] : args.inputs) {
    held.push_back(partita::readNpy(path));
    session.setInput(name, held.back());
  }

  // Each fed-back state: the output's bytes copied into the bound input tensor.
  auto feedBack = [&] {
    for (const auto& [out, in] : args.feedback) {
      size_t k = 0;
      while (k < args.inputs.size() && args.inputs[k].first != in) ++k;
      if (k == args.inputs.size()) throw std::runtime_error("--feedback: no --input named " + in);
      const partita::Tensor& o = session.output(out);
      if (o.nbytes() != held[k].nbytes() || o.dtype() != held[k].dtype())
        throw std::runtime_error("--feedback: output " + out + " does not fit input " + in);
      std::memcpy(held[k].data(), o.data(), o.nbytes());
    }
  };

  t0 = Clock::now();
  session.run();
  double first_ms = msSince(t0);
  std::string memory = memoryJson();
  if (!args.output.empty()) partita::writeNpy(args.output, session.outputs().at(0).view());
  feedBack();

  std::ostringstream ready;
  ready << "{\"event\":\"ready\",\"load_ms\":" << load_ms << ",\"first_run_ms\":" << first_ms
        << ",\"memory\":" << memory << "}";
  emit(ready.str());

  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream cmd(line);
    std::string verb;
    cmd >> verb;
    if (verb == "quit") return 0;
    if (verb != "run") throw std::runtime_error("unknown command: " + line);
    int k = 0;
    cmd >> k;
    std::ostringstream out;
    out << "{\"event\":\"times\",\"ms\":[";
    for (int i = 0; i < k; ++i) {
      auto s = Clock::now();
      session.run();
      feedBack();
      out << (i ? "," : "") << msSince(s);
    }
    out << "]}";
    emit(out.str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return serve(parseArgs(argc, argv));
  } catch (const std::exception& e) {
    emit("{\"event\":\"error\",\"message\":" + jsonString(e.what()) + "}");
    return 1;
  }
}
