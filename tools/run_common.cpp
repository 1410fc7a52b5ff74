#include "tools/run_common.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <new>
#include <stdexcept>
#include <random>

#include "base/atomic_file.h"
#include "partita/npy.h"
#include "partita/profile.h"
#include "ir/dtype.h"
#include "ir/tensor.h"
#include "partita/error.h"

namespace partita::cli {

namespace {

Tensor randomTensor(const IoInfo& info, std::mt19937_64& rng) {
  std::vector<int64_t> shape;
  for (int64_t d : info.shape) {
    if (d < 0)
      throw Error(ErrorCode::kInvalidArgument, "input '" + info.name +
                                                   "' has a dimension not fixed at compile time; give its data with "
                                                   "--input or fix it with --shape " + info.name + "=...");
    shape.push_back(d);
  }
  Tensor t(info.dtype, shape);
  int64_t n = t.numel();
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::uniform_int_distribution<int> small(0, 9);
  switch (info.dtype) {
    case DType::kFloat32:
      for (int64_t i = 0; i < n; ++i) t.as<float>()[i] = unit(rng);
      break;
    case DType::kFloat64:
      for (int64_t i = 0; i < n; ++i) t.as<double>()[i] = unit(rng);
      break;
    case DType::kFloat16:
      for (int64_t i = 0; i < n; ++i) t.as<uint16_t>()[i] = ir::floatToHalf(unit(rng));
      break;
    case DType::kInt64:
      for (int64_t i = 0; i < n; ++i) t.as<int64_t>()[i] = small(rng);
      break;
    case DType::kInt32:
      for (int64_t i = 0; i < n; ++i) t.as<int32_t>()[i] = small(rng);
      break;
    case DType::kBool:
      for (int64_t i = 0; i < n; ++i) t.as<bool>()[i] = small(rng) < 5;
      break;
    default:
      for (int64_t i = 0; i < n; ++i) static_cast<uint8_t*>(t.data())[i * int64_t(dtypeSize(info.dtype))] = uint8_t(small(rng));
  }
  return t;
}

}  // namespace

void addRunOptions(CLI::App* cmd, RunOptions& o) {
  cmd->add_option("-i,--input", o.inputs,
                  "Input data NAME=PATH (.npy or ONNX TensorProto .pb); repeatable. Without any, inputs are random "
                  "(see --seed)");
  cmd->add_option("-o,--output-dir", o.output_dir, "Write each output to DIR/<name>.npy");
  cmd->add_option("-n,--repeat", o.repeat, "Timed runs (default 1)")->check(CLI::PositiveNumber);
  cmd->add_option("--warmup", o.warmup, "Untimed runs before timing (default 0)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--seed", o.seed, "Seed for random inputs (default 0)");
  cmd->add_option("-t,--threads", o.threads, "Kernel threads (default 2)")->check(CLI::PositiveNumber);
  cmd->add_flag("-q,--quiet", o.quiet, "Do not print outputs");
  cmd->add_option("--profile", o.profile,
                  "Profile the timed runs: write a Trace Event Format JSON (chrome://tracing, ui.perfetto.dev) to "
                  "FILE and print time by op type and the top nodes (docs/profiling.md)")
      ->type_name("FILE");
  cmd->add_option("--profile-top", o.profile_top, "Nodes listed in the profile summary (default 15)")
      ->check(CLI::NonNegativeNumber);
}

void runModel(const RunOptions& args, const std::string& model_path,
              const std::function<std::shared_ptr<const Model>()>& load,
              const std::function<Tensor(const std::string&)>& read_tensor) {
  // A target the trace may not replace (a directory, a write-protected file, the model
  // or an input) is refused before the work, not after.
  if (!args.profile.empty()) {
    std::vector<SourceFile> keep;
    FileId id;
    if (fileIdOf(model_path, id)) keep.push_back({id, "the model '" + model_path + "'"});
    for (const std::string& spec : args.inputs) {
      const std::string path = spec.substr(spec.find('=') + 1);
      if (fileIdOf(path, id)) keep.push_back({id, "the input file '" + path + "'"});
    }
    artifact::checkReplaceable(args.profile, keep);
  }
  auto t0 = std::chrono::steady_clock::now();
  std::shared_ptr<const Model> model = load();
  double load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

  std::map<std::string, std::string> given;
  for (const std::string& spec : args.inputs) {
    auto eq = spec.find('=');
    if (eq == std::string::npos || eq == 0)
      throw Error(ErrorCode::kInvalidArgument, "--input expects NAME=PATH, got '" + spec + "'");
    if (eq + 1 == spec.size()) throw Error(ErrorCode::kInvalidArgument, "--input " + spec + " names no file");
    if (!given.emplace(spec.substr(0, eq), spec.substr(eq + 1)).second)
      throw Error(ErrorCode::kInvalidArgument, "--input gives input '" + spec.substr(0, eq) + "' twice");
  }
  // .npy and TensorProto files hold tensors: a sequence or optional cannot be given.
  for (const auto* list : {&model->inputs(), &model->outputs()})
    for (const IoInfo& v : *list)
      if (!v.non_tensor.empty())
        throw Error(ErrorCode::kUnsupported,
                    std::string(list == &model->inputs() ? "input '" : "output '") + v.name + "' is " +
                        v.non_tensor +
                        "; the CLI takes and gives tensors only (partita conformance reads "
                        "sequences and optionals from ONNX .pb files)");
  Session session(model);
  std::vector<Tensor> held;
  held.reserve(model->inputs().size());
  std::mt19937_64 rng(args.seed);
  for (const IoInfo& in : model->inputs()) {
    auto it = given.find(in.name);
    if (it != given.end()) {
      held.push_back(read_tensor(it->second));
      given.erase(it);
    } else if (args.inputs.empty()) {
      held.push_back(randomTensor(in, rng));
    } else {
      throw Error(ErrorCode::kInvalidArgument, "missing input '" + in.name + "': give it with --input " + in.name + "=PATH");
    }
    session.setInput(in.name, held.back());
  }
  if (!given.empty()) {
    std::string known;
    for (const IoInfo& in : model->inputs()) known += (known.empty() ? "" : ", ") + in.name;
    throw Error(ErrorCode::kInvalidArgument,
                "the model has no input named '" + given.begin()->first + "' (inputs: " + known + ")");
  }

  for (int i = 0; i < args.warmup; ++i) session.run();
  if (!args.profile.empty()) session.enableProfiling();
  std::vector<double> times;
  for (int i = 0; i < std::max(args.repeat, 1); ++i) {
    auto s = std::chrono::steady_clock::now();
    session.run();
    times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - s).count());
  }

  if (!args.output_dir.empty()) std::filesystem::create_directories(args.output_dir);
  const auto& outs = model->outputs();
  for (size_t i = 0; i < outs.size(); ++i) {
    const Tensor& t = session.outputs()[i];
    if (!args.quiet) std::printf("output %-20s %s%s%s\n", outs[i].name.c_str(), std::string(ir::dtypeName(t.dtype())).c_str(),
                                 ir::shapeStr(t.shape()).c_str(), summarize(t).c_str());
    if (!args.output_dir.empty()) {
      std::string file = (std::filesystem::path(args.output_dir) / (safeFileName(outs[i].name) + ".npy")).string();
      writeNpy(file, t.view());
    }
  }
  std::sort(times.begin(), times.end());
  double mean = 0;
  for (double t : times) mean += t;
  mean /= double(times.size());
  const ThreadRuntimeInfo omp = threadRuntimeInfo();
  std::printf("load %.2f ms; %zu run(s) on %d thread(s): median %.3f ms, min %.3f ms, mean %.3f ms; planned activations %.2f MiB; "
              "OpenMP %s%s, wait %s\n",
              load_ms, times.size(), args.threads, times[times.size() / 2], times.front(), mean,
              double(model->plannedActivationBytes()) / (1 << 20), omp.openmp_runtime.c_str(),
              omp.dnnl_openmp_runtime.empty() || omp.dnnl_openmp_runtime == omp.openmp_runtime
                  ? ""
                  : (" (oneDNN on " + omp.dnnl_openmp_runtime + ")").c_str(),
              omp.wait_policy.c_str());
  if (!args.profile.empty()) {
    writeTrace(args.profile, session.profileEvents());
    std::printf("\n%s\nprofile of the %zu timed run(s) written to %s (open it in ui.perfetto.dev or chrome://tracing)\n",
                profileSummary(session.profileEvents(), args.profile_top).c_str(), times.size(), args.profile.c_str());
  }
}

