// `partita conformance DIR...`: runs ONNX backend test cases (a folder holding
// model.onnx and test_data_set_*/{input,output}_N.pb) through the compiler (import,
// optimize, partition over --backends, as `partita compile` does) and the graph
// executor, and compares every output with ONNX's backend tolerances. Each case runs
// in a forked child process, so a crash, a runaway allocation or a hang in one case
// is reported and the run goes on.
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "kernels/op_util.h"
#include "frontend/onnx/onnx_importer.h"
#include "partita/compiler.h"
#include "partita/error.h"
#include "runtime/executor.h"
#include "tools/cli.h"
#include "tools/cli_util.h"

namespace partita::cli {

namespace {

namespace fs = std::filesystem;

// ONNX's backend test runner defaults (onnx/backend/test/runner).
constexpr double kDefaultRtol = 1e-3;
constexpr double kDefaultAtol = 1e-7;
constexpr size_t kMaxOutputBytes = size_t(1) << 30;  // cases needing more are skipped

// Cases whose reference outputs need a looser tolerance than the default, and why.
struct ToleranceOverride {
  const char* case_name;
  double rtol;
  double atol;
  const char* reason;
};
// Filled from real runs: each entry names the reason the default is too tight. Empty
// for now: every implemented case meets ONNX's defaults.
const std::vector<ToleranceOverride> kToleranceOverrides = {};

// Cases whose test data contradicts their own model; reported as SKIP with the reason.
struct BrokenCase {
  const char* case_name;
  const char* reason;
};
constexpr BrokenCase kBrokenCases[] = {
    {"test_castlike_BFLOAT16_to_FLOAT", "input 'like' is float32[1] but the model declares float32[3,4]"},
    {"test_castlike_BFLOAT16_to_FLOAT_expanded",
     "input 'like' is float32[1] but the model declares float32[3,4]"},
    {"test_castlike_FLOAT_to_BFLOAT16", "input 'like' is bfloat16[1] but the model declares bfloat16[3,4]"},
    {"test_castlike_FLOAT_to_BFLOAT16_expanded",
     "input 'like' is bfloat16[1] but the model declares bfloat16[3,4]"},
};

enum class Status : char { kPass = 'P', kFail = 'F', kUnsupported = 'U', kError = 'E', kSkip = 'S' };

const char* statusName(Status s) {
  switch (s) {
    case Status::kPass:
      return "PASS";
    case Status::kFail:
      return "FAIL";
    case Status::kUnsupported:
      return "UNSUPPORTED";
    case Status::kError:
      return "ERROR";
    case Status::kSkip:
      return "SKIP";
  }
  return "?";
}

struct CaseResult {
  Status status = Status::kError;
  std::string message;
};

struct Case {
  std::string root;  // label of the folder it came from ("node")
  std::string name;  // the case folder's name ("test_abs")
  fs::path dir;
};

struct Options {
  std::vector<std::string> dirs;
  std::string filter;
  std::string expect_file;
  std::string write_passing;
  int threads = 0;
  int jobs = 1;
  double timeout = 300;
  bool verbose = false;
  bool no_fork = false;
  CompileFlags flags;      // --backends, --allow, --deny, --min-region-size, --shape
  CompileOptions compile;  // parsed from `flags` before the run
};

// ---- comparing -------------------------------------------------------------------

std::string multiIndex(const std::vector<int64_t>& shape, int64_t flat) {
  if (shape.empty()) return "[]";
  std::vector<int64_t> idx(shape.size());
  for (size_t i = shape.size(); i-- > 0;) {
    int64_t d = std::max<int64_t>(shape[i], 1);
    idx[i] = flat % d;
    flat /= d;
  }
  return ir::shapeStr(idx);
}

double elementAsDouble(const ir::Tensor& t, int64_t i) {
  switch (t.dtype) {
    case ir::DType::kFloat16:
      return ir::halfToFloat(t.as<uint16_t>()[i]);
    case ir::DType::kBFloat16:
      return ir::bfloat16ToFloat(t.as<uint16_t>()[i]);
    default:
      break;
  }
  double v = 0;
  PARTITA_DISPATCH_ALL(t.dtype, "compare", v = double(t.as<T>()[i]));
  return v;
}

// Integers are compared exactly as int64/uint64 (doubles would round large values).
bool integerEqual(const ir::Tensor& a, const ir::Tensor& e, int64_t i) {
  if (a.dtype == ir::DType::kUInt64) return a.as<uint64_t>()[i] == e.as<uint64_t>()[i];
  int64_t x = 0, y = 0;
  PARTITA_DISPATCH_ALL(a.dtype, "compare", x = int64_t(a.as<T>()[i]); y = int64_t(e.as<T>()[i]));
  return x == y;
}

std::string formatNumber(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  return buf;
}

// Returns an empty string when `actual` matches `expected`, else the first mismatch.
std::string compareTensors(const std::string& name, const ir::Tensor& actual, const ir::Tensor& expected,
                           double rtol, double atol) {
  if (actual.dtype != expected.dtype || actual.shape != expected.shape)
    return "output '" + name + "': got " + std::string(ir::dtypeName(actual.dtype)) +
           ir::shapeStr(actual.shape) + ", expected " + std::string(ir::dtypeName(expected.dtype)) +
           ir::shapeStr(expected.shape);
  const int64_t n = expected.numel();
  const bool floating = ir::isFloat(expected.dtype);
  int64_t first = -1, mismatches = 0;
  double max_err = 0;
  for (int64_t i = 0; i < n; ++i) {
    bool ok;
    if (floating) {
      double a = elementAsDouble(actual, i), e = elementAsDouble(expected, i);
      if (std::isnan(e) || std::isnan(a)) {
        ok = std::isnan(e) && std::isnan(a);
      } else if (std::isinf(e) || std::isinf(a)) {
        ok = a == e;
      } else {
        double err = std::fabs(a - e);
        ok = err <= atol + rtol * std::fabs(e);
        if (!ok) max_err = std::max(max_err, err);
      }
    } else {
      ok = integerEqual(actual, expected, i);
    }
    if (!ok) {
      if (first < 0) first = i;
      ++mismatches;
    }
  }
  if (first < 0) return {};
  std::string msg = "output '" + name + "' at " + multiIndex(expected.shape, first) + ": got " +
                    formatNumber(elementAsDouble(actual, first)) + ", expected " +
                    formatNumber(elementAsDouble(expected, first)) + " (" + std::to_string(mismatches) +
                    " of " + std::to_string(n) + " elements differ";
  if (floating) msg += ", max abs error " + formatNumber(max_err);
  return msg + ")";
}

// ---- one case --------------------------------------------------------------------

// input_N.pb / output_N.pb files of a data set, ordered by N.
std::vector<fs::path> numberedFiles(const fs::path& dir, const std::string& prefix) {
  std::vector<std::pair<long, fs::path>> found;
  for (const auto& entry : fs::directory_iterator(dir)) {
    std::string f = entry.path().filename().string();
    if (f.rfind(prefix, 0) != 0 || entry.path().extension() != ".pb") continue;
    std::string num = f.substr(prefix.size(), f.size() - prefix.size() - 3);
    if (num.empty() || num.find_first_not_of("0123456789") != std::string::npos) continue;
    found.emplace_back(std::stol(num), entry.path());
  }
  std::sort(found.begin(), found.end());
  std::vector<fs::path> out;
  for (auto& [n, p] : found) out.push_back(p);
  return out;
}

std::vector<fs::path> dataSets(const fs::path& dir) {
  std::vector<fs::path> sets;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.is_directory() && entry.path().filename().string().rfind("test_data_set_", 0) == 0)
      sets.push_back(entry.path());
  std::sort(sets.begin(), sets.end());
  return sets;
}

// ONNX's test data stores bfloat16 tensors as uint16 (numpy has no bfloat16): the
// bits are the bfloat16 values, so they are read as such where bfloat16 is expected.
ir::Tensor asBFloat16IfDeclared(ir::Tensor t, ir::DType want) {
  if (want == ir::DType::kBFloat16 && t.dtype == ir::DType::kUInt16) t.dtype = ir::DType::kBFloat16;
  return t;
}

CaseResult runCase(const Case& c, const Options& opt) {
  double rtol = kDefaultRtol, atol = kDefaultAtol;
  for (const auto& o : kToleranceOverrides)
    if (c.name == o.case_name) {
      rtol = o.rtol;
      atol = o.atol;
    }
  for (const auto& b : kBrokenCases)
    if (c.name == b.case_name) return {Status::kSkip, std::string("broken test data: ") + b.reason};
  std::vector<fs::path> sets = dataSets(c.dir);
  if (sets.empty()) return {Status::kError, "no test_data_set_* folder"};
  for (const auto& set : sets) {
    uintmax_t out_bytes = 0;
    for (const auto& f : numberedFiles(set, "output_")) out_bytes += fs::file_size(f);
    if (out_bytes > kMaxOutputBytes)
      return {Status::kSkip,
              "reference outputs need " + std::to_string(out_bytes >> 20) + " MiB (limit 1 GiB)"};
  }

  // The same path as `partita run model.onnx`: compile in memory, modules loaded.
  std::shared_ptr<const Model> model = compileOnnx((c.dir / "model.onnx").string(), opt.compile);
  const runtime::Executor& exec = model->executor();
  size_t static_out_bytes = 0;
  for (const runtime::IoSpec& out : exec.outputs()) {
    const ir::TensorType& t = out.type;
    if (t.isStatic()) static_out_bytes += size_t(t.numel()) * ir::dtypeSize(t.dtype);
  }
  if (exec.plannedActivationBytes() + static_out_bytes > kMaxOutputBytes)
    return {Status::kSkip, "needs " +
                               std::to_string((exec.plannedActivationBytes() + static_out_bytes) >> 20) +
                               " MiB of activations (limit 1 GiB)"};
  auto state = exec.newState();

  for (const auto& set : sets) {
    const std::string set_name = set.filename().string();
    std::vector<ir::OwnedTensor> inputs, expected;
    for (const auto& f : numberedFiles(set, "input_"))
      inputs.push_back(frontend::readTensorProtoFile(f.string()));
    for (const auto& f : numberedFiles(set, "output_"))
      expected.push_back(frontend::readTensorProtoFile(f.string()));
    if (inputs.size() != exec.inputs().size())
      return {Status::kError, set_name + " has " + std::to_string(inputs.size()) +
                                  " inputs but the model takes " + std::to_string(exec.inputs().size())};
    if (expected.size() != exec.outputs().size())
      return {Status::kError, set_name + " has " + std::to_string(expected.size()) +
                                  " outputs but the model produces " + std::to_string(exec.outputs().size())};
    std::vector<ir::Tensor> views;
    for (size_t i = 0; i < inputs.size(); ++i)
      views.push_back(asBFloat16IfDeclared(inputs[i].view(), exec.inputs()[i].type.dtype));
    std::vector<ir::OwnedTensor> actual = exec.run(*state, views);
    for (size_t i = 0; i < actual.size(); ++i) {
      ir::Tensor want = asBFloat16IfDeclared(expected[i].view(), actual[i].dtype());
      std::string diff =
          compareTensors(exec.outputs()[i].name, actual[i].view(), want, rtol, atol);
      if (!diff.empty()) return {Status::kFail, (sets.size() > 1 ? set_name + ": " : std::string()) + diff};
    }
  }
  return {Status::kPass, {}};
}

CaseResult runCaseCatching(const Case& c, const Options& opt) {
  try {
    return runCase(c, opt);
  } catch (const Error& e) {
    return {e.code() == ErrorCode::kUnsupported ? Status::kUnsupported : Status::kError,
            e.code() == ErrorCode::kUnsupported ? e.what()
                                                : std::string(errorCodeName(e.code())) + ": " + e.what()};
  } catch (const std::bad_alloc&) {
    return {Status::kError, "out of memory"};
  } catch (const std::exception& e) {
    return {Status::kError, std::string("exception: ") + e.what()};
  }
}

// ---- isolation: one child process per case ---------------------------------------

struct Child {
  size_t index = 0;
  pid_t pid = -1;
  int fd = -1;
  std::string data;
  std::chrono::steady_clock::time_point start;
};

void limitChildMemory() {
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  // A kernel that computes a wild shape gets bad_alloc instead of taking the machine.
  rlimit lim{};
  lim.rlim_cur = lim.rlim_max = rlim_t(12) << 30;
  setrlimit(RLIMIT_AS, &lim);
#endif
}

Child spawn(const Case& c, size_t index, const Options& opt) {
  int fds[2];
  if (pipe(fds) != 0) throw Error(ErrorCode::kIo, std::string("pipe failed: ") + std::strerror(errno));
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) throw Error(ErrorCode::kIo, std::string("fork failed: ") + std::strerror(errno));
  if (pid == 0) {
    close(fds[0]);
    limitChildMemory();
    CaseResult r = runCaseCatching(c, opt);
    std::string out(1, char(r.status));
    out += r.message;
    const char* p = out.data();
    size_t left = out.size();
    while (left > 0) {
      ssize_t w = write(fds[1], p, left);
      if (w <= 0) break;
      p += w;
      left -= size_t(w);
    }
    _exit(0);
  }
  close(fds[1]);
  return Child{index, pid, fds[0], {}, std::chrono::steady_clock::now()};
}

