// Session profiling (partita/profile.h): the events of a run, the Trace Event Format
// JSON, the summary. The CLI's --profile is checked by tests/profile/check_profile.py.
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "partita/compiler.h"
#include "partita/error.h"
#include "partita/model.h"
#include "partita/npy.h"
#include "partita/profile.h"
#include "runtime/graph_executor.h"

namespace partita {
namespace {

const char* kModel = PARTITA_SOURCE_DIR "/models/fashion/fashion_cnn.onnx";

std::shared_ptr<const Model> fashion(std::vector<std::string> backends, std::vector<std::string> deny_dnnl = {}) {
  CompileOptions options;
  options.backends = std::move(backends);
  if (!deny_dnnl.empty()) options.deny_ops["dnnl"] = std::move(deny_dnnl);
  return compileOnnx(kModel, options);
}

const ir::Graph& graphOf(const Model& m) {
  const auto* exec = dynamic_cast<const runtime::GraphExecutor*>(&m.executor());
  EXPECT_NE(exec, nullptr);
  return exec->graph();
}

bool within(const ProfileEvent& inner, const ProfileEvent& outer) {
  return inner.tid == outer.tid && inner.ts >= outer.ts && inner.ts + inner.dur <= outer.ts + outer.dur;
}

std::vector<const ProfileEvent*> ofCat(const std::vector<ProfileEvent>& events, const std::string& cat) {
  std::vector<const ProfileEvent*> out;
  for (const ProfileEvent& e : events)
    if (e.cat == cat) out.push_back(&e);
  return out;
}

TEST(Profile, OffRecordsNothing) {
  auto model = fashion({"dnnl", "host"});
  Session s(model);
  Tensor images = readNpy(PARTITA_SOURCE_DIR "/models/fashion/test_images.npy");
  s.setInput("input", images);
  EXPECT_FALSE(s.profiling());
  s.run();
  s.run();
  EXPECT_TRUE(s.profileEvents().empty());
  EXPECT_EQ(profileSummary(s.profileEvents()), "profile: no events (was profiling on during a run?)\n");
}

TEST(Profile, EventsOfADnnlModel) {
  auto model = fashion({"dnnl", "host"}, {"Sub", "Gemm"});  // host nodes between oneDNN regions
  const ir::Graph& g = graphOf(*model);
  Tensor images = readNpy(PARTITA_SOURCE_DIR "/models/fashion/test_images.npy");
  Session plain(model), profiled(model);
  plain.setInput("input", images);
  profiled.setInput("input", images);
  plain.run();
  profiled.enableProfiling();
  EXPECT_TRUE(profiled.profiling());
  profiled.run();
  profiled.run();
  // Profiling changes no result.
  ASSERT_EQ(plain.outputs().size(), profiled.outputs().size());
  for (size_t i = 0; i < plain.outputs().size(); ++i)
    EXPECT_EQ(std::memcmp(plain.outputs()[i].data(), profiled.outputs()[i].data(), plain.outputs()[i].nbytes()), 0);

  const std::vector<ProfileEvent>& events = profiled.profileEvents();
  auto runs = ofCat(events, "run");
  ASSERT_EQ(runs.size(), 2u);
  size_t regions = 0, host_nodes = 0, primitives = 0;
  for (const ProfileEvent* run : runs) {
    EXPECT_EQ(run->depth, 0u);
    EXPECT_EQ(run->arg("executor"), "graph");
    EXPECT_EQ(run->arg("inputs"), "float32[100,1,28,28]");  // the 100 test images
    // The steps of this run, in program order: one per node of the executed graph.
    std::vector<const ProfileEvent*> steps;
    for (const ProfileEvent& e : events)
      if (e.depth == 1 && within(e, *run)) steps.push_back(&e);
    ASSERT_EQ(steps.size(), g.nodes.size());
    for (size_t n = 0; n < g.nodes.size(); ++n) {
      const ProfileEvent& e = *steps[n];
      EXPECT_EQ(e.name, g.nodes[n].name);
      EXPECT_GE(e.dur, 0);
      EXPECT_FALSE(e.arg("outputs").empty()) << e.name;
      if (runtime::isCallNode(g.nodes[n])) {
        ++regions;
        EXPECT_EQ(e.cat, "region");
        EXPECT_EQ(e.arg("op"), "partita.Call");
        EXPECT_EQ(e.arg("backend"), "dnnl");
        EXPECT_FALSE(e.arg("nodes").empty());
        EXPECT_FALSE(e.arg("ops").empty());
      } else {
        ++host_nodes;
        EXPECT_EQ(e.cat, "node");
        EXPECT_EQ(e.arg("op"), g.nodes[n].op_type);
        EXPECT_EQ(e.arg("backend"), "host");
      }
    }
  }
  ASSERT_GT(regions, 0u);
  ASSERT_GT(host_nodes, 0u);
  // Each primitive lies within exactly one region of the same thread, and says what it is.
  auto region_events = ofCat(events, "region");
  for (const ProfileEvent* p : ofCat(events, "primitive")) {
    ++primitives;
    EXPECT_EQ(p->depth, 2u);
    EXPECT_EQ(p->arg("backend"), "dnnl");
    EXPECT_FALSE(p->arg("kind").empty());
    EXPECT_FALSE(p->arg("impl").empty());
    EXPECT_NE(p->arg("dst").find("f32["), std::string::npos) << p->arg("dst");
    size_t parents = 0;
    for (const ProfileEvent* r : region_events) parents += within(*p, *r);
    EXPECT_EQ(parents, 1u) << p->name;
  }
  EXPECT_GT(primitives, 0u);
  // A convolution, by the name of the ONNX node it computes.
  bool conv = false;
  for (const ProfileEvent* p : ofCat(events, "primitive"))
    conv |= p->arg("kind") == "convolution" && p->name.find("/conv1/Conv") != std::string::npos;
  EXPECT_TRUE(conv);
  // Events are in start order.
  for (size_t i = 1; i < events.size(); ++i) EXPECT_LE(events[i - 1].ts, events[i].ts);
}

TEST(Profile, EwiseRegionsNameTheirBackend) {
  auto model = fashion({"ewise", "host"});
  Session s(model);
  const Tensor images = readNpy(PARTITA_SOURCE_DIR "/models/fashion/test_images.npy");  // setInput keeps a view
  s.setInput("input", images);
  s.enableProfiling();
  s.run();
  auto regions = ofCat(s.profileEvents(), "region");
  ASSERT_FALSE(regions.empty());
  for (const ProfileEvent* r : regions) EXPECT_EQ(r->arg("backend"), "ewise");
  EXPECT_TRUE(ofCat(s.profileEvents(), "primitive").empty());
}

TEST(Profile, OffAgainKeepsEventsAndClearDropsThem) {
  auto model = fashion({"host"});
  Session s(model);
  const Tensor images = readNpy(PARTITA_SOURCE_DIR "/models/fashion/test_images.npy");  // setInput keeps a view
  s.setInput("input", images);
  s.enableProfiling();
  s.run();
  const size_t n = s.profileEvents().size();
  EXPECT_EQ(n, graphOf(*model).nodes.size() + 1);
  s.enableProfiling(false);
  s.run();
  EXPECT_EQ(s.profileEvents().size(), n);
  s.clearProfile();
  EXPECT_TRUE(s.profileEvents().empty());
}

TEST(Profile, TraceJsonHasTheFormatsFields) {
  auto model = fashion({"dnnl", "host"});
  Session s(model);
  const Tensor images = readNpy(PARTITA_SOURCE_DIR "/models/fashion/test_images.npy");  // setInput keeps a view
  s.setInput("input", images);
  s.enableProfiling();
  s.run();
  const auto& events = s.profileEvents();
  const nlohmann::json trace = nlohmann::json::parse(traceJson(events));
  ASSERT_TRUE(trace.is_array());
  size_t complete = 0, metadata = 0;
  for (const auto& e : trace) {
    ASSERT_TRUE(e.is_object());
    EXPECT_TRUE(e.at("name").is_string());
    EXPECT_TRUE(e.at("cat").is_string());
    EXPECT_TRUE(e.at("ph").is_string());
    EXPECT_TRUE(e.at("ts").is_number());
    EXPECT_TRUE(e.at("dur").is_number());
    EXPECT_GE(e.at("dur").get<double>(), 0);
    EXPECT_EQ(e.at("pid").get<int64_t>(), int64_t(::getpid()));
    EXPECT_TRUE(e.at("tid").is_number_integer());
    EXPECT_TRUE(e.at("args").is_object());
    for (const auto& [k, v] : e.at("args").items()) EXPECT_TRUE(v.is_string()) << k;
    complete += e.at("ph") == "X";
    metadata += e.at("ph") == "M";
  }
  EXPECT_EQ(complete, events.size());
  EXPECT_EQ(metadata, 2u);  // the process and the one thread
  // The events in order, with their details.
  size_t i = 0;
  for (const auto& e : trace) {
    if (e.at("ph") != "X") continue;
    EXPECT_EQ(e.at("name"), events[i].name);
    EXPECT_EQ(e.at("cat"), events[i].cat);
    EXPECT_NEAR(e.at("ts").get<double>(), events[i].ts, 1e-3);
    EXPECT_EQ(e.at("args").size(), events[i].args.size());
    ++i;
  }
}

TEST(Profile, JsonEscapesNamesAndReplacesBadUtf8) {
  ProfileEvent e;
  e.name = "a\"b\\c\n\x01 \xc3\xa9";  // quote, backslash, newline, control, é
  e.cat = "node";
  e.ts = 1.5;
  e.dur = 2.25;
  e.tid = 3;
  e.args = {{"bad", "x\xff" "y\xc3"}, {"overlong", "\xc0\xaf"}, {"surrogate", "\xed\xa0\x80"}};
  const nlohmann::json trace = nlohmann::json::parse(traceJson({e}));
  const auto& x = trace.back();
  EXPECT_EQ(x.at("name"), e.name);
  EXPECT_EQ(x.at("args").at("bad"), "x\xef\xbf\xbdy\xef\xbf\xbd");
  EXPECT_EQ(x.at("args").at("overlong"), "\xef\xbf\xbd\xef\xbf\xbd");
  EXPECT_EQ(x.at("args").at("surrogate"), "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
  EXPECT_EQ(x.at("ts").get<double>(), 1.5);
  EXPECT_EQ(x.at("dur").get<double>(), 2.25);
  EXPECT_EQ(x.at("tid"), 3);
}

TEST(Profile, NestingSurvivesRoundingToNanoseconds) {
  // A child ending 0.2 ns before its parent: written with three decimals each, start
  // and end are rounded, never the duration alone, so the child stays inside.
  ProfileEvent parent{"p", "region", 1.0004, 5.0004, 1, 1, {}};
  ProfileEvent child{"c", "primitive", 3.0006, 3.0000, 1, 2, {}};
  const nlohmann::json trace = nlohmann::json::parse(traceJson({parent, child}));
  auto end = [](const nlohmann::json& e) {
    return std::llround(e.at("ts").get<double>() * 1000) + std::llround(e.at("dur").get<double>() * 1000);
  };
  EXPECT_LE(end(trace[3]), end(trace[2]));
}

TEST(Profile, SummaryCountsSelfTimeByOpTypeAndNode) {
  // One run of 1000 us: a host Relu of 100, a dnnl region of 800 whose module reported a
  // convolution of 500 and a reorder of 200 (so 100 of the region's own).
  std::vector<ProfileEvent> ev = {
      {"run", "run", 0, 1000, 1, 0, {{"executor", "graph"}}},
      {"relu", "node", 10, 100, 1, 1, {{"op", "Relu"}, {"backend", "host"}}},
      {"dnnl_region_0_0", "region", 150, 800, 1, 1, {{"op", "partita.Call"}, {"backend", "dnnl"}}},
      {"conv1", "primitive", 160, 500, 1, 2, {{"kind", "convolution"}, {"backend", "dnnl"}}},
      {"conv1_out", "primitive", 700, 200, 1, 2, {{"kind", "reorder"}, {"backend", "dnnl"}}},
  };
  const std::string summary = profileSummary(ev, 2);
  auto line = [&](const std::string& start) {
    std::istringstream in(summary);
    std::string l;
    while (std::getline(in, l))
      if (l.rfind("  " + start, 0) == 0) return l;
    return std::string();
  };
  EXPECT_NE(summary.find("1 run(s), 1.000 ms in all, 1.000 ms per run; 5 events"), std::string::npos) << summary;
  EXPECT_NE(line("convolution").find("50.0%"), std::string::npos) << summary;
  EXPECT_NE(line("reorder").find("20.0%"), std::string::npos) << summary;
  EXPECT_NE(line("Relu").find("10.0%"), std::string::npos) << summary;
  EXPECT_NE(line("(region)").find("10.0%"), std::string::npos) << summary;
  EXPECT_NE(line("(executor)").find("10.0%"), std::string::npos) << summary;
  // The top 2 nodes: conv1, then conv1_out; relu is left out.
  EXPECT_NE(summary.find("top 2 nodes"), std::string::npos) << summary;
  const size_t conv1 = summary.find(" conv1\n"), conv1_out = summary.find(" conv1_out\n");
  ASSERT_NE(conv1, std::string::npos) << summary;
  EXPECT_LT(conv1, conv1_out);
  EXPECT_EQ(summary.find(" relu\n"), std::string::npos) << summary;
}

TEST(Profile, WriteTraceReplacesAFileAndRefusesADirectory) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("partita_profile_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::vector<ProfileEvent> events = {{"run", "run", 1, 2, 1, 0, {}}};
  const std::string path = (dir / "trace.json").string();
  { std::ofstream(path) << "old"; }
  writeTrace(path, events);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), traceJson(events));
  EXPECT_THROW(writeTrace(dir.string(), events), Error);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace partita