std::string summarize(const Tensor& t) {
  int64_t n = t.numel();
  if (n == 0) return "";
  std::vector<double> v;
  v.reserve(size_t(n));
  for (int64_t i = 0; i < n; ++i) {
    switch (t.dtype()) {
      case DType::kFloat32: v.push_back(t.as<float>()[i]); break;
      case DType::kFloat64: v.push_back(t.as<double>()[i]); break;
      case DType::kFloat16: v.push_back(ir::halfToFloat(t.as<uint16_t>()[i])); break;
      case DType::kInt64: v.push_back(double(t.as<int64_t>()[i])); break;
      case DType::kInt32: v.push_back(t.as<int32_t>()[i]); break;
      case DType::kBool: v.push_back(t.as<bool>()[i]); break;
      case DType::kUInt8: v.push_back(t.as<uint8_t>()[i]); break;
      case DType::kInt8: v.push_back(t.as<int8_t>()[i]); break;
      default: return "";
    }
  }
  double mn = v[0], mx = v[0], sum = 0;
  for (double x : v) {
    mn = std::min(mn, x);
    mx = std::max(mx, x);
    sum += x;
  }
  char buf[160];
  std::snprintf(buf, sizeof buf, "  min %.6g max %.6g mean %.6g first [", mn, mx, sum / double(n));
  std::string s = buf;
  for (size_t i = 0; i < std::min<size_t>(v.size(), 5); ++i) {
    std::snprintf(buf, sizeof buf, "%s%.6g", i ? ", " : "", v[i]);
    s += buf;
  }
  return s + (v.size() > 5 ? ", ...]" : "]");
}

std::string describeCurrentException() {
  try {
    throw;
  } catch (const Error& e) {
    return e.what();
  } catch (const std::bad_alloc&) {
    return "out of memory: something needs more memory than this machine gives (a model, input file or "
           "--shape may describe a far larger tensor than intended)";
  } catch (const std::length_error&) {
    return "a size is larger than this machine can hold (a model, input file or --shape may describe an "
           "impossibly large tensor)";
  } catch (const std::filesystem::filesystem_error& e) {
    std::string s = "file system error";
    if (!e.path1().empty()) s += " on '" + e.path1().string() + "'";
    return s + ": " + e.code().message();
  } catch (const std::out_of_range&) {
    return "internal error: an index was out of range (the input reached a path that does not check it; "
           "please report it with the input)";
  } catch (...) {
    return "internal error: an unexpected failure (please report it with the input)";
  }
}

std::string safeFileName(const std::string& name) {
  std::string s = name;
  for (char& c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.')) c = '_';
  if (s.empty() || s[0] == '.') s = "_" + s;
  return s;
}

}  // namespace partita::cli