CaseResult reap(Child& ch, bool timed_out, double timeout) {
  if (timed_out) kill(ch.pid, SIGKILL);
  int status = 0;
  waitpid(ch.pid, &status, 0);
  close(ch.fd);
  if (timed_out) return {Status::kError, "timed out after " + formatNumber(timeout) + " s"};
  if (WIFSIGNALED(status))
    return {Status::kError, std::string("crashed: signal ") + std::to_string(WTERMSIG(status)) + " (" +
                                strsignal(WTERMSIG(status)) + ")"};
  if (ch.data.empty()) return {Status::kError, "the case process exited without a result"};
  return {Status(ch.data[0]), ch.data.substr(1)};
}

// ---- the run ---------------------------------------------------------------------

std::vector<Case> findCases(const std::vector<std::string>& dirs, const std::string& filter) {
  std::vector<Case> cases;
  std::regex re(filter.empty() ? std::string(".*") : filter);
  for (const std::string& d : dirs) {
    fs::path root = fs::path(d).lexically_normal();
    if (root.filename().empty()) root = root.parent_path();
    if (!fs::is_directory(root)) throw Error(ErrorCode::kInvalidArgument, "'" + d + "' is not a directory");
    if (fs::exists(root / "model.onnx")) {
      Case c{root.parent_path().filename().string(), root.filename().string(), root};
      if (std::regex_search(c.name, re)) cases.push_back(c);
      continue;
    }
    std::vector<Case> found;
    for (const auto& entry : fs::directory_iterator(root))
      if (entry.is_directory() && fs::exists(entry.path() / "model.onnx"))
        found.push_back({root.filename().string(), entry.path().filename().string(), entry.path()});
    if (found.empty())
      throw Error(ErrorCode::kInvalidArgument, "'" + d + "' holds no test case (no */model.onnx)");
    std::sort(found.begin(), found.end(), [](const Case& a, const Case& b) { return a.name < b.name; });
    for (auto& c : found)
      if (std::regex_search(c.name, re)) cases.push_back(std::move(c));
  }
  return cases;
}

