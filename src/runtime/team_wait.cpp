#include "runtime/team_wait.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/op_util.h"
#include "partita/error.h"

namespace partita::runtime {

namespace {

using Clock = TeamWaitPolicy::Clock;

// LLVM's OpenMP runtime frees a team's extra threads when the team shrinks and takes
// them again when it grows: about 5 us per change of team size, which partita makes
// between one-thread steps (stepOnOneThread) and team steps many times a run (the
// dynamic-int8 encoder at two threads: 2.55 ms a run, 2.23 ms with the threads kept).
// The runtime reads these settings when it starts, so they are set while the program
// loads, before any OpenMP call of this library; a user's own values stay.
[[maybe_unused]] const bool kHotTeams = [] {
  setenv("KMP_HOT_TEAMS_MODE", "1", 0);
  setenv("KMP_HOT_TEAMS_MAX_LEVEL", "2", 0);
  return true;
}();

int64_t nsBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(b - a).count();
}

enum class Policy { kAdaptive, kSpin, kBlock, kLeave };

struct Process {
  using SetBlocktime = void (*)(int);
  SetBlocktime set_blocktime = nullptr;
  Policy policy = Policy::kLeave;
  std::string runtime = "unknown";
  std::string policy_text;
  std::string error;  // a bad PARTITA_THREAD_WAIT
  int loadavg_fd = -1;  // /proc/loadavg: its fourth field counts the runnable threads now
  bool alone = false;   // adaptive (not adaptive-team): block mode runs short steps on a team of one
  int cpus = 1;          // online CPUs
};

std::string baseName(const char* path) {
  if (!path) return "unknown";
  const char* slash = std::strrchr(path, '/');
  return slash ? slash + 1 : path;
}

bool isLlvmRuntime(const std::string& name) {
  return name.rfind("libomp", 0) == 0 || name.rfind("libiomp", 0) == 0;
}

// The library that serves this code's OpenMP calls: the one omp_get_max_threads resolved
// to (with -fPIC its address comes from the GOT, as every call's does).
void findRuntime(Process& p) {
  Dl_info info{};
  void* fn = reinterpret_cast<void*>(&omp_get_max_threads);
  if (!dladdr(fn, &info) || !info.dli_fname) return;
  p.runtime = baseName(info.dli_fname);
  if (!isLlvmRuntime(p.runtime) && p.runtime.rfind("libgomp", 0) != 0) {
    // A canonical PLT address in a non-PIE executable: ask the dynamic linker instead.
    void* sym = dlsym(RTLD_DEFAULT, "omp_get_max_threads");
    if (sym && dladdr(sym, &info) && info.dli_fname) p.runtime = baseName(info.dli_fname);
  }
  if (!isLlvmRuntime(p.runtime)) return;
  // kmp_set_blocktime of that same library (another copy may be loaded, serving nothing).
  if (void* lib = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD)) {
    p.set_blocktime = reinterpret_cast<Process::SetBlocktime>(dlsym(lib, "kmp_set_blocktime"));
    dlclose(lib);
  }
}

Process detect() {
  Process p;
  findRuntime(p);
  const char* choice = std::getenv("PARTITA_THREAD_WAIT");
  std::string want = choice ? choice : "";
  if (!want.empty() && want != "adaptive" && want != "adaptive-team" && want != "adaptive-alone" && want != "spin" &&
      want != "block") {
    p.error = "PARTITA_THREAD_WAIT='" + want + "': expected adaptive, adaptive-team, spin or block";
    return p;
  }
  if (!p.set_blocktime) {
    p.policy_text = "runtime default (" + p.runtime +
                    (p.runtime.rfind("libgomp", 0) == 0 ? ": OMP_WAIT_POLICY, GOMP_SPINCOUNT)" : ")");
    return p;
  }
  if (want.empty()) {
    if (const char* bt = std::getenv("KMP_BLOCKTIME")) {
      p.policy_text = std::string("runtime default (KMP_BLOCKTIME=") + bt + ")";
      return p;
    }
    want = "adaptive";
  }
  if (want == "adaptive-alone") want = "adaptive";  // its name while it was not the default
  p.policy = want == "spin" ? Policy::kSpin : want == "block" ? Policy::kBlock : Policy::kAdaptive;
  p.policy_text = want;
  p.alone = want == "adaptive";
  if (p.policy == Policy::kAdaptive) p.loadavg_fd = ::open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
  p.cpus = std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
  return p;
}

