#include "partita/profile.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <string_view>
#include <tuple>

#include "base/atomic_file.h"

namespace partita {

const std::string& ProfileEvent::arg(const std::string& key) const {
  static const std::string kNone;
  for (const auto& [k, v] : args)
    if (k == key) return v;
  return kNone;
}

namespace {

// Appends `s` as a JSON string: quotes, escapes, and U+FFFD for each byte that does not
// start or continue a well-formed UTF-8 sequence (JSON text must be UTF-8).
void appendJsonString(std::string& out, std::string_view s) {
  static const char kHex[] = "0123456789abcdef";
  out += '"';
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        default:
          if (c < 0x20 || c == 0x7f) {
            out += "\\u00";
            out += kHex[c >> 4];
            out += kHex[c & 15];
          } else {
            out += char(c);
          }
      }
      ++i;
      continue;
    }
    // The length of a well-formed sequence starting at i (RFC 3629), or 0.
    size_t len = 0;
    auto cont = [&](size_t k, unsigned char lo = 0x80, unsigned char hi = 0xbf) {
      if (i + k >= s.size()) return false;
      const auto b = static_cast<unsigned char>(s[i + k]);
      return b >= lo && b <= hi;
    };
    if (c >= 0xc2 && c <= 0xdf)
      len = cont(1) ? 2 : 0;
    else if (c == 0xe0)
      len = cont(1, 0xa0) && cont(2) ? 3 : 0;
    else if ((c >= 0xe1 && c <= 0xec) || c == 0xee || c == 0xef)
      len = cont(1) && cont(2) ? 3 : 0;
    else if (c == 0xed)
      len = cont(1, 0x80, 0x9f) && cont(2) ? 3 : 0;  // no surrogates
    else if (c == 0xf0)
      len = cont(1, 0x90) && cont(2) && cont(3) ? 4 : 0;
    else if (c >= 0xf1 && c <= 0xf3)
      len = cont(1) && cont(2) && cont(3) ? 4 : 0;
    else if (c == 0xf4)
      len = cont(1, 0x80, 0x8f) && cont(2) && cont(3) ? 4 : 0;
    if (len == 0) {
      out += "\xef\xbf\xbd";
      ++i;
    } else {
      out.append(s.substr(i, len));
      i += len;
    }
  }
  out += '"';
}

// Microseconds as a decimal with three places, from whole nanoseconds.
void appendMicros(std::string& out, int64_t ns) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%lld.%03lld", static_cast<long long>(ns / 1000), static_cast<long long>(ns % 1000));
  out += buf;
}

int64_t nanos(double us) { return us > 0 ? static_cast<int64_t>(std::llround(us * 1000.0)) : 0; }

void appendEvent(std::string& out, std::string_view name, std::string_view cat, char ph, int64_t ts_ns,
                 int64_t dur_ns, long pid, uint32_t tid,
                 const std::vector<std::pair<std::string, std::string>>& args) {
  out += "{\"name\":";
  appendJsonString(out, name);
  out += ",\"cat\":";
  appendJsonString(out, cat);
  out += ",\"ph\":\"";
  out += ph;
  out += "\",\"ts\":";
  appendMicros(out, ts_ns);
  out += ",\"dur\":";
  appendMicros(out, dur_ns);
  out += ",\"pid\":" + std::to_string(pid) + ",\"tid\":" + std::to_string(tid) + ",\"args\":{";
  for (size_t i = 0; i < args.size(); ++i) {
    if (i) out += ',';
    appendJsonString(out, args[i].first);
    out += ':';
    appendJsonString(out, args[i].second);
  }
  out += "}}";
}

}  // namespace

std::string traceJson(const std::vector<ProfileEvent>& events) {
  const long pid = static_cast<long>(::getpid());
  std::string out = "[\n";
  appendEvent(out, "process_name", "__metadata", 'M', 0, 0, pid, events.empty() ? 0 : events.front().tid,
              {{"name", "partita"}});
  std::set<uint32_t> threads;
  for (const ProfileEvent& e : events) threads.insert(e.tid);
  for (uint32_t tid : threads) {
    out += ",\n";
    appendEvent(out, "thread_name", "__metadata", 'M', 0, 0, pid, tid,
                {{"name", "partita thread " + std::to_string(tid)}});
  }
  for (const ProfileEvent& e : events) {
    out += ",\n";
    // Start and end rounded to whole nanoseconds and the duration their difference, so
    // an event that lies within another one still does in the file.
    const int64_t ts = nanos(e.ts), end = std::max(ts, nanos(e.ts + e.dur));
    appendEvent(out, e.name, e.cat, 'X', ts, end - ts, pid, e.tid, e.args);
  }
  out += "\n]\n";
  return out;
}

void writeTrace(const std::string& path, const std::vector<ProfileEvent>& events) {
  const std::string json = traceJson(events);
  artifact::AtomicFile file(path);
  file.writeAt(0, json.data(), json.size());
  file.commit();
}

