// How the idle threads of a run's OpenMP team wait: spin, or sleep (docs/threads.md).
//
// A thread of the team with nothing to do (between two parallel regions, or at a
// barrier for its partner's share) either spins, and starts the next region within
// nanoseconds, or sleeps, and takes tens of microseconds to wake: on the 2-vCPU VM of
// docs/benchmarks.md sleeping at once made the bench models 16-98% slower at 2 threads
// (a region or two per operator). Spinning loses far worse when other processes keep
// the cores busy: a spinning thread burns the time slice its partner needs, or shares a
// core with it, and runs took 10 to 100 times longer.
//
// So each run on LLVM's OpenMP runtime (libomp: kmp_set_blocktime sets, per calling
// thread, how long its team's idle threads spin before they sleep) starts by counting
// the machine's runnable threads (/proc/loadavg): when more were runnable than the
// machine has CPUs at this run's start and the one before (once may be a passing
// thread), others would take the CPUs a spinning team needs, and it theirs.
//   * spin mode (block time kTeamWaitSpinMs), kept while that is not so and while the
//     team gets its CPUs: between steps, at most once a millisecond, the team's threads'
//     run delays (time spent runnable, waiting for a CPU: /proc/self/task/<tid>/schedstat)
//     are read, and each millisecond of run time in which the team waited for more than
//     a fifth of it is contended. After 8 contended milliseconds in a row (fewer are
//     often a thread woken late, or both threads put on one CPU after sleeping, until
//     the kernel moves one), the team sleeps at once (block time 0) from the next region
//     on: block mode.
//   * block mode: a run whose steps are short (the last run's mean under
//     kTeamWaitOneThreadStepNs) runs on a team of one, the calling thread alone
//     (PARTITA_THREAD_WAIT=adaptive-team keeps the team, for results that never depend
//     on the load, even in the last bits): a
//     sleeping worker is woken at every region, and the barrier waits until it got a
//     CPU. After a back-off (20 ms, doubled after each failed try up to 2 s) a
//     run tries spin mode again, watched as above, unless others are runnable as said.
//     Then the team still tries once a minute; when such a try goes well, the runnable
//     others do not compete (a job at a lower priority), and they are not counted any
//     more until the team is seen waiting again.
//
// Nothing happens per run when the process's OpenMP calls are served by another runtime
// (GCC's libgomp reads its spin from OMP_WAIT_POLICY / GOMP_SPINCOUNT when it loads),
// when the user chose (PARTITA_THREAD_WAIT=spin|block, or KMP_BLOCKTIME set), for runs
// with one thread, or inside an OpenMP region. State is per calling thread, as each has
// its own team: sessions on different threads adapt on their own.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>

namespace partita::runtime {

// The policy's numbers (docs/threads.md has the measurements behind them).
inline constexpr int kTeamWaitSpinMs = 10;               // spin mode: sleep after 10 ms without work
inline constexpr int64_t kTeamWaitIntervalNs = 1'000'000;  // run delays judged per ms of run time
inline constexpr int64_t kTeamWaitDelayShare = 5;          // an interval is contended: waited > 1/5 of it
inline constexpr int kTeamWaitContendedIntervals = 8;      // this many in a row: block mode
inline constexpr std::chrono::milliseconds kTeamWaitFirstBackoff{20};
inline constexpr std::chrono::milliseconds kTeamWaitMaxBackoff{2000};
inline constexpr std::chrono::seconds kTeamWaitForceRetry{60};
// adaptive: block mode runs on a team of one while the last run's steps took
// less than this on average (MobileNetV2, EfficientNet-B0, BERT: 0.1-0.3 ms a step with
// other processes busy; ResNet-18 1.3-2 ms, which a team of one made 2x slower).
inline constexpr int64_t kTeamWaitOneThreadStepNs = 1'000'000;

// The decisions of the adaptive policy, apart from where their inputs come from.
class TeamWaitPolicy {
 public:
  using Clock = std::chrono::steady_clock;

  // At the start of a run: true when the team spins this run (and the run is watched
  // with observe()), false when it sleeps at once. `others_runnable()` is asked at every
  // run's start: whether more threads are runnable now than the machine has CPUs. When
  // they were at this start and the one before (once may be a passing thread), a
  // spinning team goes to block mode, and a sleeping one holds back its try, at most
  // until kTeamWaitForceRetry after the team last spun.
  template <typename OthersRunnable>
  bool startRun(Clock::time_point now, OthersRunnable&& others_runnable) {
    const bool others = heed_runnable_ && others_runnable();
    const bool held = others && others_before_;
    others_before_ = others;
    if (!blocking_) {
      if (!held) return true;
      toBlock(now);
      return false;
    }
    if (now < retry_at_) return false;
    if (held && now < spun_at_ + kTeamWaitForceRetry) {
      retry_at_ = now + backoff_;
      return false;
    }
    retrying_ = true;
    forced_ = held;
    blocking_ = false;
    spun_at_ = now;
    return true;
  }