const Process& process() {
  static const Process p = detect();
  return p;
}

// Reads the number after `key` in the first line of the file behind fd (pread from 0: a
// /proc file is generated anew). -1 when it cannot.
int64_t readCounter(int fd, const char* key, int field) {
  char buf[256];
  const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  if (n <= 0) return -1;
  buf[n] = '\0';
  const char* at = buf;
  if (key) {
    at = std::strstr(buf, key);
    if (!at) return -1;
    at += std::strlen(key);
  }
  char* end = nullptr;
  unsigned long long v = std::strtoull(at, &end, 10);
  for (int i = 0; i < field; ++i) {
    if (end == at) return -1;
    at = end;
    v = std::strtoull(at, &end, 10);
  }
  return end == at ? -1 : static_cast<int64_t>(v);
}

// Threads of the whole machine runnable right now (running or waiting for a CPU), or
// -1: "a/b" in /proc/loadavg, a being the kernel's nr_running().
int64_t runnableNow() {
  const int fd = process().loadavg_fd;
  if (fd < 0) return -1;
  char buf[128];
  const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  if (n <= 0) return -1;
  buf[n] = '\0';
  const char* slash = std::strchr(buf, '/');
  if (!slash) return -1;
  const char* at = slash;
  while (at > buf && at[-1] != ' ') --at;
  char* end = nullptr;
  const long v = std::strtol(at, &end, 10);
  return end == slash ? v : -1;
}

// Whether more threads are runnable now than the machine has CPUs (the team's own
// counted as runnable, though in block mode its workers may sleep): then a spinning
// team would take CPUs others wait for. False when unknown.
bool othersRunnable() {
  const int64_t r = runnableNow();
  return r >= 0 && r > int64_t(process().cpus);
}

// One calling thread's team and its policy.
struct ThreadState {
  // The team: a schedstat file per thread; its second field is the ns the thread spent
  // runnable, waiting for a CPU.
  int team_threads = 0;
  std::vector<int> fds;
  bool unreadable = false;  // no schedstat here: spin, unwatched
  TeamWaitPolicy policy;
  int watched_runs = 0;
  int one_thread_runs = 0;
  // The run's start and its steps (checkpoints), and the last run's mean step time.
  Clock::time_point run_start{};
  int64_t steps = 0;
  int64_t last_step_ns = 0;
  // The current run: the team's delay and the time at the last reading; the run time
  // and the delay gathered since the last judged interval.
  bool in_run = false;
  bool watching = false;
  Clock::time_point mark_time{};
  int64_t mark_delay = 0;
  int64_t interval_ns = 0, waited_ns = 0;

  ~ThreadState() { closeTeam(); }

  void closeTeam() {
    for (int fd : fds) ::close(fd);
    fds.clear();
    team_threads = 0;
  }

