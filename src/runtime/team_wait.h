// How the idle threads of a run's OpenMP team wait: spin, or sleep (docs/threads.md).
//
// A thread of the team with nothing to do (between two parallel regions, or at a
// barrier for its partner's share) either spins, and starts the next region within
// nanoseconds, or sleeps, and takes tens of microseconds to wake: on the 2-vCPU VM of
// docs/benchmarks.md sleeping at once made MobileNetV2 at 2 threads 35% slower and
// SqueezeNet 90% (a region or two per operator). Spinning loses far worse when other
// processes keep the cores busy: a spinning thread burns the time slice its partner
// needs, or shares a core with it, and runs took 10 to 100 times longer.
//
// So each run on LLVM's OpenMP runtime (libomp: kmp_set_blocktime sets, per calling
// thread, how long its team's idle threads spin before they sleep):
//   * spin mode (block time kTeamWaitSpinMs): the team's threads' run delays (the time
//     each spent runnable, waiting for a CPU: /proc/self/task/<tid>/schedstat) are read
//     between steps, at most once a millisecond. Once the team waited for more than
//     0.5 ms and a fifth of the run so far, it sleeps at once (block time 0) from the
//     next region on: block mode.
//   * block mode: after a back-off (20 ms, doubled after each failed try up to 2 s) a
//     run tries spin mode again, unless more threads are runnable right now than the
//     CPUs the team's other threads leave free (/proc/loadavg); that veto holds for 10 s
//     after the team last spun at most, for runnable threads that would not compete (a
//     job at a lower priority).
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
inline constexpr int64_t kTeamWaitCheckNs = 1'000'000;   // run delays read at most once a ms
inline constexpr int64_t kTeamWaitMinDelayNs = 500'000;  // contended: the team waited more than this
inline constexpr int64_t kTeamWaitDelayShare = 5;        // ... and more than 1/5 of the run so far
inline constexpr std::chrono::milliseconds kTeamWaitFirstBackoff{20};
inline constexpr std::chrono::milliseconds kTeamWaitMaxBackoff{2000};
inline constexpr std::chrono::milliseconds kTeamWaitForceRetry{10000};

// The decisions of the adaptive policy, apart from where their inputs come from.
class TeamWaitPolicy {
 public:
  using Clock = std::chrono::steady_clock;

  // At the start of a run: true when the team spins this run (and the run is watched
  // with observe()), false when it sleeps at once. `others_runnable` is asked only when
  // a try would be due: whether more threads are runnable now than the CPUs the team's
  // other threads leave free.
  template <typename OthersRunnable>
  bool startRun(Clock::time_point now, OthersRunnable&& others_runnable) {
    if (blocking_) {
      if (now < retry_at_) return false;
      if (now < spun_at_ + kTeamWaitForceRetry && others_runnable()) {
        retry_at_ = now + backoff_;
        return false;
      }
      retrying_ = true;
      blocking_ = false;
      spun_at_ = now;
    }
    return true;
  }

  // During a spin run: `waited_ns` is how long the team's threads waited for a CPU since
  // the run started `elapsed_ns` ago. True when this switches to block mode (the caller
  // then makes the team sleep at once).
  bool observe(Clock::time_point now, int64_t waited_ns, int64_t elapsed_ns) {
    if (blocking_ || waited_ns <= kTeamWaitMinDelayNs || waited_ns * kTeamWaitDelayShare <= elapsed_ns) return false;
    if (retrying_) {
      backoff_ = std::min<Clock::duration>(backoff_ * 2, kTeamWaitMaxBackoff);
    } else {
      backoff_ = kTeamWaitFirstBackoff;
      spun_at_ = now;
    }
    blocking_ = true;
    retrying_ = false;
    retry_at_ = now + backoff_;
    ++switches_to_block_;
    return true;
  }

  // A spin run ended without switching: the next contention starts the back-off anew.
  void endSpinRun() { retrying_ = false; }

  bool blocking() const { return blocking_; }
  Clock::duration backoff() const { return backoff_; }
  Clock::time_point retryAt() const { return retry_at_; }
  int switchesToBlock() const { return switches_to_block_; }

 private:
  bool blocking_ = false;
  bool retrying_ = false;  // this spin run is a try after block mode
  Clock::time_point retry_at_{};
  Clock::time_point spun_at_{};  // when the team last spun: left spin mode, or tried it
  Clock::duration backoff_ = kTeamWaitFirstBackoff;
  int switches_to_block_ = 0;
};

// The policy of one run on the calling thread, from construction to destruction
// (GraphExecutor::run).
class TeamWaitScope {
 public:
  explicit TeamWaitScope(int threads);
  ~TeamWaitScope();
  TeamWaitScope(const TeamWaitScope&) = delete;
  TeamWaitScope& operator=(const TeamWaitScope&) = delete;

 private:
  bool active_ = false;
};

// Between two steps of a run (executor steps, oneDNN primitives): reads a clock, and at
// most once a millisecond the team's run delays. Outside a TeamWaitScope: nothing.
void teamWaitCheckpoint();

// What decides the wait in this process, for docs, tools and tests.
struct TeamWaitInfo {
  std::string runtime;  // the library serving omp_* and GOMP_* calls (its file name), or "unknown"
  std::string policy;   // "adaptive", "spin", "block", or "runtime default (...)" when partita leaves it alone
  bool adaptive = false;
  bool sees_runnable = false;  // /proc/loadavg is readable (other runnable threads are seen)
};
TeamWaitInfo teamWaitInfo();

// The calling thread's state, for tests: whether its team sleeps at once now, how many
// times its runs switched to block mode, and how many runs spun (watched).
struct TeamWaitState {
  bool blocking = false;
  int switches_to_block = 0;
  int watched_runs = 0;
};
TeamWaitState teamWaitState();

}  // namespace partita::runtime