  // During spin runs: the team waited `waited_ns` for CPUs in the last `interval_ns`
  // (at least kTeamWaitIntervalNs) of run time, which may span several short runs. True
  // when this switches to block mode (the caller then makes the team sleep at once).
  bool observe(Clock::time_point now, int64_t waited_ns, int64_t interval_ns) {
    if (blocking_) return false;
    if (waited_ns * kTeamWaitDelayShare <= interval_ns) {
      contended_ = 0;
      retrying_ = false;  // spinning went well: the next contention backs off from the start
      // A forced try went well although others were runnable: they do not compete (a
      // lower priority); stop asking until the team is seen waiting again.
      if (forced_) heed_runnable_ = false;
      forced_ = false;
      return false;
    }
    if (++contended_ < kTeamWaitContendedIntervals) return false;
    heed_runnable_ = true;
    toBlock(now);
    return true;
  }

  bool blocking() const { return blocking_; }
  Clock::duration backoff() const { return backoff_; }
  Clock::time_point retryAt() const { return retry_at_; }
  int switchesToBlock() const { return switches_to_block_; }

 private:
  void toBlock(Clock::time_point now) {
    if (retrying_) {
      backoff_ = std::min<Clock::duration>(backoff_ * 2, kTeamWaitMaxBackoff);
    } else {
      backoff_ = kTeamWaitFirstBackoff;
      spun_at_ = now;
    }
    blocking_ = true;
    retrying_ = false;
    forced_ = false;
    contended_ = 0;
    retry_at_ = now + backoff_;
    ++switches_to_block_;
  }

  bool blocking_ = false;
  bool retrying_ = false;  // spinning is a try after block mode, not yet seen to go well
  bool forced_ = false;    // ... made although others were runnable
  bool others_before_ = false;  // others were runnable at the last run's start
  bool heed_runnable_ = true;  // whether others runnable count (see observe)
  int contended_ = 0;      // contended intervals in a row
  Clock::time_point retry_at_{};
  Clock::time_point spun_at_{};  // when the team last spun: left spin mode, or tried it
  Clock::duration backoff_ = kTeamWaitFirstBackoff;
  int switches_to_block_ = 0;
};

// The policy of one run on the calling thread, from construction to destruction
// (GraphExecutor::run). With adaptive (not adaptive-team), a run of short steps that starts in block
// mode runs on a team of one: the scope sets the calling thread's OpenMP team size to
// 1 and gives back `threads` when it ends (the oneDNN module then runs primitives made
// for one thread).
class TeamWaitScope {
 public:
  explicit TeamWaitScope(int threads);
  ~TeamWaitScope();
  TeamWaitScope(const TeamWaitScope&) = delete;
  TeamWaitScope& operator=(const TeamWaitScope&) = delete;

 private:
  bool active_ = false;
  int restore_threads_ = 0;  // the team size to set back (block mode ran on one)
  // While on a team of one host kernels split their work as for the team
  // (kernels::setSplitThreads); the split to set back.
  int restore_split_ = 0;
};

// Between two steps of a run (executor steps, oneDNN primitives): reads a clock, and at
// most once a millisecond the team's run delays. Outside a TeamWaitScope: nothing.
void teamWaitCheckpoint();

// What decides the wait in this process, for docs, tools and tests.
struct TeamWaitInfo {
  std::string runtime;  // the library serving omp_* and GOMP_* calls (its file name), or "unknown"
  std::string policy;   // "adaptive", "adaptive-team", "spin", "block", or "runtime default (...)" when partita
                        // leaves it alone
  bool adaptive = false;
  bool sees_runnable = false;  // /proc/loadavg is readable (other runnable threads are seen)
};
TeamWaitInfo teamWaitInfo();
// Whether runs may start on a team of one (PARTITA_THREAD_WAIT adaptive, the default, with
// LLVM's runtime): modules then keep what they need to make one-thread primitives.
bool teamWaitMayRunAlone();

// The calling thread's state, for tests: whether its team sleeps at once now, how many
// times its runs switched to block mode, and how many runs spun (watched).
struct TeamWaitState {
  bool blocking = false;
  int switches_to_block = 0;
  int watched_runs = 0;
  int one_thread_runs = 0;  // runs started in block mode, on a team of one
};
TeamWaitState teamWaitState();

// The library that serves `symbol` for the loaded object whose file name contains
// `object` (read from that object's resolved PLT slot, x86-64), e.g. which OpenMP
// runtime libdnnl's GOMP_parallel calls go to; "" when the object is not loaded, the
// slot is not bound yet, or on other architectures.
std::string libraryServing(const char* object, const char* symbol);

// For tests: the summed run delay (ns spent runnable, waiting for a CPU) of the calling
// thread's team of `threads` threads, as the adaptive policy reads it; -1 when it cannot.
int64_t teamRunDelayNs(int threads);

}  // namespace partita::runtime