namespace {

struct Row {
  std::string op, backend;
  size_t calls = 0;
  double self_us = 0;
};

// Each event's self time: its duration less that of the events directly inside it
// (same thread, nested by time and depth).
std::vector<double> selfTimes(const std::vector<ProfileEvent>& events) {
  std::vector<double> self(events.size());
  std::vector<size_t> order(events.size());
  for (size_t i = 0; i < events.size(); ++i) {
    self[i] = events[i].dur;
    order[i] = i;
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const ProfileEvent &x = events[a], &y = events[b];
    if (x.tid != y.tid) return x.tid < y.tid;
    if (x.ts != y.ts) return x.ts < y.ts;
    return x.depth < y.depth;
  });
  std::vector<size_t> open;  // enclosing events of the current one, outermost first
  uint32_t tid = 0;
  for (size_t i : order) {
    const ProfileEvent& e = events[i];
    if (e.tid != tid) open.clear();
    tid = e.tid;
    while (!open.empty()) {
      const ProfileEvent& p = events[open.back()];
      if (p.depth < e.depth && e.ts + e.dur <= p.ts + p.dur + 1e-3) break;
      open.pop_back();
    }
    if (!open.empty()) self[open.back()] -= e.dur;
    open.push_back(i);
  }
  for (double& s : self) s = std::max(s, 0.0);
  return self;
}

// What an event's self time counts as: a host node's op, what a module reported
// ("convolution" on "dnnl"), a region's time outside what its module reported, the
// executor's own time in a run (checking inputs, copying outputs out) or in a run of
// a control-flow node's subgraph (binding its inputs and outputs).
std::pair<std::string, std::string> opOf(const ProfileEvent& e) {
  const std::string& backend = e.arg("backend");
  if (e.cat == "run") return {"(executor)", ""};
  if (e.cat == "subgraph") return {"(subgraph)", ""};
  if (e.cat == "region") return {"(region)", backend};
  if (!e.arg("kind").empty()) return {e.arg("kind"), backend};
  if (!e.arg("op").empty()) return {e.arg("op"), backend};
  return {e.cat, backend};
}

// For a text table: control characters (a node name may hold any) shown as '?'.
std::string printable(std::string s) {
  for (char& c : s)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  return s;
}

std::string clip(const std::string& s, size_t width) {
  return printable(s.size() <= width ? s : s.substr(0, width - 3) + "...");
}

}  // namespace

std::string profileSummary(const std::vector<ProfileEvent>& events, size_t top) {
  size_t runs = 0;
  double run_us = 0, top_level_us = 0;
  for (const ProfileEvent& e : events) {
    if (e.cat == "run") {
      ++runs;
      run_us += e.dur;
    }
    if (e.depth == 0) top_level_us += e.dur;
  }
  const double total_us = run_us > 0 ? run_us : top_level_us;
  char buf[512];
  std::string out;
  if (events.empty()) return "profile: no events (was profiling on during a run?)\n";
  std::snprintf(buf, sizeof buf, "profile: %zu run(s), %.3f ms in all, %.3f ms per run; %zu events\n", runs,
                total_us / 1000, runs ? run_us / 1000 / double(runs) : 0.0, events.size());
  out += buf;

  const std::vector<double> self = selfTimes(events);
  std::map<std::pair<std::string, std::string>, Row> by_op;
  std::map<std::tuple<std::string, std::string, std::string>, Row> by_node;
  for (size_t i = 0; i < events.size(); ++i) {
    const ProfileEvent& e = events[i];
    auto [op, backend] = opOf(e);
    Row& r = by_op[{op, backend}];
    r.op = op;
    r.backend = backend;
    ++r.calls;
    r.self_us += self[i];
    if (e.depth == 0) continue;
    Row& n = by_node[{e.name, op, backend}];
    n.op = op;
    n.backend = backend;
    ++n.calls;
    n.self_us += self[i];
  }
  auto share = [&](double us) { return total_us > 0 ? 100.0 * us / total_us : 0.0; };

  std::vector<Row> ops;
  for (auto& [key, r] : by_op) ops.push_back(r);
  std::stable_sort(ops.begin(), ops.end(), [](const Row& a, const Row& b) { return a.self_us > b.self_us; });
  out += "\ntime by op type (self time: a region's primitives count as theirs, not the region's):\n";
  std::snprintf(buf, sizeof buf, "  %-28s %-8s %8s %12s %8s %12s\n", "op type", "backend", "calls", "total ms",
                "share", "per call us");
  out += buf;
  for (const Row& r : ops) {
    std::snprintf(buf, sizeof buf, "  %-28s %-8s %8zu %12.3f %7.1f%% %12.1f\n", clip(r.op, 28).c_str(),
                  clip(r.backend, 8).c_str(), r.calls, r.self_us / 1000, share(r.self_us),
                  r.self_us / double(r.calls));
    out += buf;
  }

  std::vector<std::pair<std::string, Row>> nodes;
  for (auto& [key, r] : by_node) nodes.emplace_back(std::get<0>(key), r);
  std::stable_sort(nodes.begin(), nodes.end(),
                   [](const auto& a, const auto& b) { return a.second.self_us > b.second.self_us; });
  if (nodes.size() > top) nodes.resize(top);
  std::snprintf(buf, sizeof buf, "\ntop %zu nodes by time (host nodes, regions and primitives; self time):\n",
                nodes.size());
  out += buf;
  std::snprintf(buf, sizeof buf, "  %12s %8s %8s %12s  %-16s %-8s %s\n", "total ms", "share", "calls",
                "per call us", "op type", "backend", "node");
  out += buf;
  for (const auto& [name, r] : nodes) {
    std::snprintf(buf, sizeof buf, "  %12.3f %7.1f%% %8zu %12.1f  %-16s %-8s ", r.self_us / 1000, share(r.self_us),
                  r.calls, r.self_us / double(r.calls), clip(r.op, 16).c_str(), clip(r.backend, 8).c_str());
    out += buf + printable(name) + "\n";  // last and whole: a fused primitive's name is long
  }
  return out;
}

}  // namespace partita
