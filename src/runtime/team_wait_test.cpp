// The team's wait policy (team_wait.h): its decisions on made-up inputs, and a real run
// whose cores other threads keep busy.
#include "runtime/team_wait.h"

#include <gtest/gtest.h>

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

TEST(TeamWaitPolicy, SpinsUntilTheTeamWaitsForCpus) {
  TeamWaitPolicy p;
  const Clock::time_point t0{};
  auto never = [] { return false; };
  EXPECT_TRUE(p.startRun(t0, never));
  // Waits a quiet machine sees: under 0.5 ms, or under a fifth of the run.
  EXPECT_FALSE(p.observe(t0 + milliseconds(1), kMs / 4, kMs));
  EXPECT_FALSE(p.observe(t0 + milliseconds(10), 2 * kMs, 10 * kMs));
  p.endSpinRun();
  EXPECT_TRUE(p.startRun(t0 + milliseconds(11), never));
  EXPECT_FALSE(p.blocking());
  // Contended: waited 3 ms of 6.
  EXPECT_TRUE(p.observe(t0 + milliseconds(17), 3 * kMs, 6 * kMs));
  EXPECT_TRUE(p.blocking());
  EXPECT_EQ(p.switchesToBlock(), 1);
  EXPECT_EQ(p.backoff(), kTeamWaitFirstBackoff);
  EXPECT_FALSE(p.observe(t0 + milliseconds(18), 5 * kMs, 7 * kMs));  // already blocking: no second switch
  EXPECT_EQ(p.switchesToBlock(), 1);
}

TEST(TeamWaitPolicy, BacksOffAfterFailedTriesAndStartsAnewAfterASuccess) {
  TeamWaitPolicy p;
  Clock::time_point now{};
  auto never = [] { return false; };
  ASSERT_TRUE(p.startRun(now, never));
  ASSERT_TRUE(p.observe(now, 3 * kMs, 6 * kMs));
  // Blocks until the back-off ends; each failed try doubles it, up to the maximum.
  Clock::duration expect = kTeamWaitFirstBackoff;
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(p.backoff(), expect);
    EXPECT_FALSE(p.startRun(p.retryAt() - milliseconds(1), never));
    now = p.retryAt();
    ASSERT_TRUE(p.startRun(now, never)) << "try " << i;
    ASSERT_TRUE(p.observe(now + milliseconds(5), 3 * kMs, 5 * kMs));
    expect = std::min<Clock::duration>(expect * 2, kTeamWaitMaxBackoff);
  }
  EXPECT_EQ(p.backoff(), kTeamWaitMaxBackoff);
  // A try that ends quietly: the next contention backs off from the start again.
  now = p.retryAt();
  ASSERT_TRUE(p.startRun(now, never));
  EXPECT_FALSE(p.observe(now + milliseconds(5), 0, 5 * kMs));
  p.endSpinRun();
  ASSERT_TRUE(p.startRun(now + milliseconds(6), never));
  ASSERT_TRUE(p.observe(now + milliseconds(9), 2 * kMs, 3 * kMs));
  EXPECT_EQ(p.backoff(), kTeamWaitFirstBackoff);
}

TEST(TeamWaitPolicy, RunnableOthersPostponeTriesForAtMostTheForcedRetry) {
  TeamWaitPolicy p;
  const Clock::time_point t0 = Clock::time_point{} + std::chrono::hours(1);
  int asked = 0;
  auto busy = [&] { ++asked; return true; };
  ASSERT_TRUE(p.startRun(t0, busy));
  EXPECT_EQ(asked, 0);  // not asked in spin mode
  ASSERT_TRUE(p.observe(t0, 3 * kMs, 6 * kMs));
  // Others runnable postpone every try by a back-off...
  Clock::time_point now = t0;
  while (now < t0 + kTeamWaitForceRetry - kTeamWaitFirstBackoff) {
    now = p.retryAt();
    EXPECT_FALSE(p.startRun(now, busy));
    EXPECT_TRUE(p.blocking());
  }
  EXPECT_GT(asked, 100);
  // ...until the forced try, kTeamWaitForceRetry after the team left spin mode.
  now = t0 + kTeamWaitForceRetry;
  EXPECT_TRUE(p.startRun(now, busy));
  EXPECT_FALSE(p.blocking());
  // Failed: postponed again for up to kTeamWaitForceRetry after that try; a try is not
  // asked about before its back-off ends.
  ASSERT_TRUE(p.observe(now, 3 * kMs, 6 * kMs));
  asked = 0;
  EXPECT_FALSE(p.startRun(now + milliseconds(1), busy));
  EXPECT_EQ(asked, 0);
  EXPECT_FALSE(p.startRun(now + kTeamWaitForceRetry - milliseconds(1), busy));
  EXPECT_EQ(asked, 1);
  EXPECT_GE(p.retryAt(), now + kTeamWaitForceRetry);
  EXPECT_TRUE(p.startRun(p.retryAt(), busy));
  // Nobody else runnable: the try goes ahead at the end of the back-off.
  TeamWaitPolicy q;
  ASSERT_TRUE(q.startRun(t0, busy));
  ASSERT_TRUE(q.observe(t0, 3 * kMs, 6 * kMs));
  EXPECT_TRUE(q.startRun(q.retryAt(), [] { return false; }));
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

// y = x + (x + (x + ... )) over 2^20 floats: every step a parallel region of the team.
std::shared_ptr<GraphExecutor> addChain(int steps, int threads) {
  auto g = std::make_shared<ir::Graph>();
  const ir::TensorType type = ir::TensorType::of(ir::DType::kFloat32, {1 << 20});
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
// once, and the results stay right through the switch.
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
  const TeamWaitState during = teamWaitState();
  stop = true;
  for (std::thread& t : busy) t.join();
  EXPECT_TRUE(during.blocking) << runs << " runs with " << cores << " busy threads";
  EXPECT_GE(during.switches_to_block, 1);
  EXPECT_GE(during.watched_runs, 1);
}

}  // namespace
}  // namespace partita::runtime
