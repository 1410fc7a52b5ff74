// `partita conformance DIR...`: runs ONNX backend test cases (a folder holding
// model.onnx and test_data_set_*/{input,output}_N.pb) through the compiler (import,
// optimize, partition over --backends, as `partita compile` does) and the graph
// executor, and compares every output with ONNX's backend tolerances. Each case runs
// in a forked child process, so a crash, a runaway allocation or a hang in one case
// is reported and the run goes on.
// The case format, running one case and the comparison live in conformance_case.cpp;
// this file holds the process pool and the report.
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
#include <string>
#include <vector>

#include "kernels/op_util.h"
#include "partita/compiler.h"
#include "partita/error.h"
#include "tools/cli.h"
#include "tools/cli_util.h"
#include "tools/conformance_case.h"

namespace partita::cli {

namespace {

namespace fs = std::filesystem;

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
    CaseResult r = runCaseCatching(c, opt.compile);
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
      results[i] = runCaseCatching(cases[i], opt.compile);
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
  for (const auto& entry : totals) {
    // Not a structured binding: clang before 16 cannot capture one in a lambda.
    const std::string& root = entry.first;
    const auto& counts = entry.second;
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