std::vector<std::string> readNameList(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(ErrorCode::kIo, "cannot read '" + path + "'");
  std::vector<std::string> names;
  std::string line;
  while (std::getline(in, line)) {
    if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    size_t b = line.find_first_not_of(" \t\r"), e = line.find_last_not_of(" \t\r");
    if (b == std::string::npos) continue;
    names.push_back(line.substr(b, e - b + 1));
  }
  return names;
}

// Op types named by "... unsupported op types: Foo (opset 13; ...), ai.onnx.ml.Bar (...)".
std::vector<std::string> unsupportedOps(const std::string& message) {
  std::vector<std::string> ops;
  auto pos = message.find("unsupported op type");
  if (pos == std::string::npos) return ops;
  static const std::regex re(R"(([A-Za-z_][\w.]*) \(opset \d+)");
  std::string rest = message.substr(pos);
  for (auto it = std::sregex_iterator(rest.begin(), rest.end(), re); it != std::sregex_iterator(); ++it)
    ops.push_back((*it)[1]);
  return ops;
}

void printResult(const Case& c, const CaseResult& r, double seconds, bool verbose) {
  std::string line = std::string(statusName(r.status)) + " " + c.root + "/" + c.name;
  if (verbose) line += " (" + formatNumber(std::round(seconds * 1000) / 1000) + " s)";
  if (!r.message.empty()) {
    std::string msg = r.message;
    if (!verbose && msg.size() > 400) msg = msg.substr(0, 400) + "...";
    line += ": " + msg;
  }
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

void runConformance(Options& opt) {
  opt.compile = opt.flags.options();  // malformed flags and unknown backends fail here, not per case
  if (opt.threads > 0) opt.compile.threads = opt.threads;
  std::vector<Case> cases = findCases(opt.dirs, opt.filter);
  if (cases.empty())
    throw Error(ErrorCode::kInvalidArgument, "no case matches the filter '" + opt.filter + "'");

  std::vector<CaseResult> results(cases.size());
  std::vector<double> seconds(cases.size(), 0);
  std::vector<bool> done(cases.size(), false);
  size_t next_print = 0;
  auto flushInOrder = [&] {
    while (next_print < cases.size() && done[next_print]) {
      printResult(cases[next_print], results[next_print], seconds[next_print], opt.verbose);
      ++next_print;
    }
  };

  if (opt.no_fork) {
    for (size_t i = 0; i < cases.size(); ++i) {
      auto t0 = std::chrono::steady_clock::now();
      results[i] = runCaseCatching(cases[i], opt);
      seconds[i] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      done[i] = true;
      flushInOrder();
    }
  } else {
    std::vector<Child> running;
    size_t next = 0;
    const size_t jobs = size_t(std::max(1, opt.jobs));
    while (next < cases.size() || !running.empty()) {
      while (next < cases.size() && running.size() < jobs) {
        running.push_back(spawn(cases[next], next, opt));
        ++next;
      }
      std::vector<pollfd> fds;
      for (const Child& ch : running) fds.push_back({ch.fd, POLLIN, 0});
      poll(fds.data(), nfds_t(fds.size()), 200);
      auto now = std::chrono::steady_clock::now();
      for (size_t k = running.size(); k-- > 0;) {
        Child& ch = running[k];
        bool finished = false, timed_out = false;
        if (fds[k].revents & (POLLIN | POLLHUP | POLLERR)) {
          char buf[4096];
          ssize_t n = read(ch.fd, buf, sizeof(buf));
          if (n > 0)
            ch.data.append(buf, size_t(n));
          else
            finished = true;
        }
        double elapsed = std::chrono::duration<double>(now - ch.start).count();
        if (!finished && opt.timeout > 0 && elapsed > opt.timeout) timed_out = true;
        if (!finished && !timed_out) continue;
        results[ch.index] = reap(ch, timed_out, opt.timeout);
        seconds[ch.index] = elapsed;
        done[ch.index] = true;
        running.erase(running.begin() + long(k));
      }
      flushInOrder();
    }
  }

  // Totals per root folder, and which missing ops cost the most cases.
  std::map<std::string, std::map<Status, int>> totals;
  std::map<std::string, int> missing_ops;
  for (size_t i = 0; i < cases.size(); ++i) {
    ++totals[cases[i].root][results[i].status];
    if (results[i].status == Status::kUnsupported)
      for (const auto& op : unsupportedOps(results[i].message)) ++missing_ops[op];
  }
  if (!missing_ops.empty()) {
    std::vector<std::pair<int, std::string>> ranked;
    for (const auto& [op, n] : missing_ops) ranked.emplace_back(-n, op);
    std::sort(ranked.begin(), ranked.end());
    std::string line = "unsupported ops (cases):";
    for (size_t i = 0; i < ranked.size() && (opt.verbose || i < 30); ++i)
      line += " " + ranked[i].second + " (" + std::to_string(-ranked[i].first) + ")";
    std::printf("%s\n", line.c_str());
  }
  for (const auto& [root, counts] : totals) {
    auto get = [&](Status s) {
      auto it = counts.find(s);
      return it == counts.end() ? 0 : it->second;
    };
    int total = 0;
    for (const auto& [s, n] : counts) total += n;
    // Worded so that no test-log reader mistakes it for a runner's closing line.
    std::printf("total %s: %d cases: %d pass, %d fail, %d unsupported, %d error, %d skip\n", root.c_str(),
                total, get(Status::kPass), get(Status::kFail), get(Status::kUnsupported), get(Status::kError),
                get(Status::kSkip));
  }
  std::fflush(stdout);

  if (!opt.write_passing.empty()) {
    std::vector<std::string> passing;
    for (size_t i = 0; i < cases.size(); ++i)
      if (results[i].status == Status::kPass) passing.push_back(cases[i].name);
    std::sort(passing.begin(), passing.end());
    std::ofstream out(opt.write_passing);
    if (!out) throw Error(ErrorCode::kIo, "cannot write '" + opt.write_passing + "'");
    out << "# Conformance cases expected to pass (partita conformance --write-passing).\n";
    for (const auto& n : passing) out << n << "\n";
    if (!out) throw Error(ErrorCode::kIo, "cannot write '" + opt.write_passing + "'");
  }

  if (!opt.expect_file.empty()) {
    std::map<std::string, size_t> by_name;
    for (size_t i = 0; i < cases.size(); ++i) by_name[cases[i].name] = i;
    std::vector<std::string> missing, regressed;
    std::set<std::string> expected;
    for (const auto& name : readNameList(opt.expect_file)) {
      expected.insert(name);
      auto it = by_name.find(name);
      if (it == by_name.end()) {
        if (opt.filter.empty()) missing.push_back(name);
        continue;
      }
      if (results[it->second].status != Status::kPass)
        regressed.push_back(name + " (" + statusName(results[it->second].status) + ")");
    }
    int newly = 0;
    for (size_t i = 0; i < cases.size(); ++i)
      if (results[i].status == Status::kPass && !expected.count(cases[i].name)) ++newly;
    if (newly > 0)
      std::printf("%d passing case%s not in %s (update it with --write-passing)\n", newly,
                  newly == 1 ? "" : "s", opt.expect_file.c_str());
    if (!missing.empty() || !regressed.empty()) {
      std::string msg;
      if (!regressed.empty()) {
        msg += std::to_string(regressed.size()) + " expected case(s) did not pass:";
        for (const auto& r : regressed) msg += "\n  " + r;
      }
      if (!missing.empty()) {
        msg += std::string(msg.empty() ? "" : "\n") + std::to_string(missing.size()) +
               " expected case(s) not found:";
        for (const auto& m : missing) msg += "\n  " + m;
      }
      throw Error(ErrorCode::kInvalidArgument, msg);
    }
    std::printf("every case in %s passed\n", opt.expect_file.c_str());
  }
}

}  // namespace

void addConformanceCommand(CLI::App& app) {
  auto opt = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "conformance", "Run ONNX backend test cases (model.onnx + test_data_set_*) and compare the outputs");
  cmd->add_option("dirs", opt->dirs, "Case folders, or folders of case folders")->required();
  cmd->add_option("--filter", opt->filter, "Only cases whose name matches this regular expression");
  cmd->add_option("--expect", opt->expect_file,
                  "File of case names expected to pass ('#' comments); exit 1 listing any that did not");
  cmd->add_option("--write-passing", opt->write_passing,
                  "Write the sorted names of the passing cases to FILE");
  cmd->add_option("--threads", opt->threads, "Kernel threads per case (default: all cores)");
  cmd->add_option("-j,--jobs", opt->jobs, "Cases run at the same time, each in its own process (default 1)");
  cmd->add_option("--timeout", opt->timeout,
                  "Seconds before a case is stopped and reported as an error (default 300)");
  cmd->add_flag("--no-fork", opt->no_fork, "Run cases in this process (for debuggers; a crash ends the run)");
  cmd->add_flag("-v,--verbose", opt->verbose, "Print timings and full messages");
  opt->flags.add(cmd);
  cmd->callback([opt] { runConformance(*opt); });
}

}  // namespace partita::cli