  // Records the thread ids of this thread's team (the hot team OpenMP reuses for the
  // run's regions) and opens their schedstat files.
  void captureTeam(int threads) {
    closeTeam();
    std::vector<long> tids(size_t(threads), 0);
#pragma omp parallel num_threads(threads)
    {
      const int i = omp_get_thread_num();
      if (i < threads) tids[size_t(i)] = static_cast<long>(gettid());
    }
    for (long tid : tids) {
      if (!tid) continue;
      const std::string path = "/proc/self/task/" + std::to_string(tid) + "/schedstat";
      const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) {
        closeTeam();
        unreadable = true;
        return;
      }
      fds.push_back(fd);
    }
    team_threads = threads;
  }

  // Sum of the team's run delays in ns, or -1 when a file cannot be read.
  int64_t teamDelay() const {
    int64_t sum = 0;
    for (int fd : fds) {
      const int64_t wait = readCounter(fd, nullptr, 1);
      if (wait < 0) return -1;
      sum += wait;
    }
    return sum;
  }

  // Adds the run time and the team's delay since the last reading to the interval, and
  // judges the interval once it is long enough.
  void measure(Clock::time_point now) {
    const int64_t delay = teamDelay();
    if (delay < 0) {  // a thread of the team is gone: capture it again next run
      watching = false;
      team_threads = 0;
      interval_ns = waited_ns = 0;
      return;
    }
    interval_ns += nsBetween(mark_time, now);
    waited_ns += delay - mark_delay;
    mark_time = now;
    mark_delay = delay;
    if (interval_ns < kTeamWaitIntervalNs) return;
    const bool switched = policy.observe(now, waited_ns, interval_ns);
    interval_ns = waited_ns = 0;
    if (switched) {
      watching = false;
      process().set_blocktime(0);  // the team's next regions
    }
  }
};

thread_local ThreadState t_state;

}  // namespace

TeamWaitScope::TeamWaitScope(int threads) {
  const Process& p = process();
  if (!p.error.empty()) throw Error(ErrorCode::kInvalidArgument, p.error);
  ThreadState& s = t_state;
  if (threads <= 1 || p.policy == Policy::kLeave || s.in_run || omp_in_parallel()) return;
  active_ = true;
  s.in_run = true;
  s.watching = false;
  if (p.policy != Policy::kAdaptive) {
    p.set_blocktime(p.policy == Policy::kSpin ? kTeamWaitSpinMs : 0);
    return;
  }
  const Clock::time_point now = Clock::now();
  s.run_start = now;
  s.steps = 0;
  if (!s.policy.startRun(now, [] { return othersRunnable(); })) {
    s.interval_ns = s.waited_ns = 0;
    p.set_blocktime(0);
    // Block mode wakes the sleeping workers at every region and waits at every barrier
    // for them to get a CPU: when the steps are short (the last run's mean), the run's
    // team is the calling thread alone. Long steps keep the team, whose share of the
    // CPUs then outweighs those waits. A team of one runs other primitives (oneDNN's
    // one-thread twins); where one of them sums in another order than the team's, a
    // run's last bits depend on the machine's load, which adaptive-team rules out
    // (docs/threads.md: none of the bench models differ).
    if (p.alone && s.last_step_ns < kTeamWaitOneThreadStepNs) {
      omp_set_num_threads(1);
      restore_threads_ = threads;
      restore_split_ = kernels::setSplitThreads(threads);
      ++s.one_thread_runs;
    }
    return;
  }
  p.set_blocktime(kTeamWaitSpinMs);
  // Watch the run: the team's run delays from now on.
  if (s.unreadable) return;  // no schedstat: the runtime's spin-then-sleep, unwatched
  if (s.team_threads != threads) s.captureTeam(threads);
  const int64_t team = s.fds.empty() ? -1 : s.teamDelay();
  if (team < 0) {
    s.team_threads = 0;
    return;
  }
  s.mark_delay = team;
  s.mark_time = now;
  s.watching = true;
  ++s.watched_runs;
}

TeamWaitScope::~TeamWaitScope() {
  if (!active_) return;
  if (restore_threads_) {
    omp_set_num_threads(restore_threads_);
    kernels::setSplitThreads(restore_split_);
  }
  ThreadState& s = t_state;
  if (s.steps > 0) s.last_step_ns = nsBetween(s.run_start, Clock::now()) / s.steps;
  if (s.watching) s.measure(Clock::now());
  s.watching = false;
  s.in_run = false;
}

