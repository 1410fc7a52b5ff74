// The team's wait policy (team_wait.h): its decisions on made-up inputs, and a real run
// whose cores other threads keep busy.
#include "runtime/team_wait.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "runtime/graph_executor.h"

namespace partita::runtime {
namespace {

using Clock = TeamWaitPolicy::Clock;
using std::chrono::milliseconds;

constexpr int64_t kMs = 1'000'000;

TEST(TeamWaitPolicy, SpinsUntilTheTeamWaitsForCpusIntervalAfterInterval) {
  TeamWaitPolicy p;
  const Clock::time_point t0{};
  auto never = [] { return false; };
  EXPECT_TRUE(p.startRun(t0, never));
  // Waits a quiet machine sees: up to a fifth of an interval.
  EXPECT_FALSE(p.observe(t0 + milliseconds(1), kMs / 5, kMs));
  EXPECT_FALSE(p.observe(t0 + milliseconds(3), 0, 2 * kMs));
  // Contended intervals short of the count (a thread woken late, two threads on one CPU
  // until the kernel moves one), then a quiet one: still spinning.
  Clock::time_point now = t0 + milliseconds(3);
  for (int i = 0; i + 1 < kTeamWaitContendedIntervals; ++i) {
    now += milliseconds(1);
    EXPECT_FALSE(p.observe(now, 8 * kMs / 10, kMs));
  }
  now += milliseconds(1);
  EXPECT_FALSE(p.observe(now, kMs / 10, kMs));
  EXPECT_TRUE(p.startRun(now, never));
  EXPECT_FALSE(p.blocking());
  // The full count in a row (the count runs on across runs): block mode.
  for (int i = 0; i + 1 < kTeamWaitContendedIntervals; ++i) {
    now += milliseconds(1);
    EXPECT_FALSE(p.observe(now, kMs, kMs));
    if (i == 2) {
      EXPECT_TRUE(p.startRun(now, never));
    }
  }
  now += milliseconds(1);
  EXPECT_TRUE(p.observe(now, kMs / 2, kMs));
  EXPECT_TRUE(p.blocking());
  EXPECT_EQ(p.switchesToBlock(), 1);
  EXPECT_EQ(p.backoff(), kTeamWaitFirstBackoff);
  EXPECT_FALSE(p.observe(now + milliseconds(1), kMs, kMs));  // already blocking: no second switch
  EXPECT_EQ(p.switchesToBlock(), 1);
  EXPECT_FALSE(p.startRun(now + milliseconds(2), never));
}

// Feeds `n` contended intervals.
bool contend(TeamWaitPolicy& p, Clock::time_point now, int n = kTeamWaitContendedIntervals) {
  bool switched = false;
  for (int i = 0; i < n; ++i) switched = p.observe(now + milliseconds(i), 2 * kMs, 2 * kMs);
  return switched;
}

TEST(TeamWaitPolicy, BacksOffAfterFailedTriesAndStartsAnewAfterACleanInterval) {
  TeamWaitPolicy p;
  Clock::time_point now{};
  auto never = [] { return false; };
  ASSERT_TRUE(p.startRun(now, never));
  ASSERT_TRUE(contend(p, now));
  // Blocks until the back-off ends; each failed try doubles it, up to the maximum.
  Clock::duration expect = kTeamWaitFirstBackoff;
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(p.backoff(), expect);
    EXPECT_FALSE(p.startRun(p.retryAt() - milliseconds(1), never));
    now = p.retryAt();
    ASSERT_TRUE(p.startRun(now, never)) << "try " << i;
    ASSERT_TRUE(contend(p, now + milliseconds(1))) << "try " << i;
    expect = std::min<Clock::duration>(expect * 2, kTeamWaitMaxBackoff);
  }
  EXPECT_EQ(p.backoff(), kTeamWaitMaxBackoff);
  // A try whose first interval is quiet: the next contention backs off from the start.
  now = p.retryAt();
  ASSERT_TRUE(p.startRun(now, never));
  EXPECT_FALSE(p.observe(now + milliseconds(1), 0, kMs));
  ASSERT_TRUE(contend(p, now + milliseconds(2)));
  EXPECT_EQ(p.backoff(), kTeamWaitFirstBackoff);
}

TEST(TeamWaitPolicy, OthersRunnableAtTwoStartsInARowKeepTheTeamSleepingButForATryAMinute) {
  TeamWaitPolicy p;
  const Clock::time_point t0 = Clock::time_point{} + std::chrono::hours(1);
  int asked = 0;
  bool others = true;
  auto runnable = [&] { ++asked; return others; };
  // Others runnable at one run's start (a passing thread): still spinning.
  EXPECT_TRUE(p.startRun(t0, runnable));
  others = false;
  EXPECT_TRUE(p.startRun(t0 + milliseconds(5), runnable));
  others = true;
  EXPECT_TRUE(p.startRun(t0 + milliseconds(10), runnable));
  EXPECT_EQ(asked, 3);
  // At two starts in a row: sleep from this run on.
  EXPECT_FALSE(p.startRun(t0 + milliseconds(15), runnable));
  EXPECT_TRUE(p.blocking());
  EXPECT_EQ(p.switchesToBlock(), 1);
  // Asked at every start (for the next decision), then a try is postponed by a back-off
  // each time it is due...
  asked = 0;
  EXPECT_FALSE(p.startRun(p.retryAt() - milliseconds(1), runnable));
  EXPECT_EQ(asked, 1);
  Clock::time_point now = t0;
  while (p.retryAt() < t0 + kTeamWaitForceRetry) {
    now = p.retryAt();
    EXPECT_FALSE(p.startRun(now, runnable));
  }
  EXPECT_GT(asked, 100);
  EXPECT_EQ(p.backoff(), kTeamWaitFirstBackoff);  // postponing is not failing
  // ...until a try a minute after the team last spun, whoever is runnable.
  now = p.retryAt();
  EXPECT_TRUE(p.startRun(now, runnable));
  EXPECT_FALSE(p.blocking());
  // A contended try: back to sleep, others heeded.
  ASSERT_TRUE(contend(p, now + milliseconds(1)));
  EXPECT_EQ(p.switchesToBlock(), 2);
  // One start with nobody else runnable lets the try go ahead at the end of the back-off.
  EXPECT_FALSE(p.startRun(p.retryAt() - milliseconds(2), runnable));
  others = false;
  now = p.retryAt();
  EXPECT_TRUE(p.startRun(now, runnable));
  EXPECT_FALSE(p.observe(now + milliseconds(1), 0, kMs));
  // Others runnable again at two starts: sleep at once.
  others = true;
  EXPECT_TRUE(p.startRun(now + milliseconds(2), runnable));
  EXPECT_FALSE(p.startRun(now + milliseconds(3), runnable));
  EXPECT_EQ(p.switchesToBlock(), 3);
}

TEST(TeamWaitPolicy, OthersThatDoNotCompeteStopCountingUntilTheTeamWaitsAgain) {
  TeamWaitPolicy p;
  const Clock::time_point t0 = Clock::time_point{} + std::chrono::hours(1);
  int asked = 0;
  auto runnable = [&] { ++asked; return true; };  // a job at a lower priority, always runnable
  EXPECT_TRUE(p.startRun(t0, runnable));
  EXPECT_FALSE(p.startRun(t0 + milliseconds(1), runnable));
  Clock::time_point now = t0 + kTeamWaitForceRetry;
  while (!p.startRun(now, runnable)) now = p.retryAt();  // the forced try
  // It goes well: the team spins from now on, whoever is runnable.
  EXPECT_FALSE(p.observe(now + milliseconds(1), kMs / 10, kMs));
  asked = 0;
  for (int i = 2; i < 100; ++i) {
    EXPECT_TRUE(p.startRun(now + milliseconds(i), runnable));
    EXPECT_FALSE(p.observe(now + milliseconds(i), 0, kMs));
  }
  EXPECT_EQ(asked, 0);
  EXPECT_EQ(p.switchesToBlock(), 1);
  // The team waits: block mode, and runnable others count again.
  ASSERT_TRUE(contend(p, now + milliseconds(100)));
  EXPECT_FALSE(p.startRun(p.retryAt() - milliseconds(1), runnable));
  EXPECT_EQ(asked, 1);
  EXPECT_FALSE(p.startRun(p.retryAt(), runnable));  // runnable at two starts in a row
  EXPECT_TRUE(p.blocking());
}

ir::Node node(const std::string& op, const std::string& name, std::vector<ir::ValueId> in,
              std::vector<ir::ValueId> out) {
  ir::Node n;
  n.op_type = op;
  n.opset = 14;
  n.name = name;
  n.inputs = std::move(in);
  n.outputs = std::move(out);
  return n;
}

// y = x + (x + (x + ... )) over n floats: every step a parallel region of the team.
std::shared_ptr<GraphExecutor> addChain(int steps, int threads, int64_t n = 1 << 20) {
  auto g = std::make_shared<ir::Graph>();
  const ir::TensorType type = ir::TensorType::of(ir::DType::kFloat32, {n});
  ir::ValueId x = g->addValue("x", type);
  g->inputs = {x};
  ir::ValueId prev = x;
  for (int i = 0; i < steps; ++i) {
    ir::ValueId out = g->addValue("v" + std::to_string(i), type);
    g->addNode(node("Add", "add" + std::to_string(i), {x, prev}, {out}));
    prev = out;
  }
  g->outputs = {prev};
  auto store = std::make_shared<ConstStore>(ConstStore::fromPool(g->constants));
  return std::make_shared<GraphExecutor>(g, store, std::vector<std::shared_ptr<const RuntimeModule>>{},
                                         RunOptions{threads});
}

TEST(TeamWait, RunsOnLlvmOpenMpWhenBuiltForIt) {
  const TeamWaitInfo info = teamWaitInfo();
#if defined(PARTITA_OPENMP_LLVM)
  EXPECT_EQ(info.runtime.rfind("libomp", 0), 0u) << info.runtime;
#else
  EXPECT_EQ(info.runtime.rfind("libgomp", 0), 0u) << info.runtime;
  EXPECT_FALSE(info.adaptive);
#endif
}

// Busy threads on every core: the team waits for CPUs, the policy makes it sleep at
// once (seeing the busy threads runnable at a run's start, or the team's own waits
// within a run), and the results stay right through the switch.
TEST(TeamWait, SleepsAtOnceWhileOtherThreadsHoldTheCores) {
  const TeamWaitInfo info = teamWaitInfo();
  if (!info.adaptive) GTEST_SKIP() << "wait policy is " << info.policy << " (runtime " << info.runtime << ")";
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "the team runs one thread under TSan";
#endif
  constexpr int kSteps = 24;
  auto e = addChain(kSteps, 2);
  auto state = e->newRunState();
  ir::OwnedTensor x(ir::DType::kFloat32, {1 << 20});
  float* xs = static_cast<float*>(x.data());
  for (int i = 0; i < (1 << 20); ++i) xs[i] = float(i % 7);
  const std::vector<ir::Tensor> inputs = {x.view()};
  auto check = [&](const std::vector<ir::OwnedTensor>& out) {
    const float* y = static_cast<const float*>(out.at(0).data());
    for (int i = 0; i < (1 << 20); i += 4099) ASSERT_EQ(y[i], float(i % 7) * (kSteps + 1)) << i;
  };
  check(e->run(*state, inputs));
  const int64_t delay_before = teamRunDelayNs(2);
  ASSERT_GE(delay_before, 0) << "the team's schedstat cannot be read";

  std::atomic<bool> stop{false};
  std::vector<std::thread> busy;
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  for (unsigned i = 0; i < cores; ++i)
    busy.emplace_back([&] {
      volatile uint64_t n = 0;
      while (!stop.load(std::memory_order_relaxed)) n = n + 1;
    });
  // (A machine busy before the threads start may have switched already.)
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  int runs = 0;
  while ((runs < 5 || !teamWaitState().blocking) && Clock::now() < deadline) {
    check(e->run(*state, inputs));
    ++runs;
  }
  // By default, runs of short steps that start in block mode run on a team of one
  // (from the run after one whose steps were short on average), and give the team size
  // back; with PARTITA_THREAD_WAIT=adaptive-team (CTest threads_adaptive_team) the team
  // stays whole.
  const int one_before = teamWaitState().one_thread_runs;
  constexpr int64_t kSmall = 1 << 12;
  auto small = addChain(kSteps, 2, kSmall);
  auto small_state = small->newRunState();
  ir::OwnedTensor xs_small(ir::DType::kFloat32, {kSmall});
  std::memcpy(xs_small.data(), x.data(), kSmall * sizeof(float));
  for (int i = 0; i < 5; ++i) {
    const std::vector<ir::OwnedTensor> out = small->run(*small_state, {xs_small.view()});
    const float* y = static_cast<const float*>(out.at(0).data());
    for (int j = 0; j < kSmall; j += 97) ASSERT_EQ(y[j], float(j % 7) * (kSteps + 1)) << j;
    EXPECT_EQ(omp_get_max_threads(), 2);
  }
  const TeamWaitState during = teamWaitState();
  stop = true;
  for (std::thread& t : busy) t.join();
  const int64_t delay_after = teamRunDelayNs(2);
  EXPECT_TRUE(during.blocking) << runs << " runs with " << cores << " busy threads";
  EXPECT_GE(during.switches_to_block, 1);
  if (info.policy == "adaptive")
    EXPECT_GT(during.one_thread_runs, one_before);
  else
    EXPECT_EQ(during.one_thread_runs, one_before);
  // The team did wait for CPUs, and its delays were read.
  EXPECT_GT(delay_after, delay_before);
}

}  // namespace
}  // namespace partita::runtime
