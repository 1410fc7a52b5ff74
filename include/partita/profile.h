// Profiling a run: where the time goes (docs/profiling.md).
//
//   partita::Session session(model);
//   session.enableProfiling();
//   session.run();                                    // records events
//   partita::writeTrace("trace.json", session.profileEvents());  // chrome://tracing, ui.perfetto.dev
//   std::fputs(partita::profileSummary(session.profileEvents()).c_str(), stdout);
//
// Each profiled run records, in start order: one event for the whole run (cat "run");
// one per step of the run's program (cat "node" for a node the host runs, "region"
// for a call into an external backend's module, which replaced the ONNX nodes it
// names); and, nested within a region's interval, what the module reports about its
// own work (cat "primitive" for each oneDNN primitive, with its implementation).
// Inside an If, Loop or Scan step: one event per subgraph run (cat "subgraph", args
// "branch" or "iteration") and, within it, the subgraph's steps, one level deeper.
// Times are microseconds on the steady clock, from an origin common to the process,
// so the events of several sessions merge into one trace.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace partita {

// One complete event (Trace Event Format "ph":"X"); the fields are named as in the
// format. `pid` is the process's and is added when the trace is written.
struct ProfileEvent {
  std::string name;  // "run", the node's name, the region's Call node name, the primitive's nodes
  std::string cat;   // "run", "node", "region", "subgraph", or what a module reports ("primitive")
  double ts = 0;     // start, microseconds since the process's profiling origin
  double dur = 0;    // duration, microseconds
  uint32_t tid = 0;  // a small number for the thread that ran it (1 = the first that profiled)
  // 0 for a run, 1 for a step, 2 for what a module reports inside a step; inside a
  // control-flow step (depth d), d + 1 for its subgraph runs and d + 2 for their steps.
  uint32_t depth = 0;
  // Details, all strings: "op", "backend", "inputs", "outputs" (dtype[shape] by
  // position), for regions "module", "function", "ops", "nodes", for primitives
  // "kind", "impl" and one entry per argument ("src", "weights", "dst", ...).
  std::vector<std::pair<std::string, std::string>> args;

  // The value of args entry `key`, or "" when there is none.
  const std::string& arg(const std::string& key) const;
};

// The events as a Trace Event Format JSON array: the complete events, preceded by
// metadata events ("ph":"M") naming the process and each thread. Every event has the
// fields name, cat, ph, ts, dur, pid, tid and args. Strings that are not UTF-8 (a node
// name in a model) are written with U+FFFD in place of the bad bytes.
std::string traceJson(const std::vector<ProfileEvent>& events);

// Writes traceJson(events) to `path` atomically (a complete file or none). Throws
// Error(kIo / kInvalidArgument) as writing any file does (a directory, a FIFO, a
// write-protected file is refused).
void writeTrace(const std::string& path, const std::vector<ProfileEvent>& events);

// A text summary: the profiled runs and their time; time by op type (host ops by
// their ONNX op, work inside a region by what its module reports, e.g. "convolution"
// on "dnnl", and the rest of a region as "(region)"), with share of the run time and
// calls; and the `top` nodes by time (host nodes and primitives, summed over runs).
std::string profileSummary(const std::vector<ProfileEvent>& events, size_t top = 15);

}  // namespace partita