void teamWaitCheckpoint() {
  ThreadState& s = t_state;
  ++s.steps;
  if (!s.watching) return;
  const Clock::time_point now = Clock::now();
  if (s.interval_ns + nsBetween(s.mark_time, now) < kTeamWaitIntervalNs) return;
  s.measure(now);
}

TeamWaitInfo teamWaitInfo() {
  const Process& p = process();
  return {p.runtime, p.error.empty() ? p.policy_text : p.error, p.policy == Policy::kAdaptive,
          p.loadavg_fd >= 0};
}

bool teamWaitMayRunAlone() {
  const Process& p = process();
  return p.policy == Policy::kAdaptive && p.alone;
}

TeamWaitState teamWaitState() {
  const ThreadState& s = t_state;
  return {s.policy.blocking(), s.policy.switchesToBlock(), s.watched_runs, s.one_thread_runs};
}

int64_t teamRunDelayNs(int threads) {
  ThreadState& s = t_state;
  if (s.unreadable) return -1;
  if (s.team_threads != threads) s.captureTeam(threads);
  return s.fds.empty() ? -1 : s.teamDelay();
}

namespace {

struct BoundQuery {
  const char* object;
  const char* symbol;
  std::string found;
};

// dl_iterate_phdr callback: in the loaded object whose file name contains q->object,
// finds the PLT slot of q->symbol (x86-64 JUMP_SLOT relocations) and names the library
// its resolved address lies in.
int findBound(dl_phdr_info* info, size_t, void* data) {
  auto* q = static_cast<BoundQuery*>(data);
  if (!info->dlpi_name || !std::strstr(info->dlpi_name, q->object)) return 0;
#if defined(__x86_64__)
  const ElfW(Dyn)* dyn = nullptr;
  for (int i = 0; i < info->dlpi_phnum; ++i)
    if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
      dyn = reinterpret_cast<const ElfW(Dyn)*>(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
  if (!dyn) return 1;
  // The dynamic linker may have relocated these addresses in place, or not.
  auto at = [&](ElfW(Addr) p) { return p < info->dlpi_addr ? p + info->dlpi_addr : p; };
  const ElfW(Sym)* symtab = nullptr;
  const char* strtab = nullptr;
  const ElfW(Rela)* jmprel = nullptr;
  size_t pltrelsz = 0;
  for (const ElfW(Dyn)* d = dyn; d->d_tag != DT_NULL; ++d) {
    if (d->d_tag == DT_SYMTAB) symtab = reinterpret_cast<const ElfW(Sym)*>(at(d->d_un.d_ptr));
    if (d->d_tag == DT_STRTAB) strtab = reinterpret_cast<const char*>(at(d->d_un.d_ptr));
    if (d->d_tag == DT_JMPREL) jmprel = reinterpret_cast<const ElfW(Rela)*>(at(d->d_un.d_ptr));
    if (d->d_tag == DT_PLTRELSZ) pltrelsz = d->d_un.d_val;
  }
  if (!symtab || !strtab || !jmprel) return 1;
  for (size_t i = 0; i < pltrelsz / sizeof(ElfW(Rela)); ++i) {
    const ElfW(Rela)& r = jmprel[i];
    if (ELF64_R_TYPE(r.r_info) != R_X86_64_JUMP_SLOT) continue;
    if (std::strcmp(strtab + symtab[ELF64_R_SYM(r.r_info)].st_name, q->symbol) != 0) continue;
    void* target = *reinterpret_cast<void* const*>(info->dlpi_addr + r.r_offset);
    Dl_info where{};
    if (dladdr(target, &where) && where.dli_fname && !std::strstr(where.dli_fname, q->object))
      q->found = baseName(where.dli_fname);  // else: not bound yet (lazy binding)
    break;
  }
#endif
  return 1;
}

}  // namespace

std::string libraryServing(const char* object, const char* symbol) {
  BoundQuery q{object, symbol, {}};
  dl_iterate_phdr(findBound, &q);
  return q.found;
}

}  // namespace partita::runtime

