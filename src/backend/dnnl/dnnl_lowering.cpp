#include "backend/dnnl/dnnl_lowering.h"

#include <omp.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "backend/constant_sink.h"
#include "backend/dnnl/dnnl_function_lowering.h"
#include "backend/dnnl/dnnl_memory_desc.h"
#include "backend/dnnl/dnnl_module.h"
#include "backend/dnnl/dnnl_module_builder.h"
#include "backend/dnnl/dnnl_primitive.h"
#include "backend/dnnl/dnnl_replay.h"
#include "partita/error.h"

namespace partita::dnnl_backend {

namespace {

// Whether the run-time half needs a region constant's bytes: what the decoders read
// of values (axes, starts, shapes, bounds, exponents: integer constants and
// one-element float ones). Weights are known by their type only.
bool keepsBytes(const ir::Constant& c) {
  if (c.dtype == ir::DType::kFloat32) return ir::shapeNumel(c.shape) <= 1;
  return c.nbytes() <= 65536;
}

// A shape-polymorphic region as a graph of its own (PolyFunction::graph), its
// constants numbered locally; the bytes the run-time half needs go into the blob.
std::shared_ptr<PolyFunction> regionGraph(const ir::Graph& g, const backend::Region& r, ModuleBuilder& mb) {
  auto poly = std::make_shared<PolyFunction>();
  poly->representative = r.representative;
  ir::Graph& rg = poly->graph;
  // A Resize's roi, scales and sizes decide its output's sides at every shape: their
  // bytes go along whatever their type and size.
  std::set<ir::ConstId> read_by_inference;
  for (ir::NodeId id : r.nodes) {
    const ir::Node& n = g.nodes[size_t(id)];
    if (n.op_type != "Resize" && n.op_type != "Upsample") continue;
    for (size_t i = 1; i < n.inputs.size(); ++i)
      if (n.inputs[i] != ir::kNoValue && g.value(n.inputs[i]).isConstant())
        read_by_inference.insert(g.value(n.inputs[i]).constant);
  }
  std::map<ir::ValueId, ir::ValueId> local;
  std::map<ir::ConstId, ir::ConstId> local_const;
  auto map = [&](ir::ValueId v) -> ir::ValueId {
    if (v == ir::kNoValue) return ir::kNoValue;
    auto it = local.find(v);
    if (it != local.end()) return it->second;
    const ir::Value& value = g.value(v);
    ir::Value copy{value.name, value.type, ir::kNoNode, ir::kNoConst};
    if (value.isConstant()) {
      auto c = local_const.find(value.constant);
      if (c == local_const.end()) {
        const ir::Constant& k = g.constants.get(value.constant);
        ir::ConstId id = rg.constants.add(k.name, k.dtype, k.shape, k.bytes, k.layout);
        poly->global.push_back(value.constant);
        const bool keep = keepsBytes(k) || read_by_inference.count(value.constant) > 0;
        poly->bytes_at.push_back(keep ? int64_t(mb.embedBytes(k.bytes.data, k.nbytes())) : -1);
        c = local_const.emplace(value.constant, id).first;
      }
      copy.constant = c->second;
    }
    rg.values.push_back(std::move(copy));
    return local[v] = ir::ValueId(rg.values.size() - 1);
  };
  for (ir::ValueId in : r.inputs) rg.inputs.push_back(map(in));
  for (ir::NodeId id : r.nodes) {
    ir::Node node = g.nodes[size_t(id)];
    for (const auto& [name, a] : node.attrs.all())
      if (a.kind == ir::Attribute::Kind::kTensor)
        internal("node '" + node.name + "' of a shape-polymorphic region has a tensor attribute");
    for (ir::ValueId& in : node.inputs) in = map(in);
    for (ir::ValueId& out : node.outputs) out = map(out);
    rg.addNode(std::move(node));
  }
  for (ir::ValueId out : r.outputs) rg.outputs.push_back(map(out));
  rg.verify();
  return poly;
}

using WeightsKey = std::pair<ir::ConstId, bool>;  // the module's ConstId of the source, folded

// How fast the kernel oneDNN computes `step` with is likely to be, by its kind: 0 for
// none or the reference implementation (it takes any layout, at tens of times the
// time), 1 GEMM-based, 2 direct JIT kernels, 3 BRGEMM-based ones (what oneDNN
// prefers on AVX-512 machines).
int kernelRank(const Step& step) {
  std::string impl;
  try {
    impl = implementationName(makePrimitiveDesc(step, cpuEngine()));
  } catch (const dnnl::error&) {
    return 0;
  }
  if (impl.rfind("ref", 0) == 0) return 0;
  if (impl.rfind("brg", 0) == 0) return 3;
  if (impl.rfind("jit", 0) == 0) return 2;
  return 1;
}
bool fastKernel(const Step& step) { return kernelRank(step) > 0; }

// `step` (a convolution or a 2-D matmul over constant weights, as lowered at the
// representative shapes) at another batch and size: its source and destination (and
// full-size post-op operands) resized, their layouts left to oneDNN where it chose
// them, else dense in the same order of dims. nullopt for
// another kind of step or a size the window does not fit.
std::optional<Step> resized(const Step& step, int64_t batch, const std::vector<int64_t>& sizes) {
  Step t = step;
  Arg* src = t.find(DNNL_ARG_SRC);
  Arg* dst = t.find(DNNL_ARG_DST);
  Arg* w = t.find(DNNL_ARG_WEIGHTS);
  if (!src || !dst || !w) return std::nullopt;
  std::vector<int64_t> sd = dimsOf(src->md), dd = dimsOf(dst->md);
  const std::vector<int64_t> old_dd = dd;
  if (step.kind == StepKind::kConvolution) {
    const size_t ns = sd.size() - 2;
    if (sizes.size() != ns || dd.size() != sd.size()) return std::nullopt;
    const std::vector<int64_t> wd = dimsOf(w->md);
    sd[0] = dd[0] = batch;
    for (size_t i = 0; i < ns; ++i) {
      const int64_t k = wd[wd.size() - ns + i], dil = i < step.dilates.size() ? step.dilates[i] : 0;
      const int64_t out = (sizes[i] + step.pad_l.at(i) + step.pad_r.at(i) - ((k - 1) * (dil + 1) + 1)) /
                              step.strides.at(i) + 1;
      if (sizes[i] < 1 || out < 1) return std::nullopt;
      sd[2 + i] = sizes[i];
      dd[2 + i] = out;
    }
  } else if (step.kind == StepKind::kMatMul && sd.size() == 2 && dd.size() == 2) {
    sd[0] = dd[0] = batch;  // the rows
  } else {
    return std::nullopt;
  }
  // A fixed layout keeps its order of dims (the upsampling deconvolution's 1x1
  // convolution writes channels-last; a plain destination there would refuse the
  // kernels that the real step takes).
  src->md = src->chosen ? anyDesc(sd) : denseLike(src->md, sd);
  dst->md = dst->chosen ? anyDesc(dd) : denseLike(dst->md, dd);
  for (Arg& a : t.args) {
    if (!(a.key & DNNL_ARG_ATTR_MULTIPLE_POST_OP_BASE)) continue;
    std::vector<int64_t> od = dimsOf(a.md);
    if (od.size() != dd.size()) return std::nullopt;
    for (size_t j = 0; j < od.size(); ++j)
      if (od[j] == old_dd[j] && old_dd[j] != 1) od[j] = dd[j];
    a.md = plainDesc(od);
  }
  return t;
}

// The sizes resized() tries for a step: its sizes at the representative shapes scaled
// as the model's inputs would scale them from a side of 224 to sides of 32 to 1024 (a
// step after a stride of 32 sees sides of 1 to 32), in 40 steps, each side alone
// too, and at batches 2 and 8; a matmul's rows from 1 to 1000.
std::vector<std::pair<int64_t, std::vector<int64_t>>> syntheticSizes(const Step& step) {
  std::vector<std::pair<int64_t, std::vector<int64_t>>> out;
  const Arg* src = step.find(DNNL_ARG_SRC);
  if (!src) return out;
  const std::vector<int64_t> sd = dimsOf(src->md);
  if (step.kind == StepKind::kMatMul) {
    for (int64_t m : {1, 2, 3, 4, 7, 8, 15, 16, 31, 32, 50, 64, 100, 128, 255, 256, 1000}) out.push_back({m, {}});
    return out;
  }
  if (step.kind != StepKind::kConvolution || sd.size() < 3) return out;
  const std::vector<int64_t> rep(sd.begin() + 2, sd.end());
  const int64_t batch = sd[0];
  auto scaled = [&](double f, int64_t v) { return std::max<int64_t>(1, int64_t(double(v) * f + 0.5)); };
  constexpr int kSteps = 24;
  std::set<std::vector<int64_t>> seen{rep};  // each size once (small sides round alike)
  for (int i = 0; i <= kSteps; ++i) {
    const double f = (32.0 / 224.0) * std::pow(1024.0 / 32.0, double(i) / kSteps);
    std::vector<int64_t> all(rep.size()), one = rep;
    for (size_t d = 0; d < rep.size(); ++d) all[d] = scaled(f, rep[d]);
    one[i % rep.size()] = scaled(f, rep[i % rep.size()]);  // one side at a time
    for (const std::vector<int64_t>* sizes : {&all, &one})
      if (seen.insert(*sizes).second) out.push_back({batch, *sizes});
  }
  for (int64_t b : {int64_t(2), int64_t(8)})
    if (b != batch) out.push_back({b, rep});
  return out;
}

// Weights layouts for a shape-polymorphic region that oneDNN's fast kernels take at
// other shapes as well as at the representative one. oneDNN chooses a weights layout
// for one shape (its blocking depends on the sizes: brgconv's output-channel block,
// for one); at another size the kernel that chose it may want another blocking and
// refuse the stored one, and only the reference implementation -- tens of times
// slower -- is left. Each step that reads constant weights is tried at the region's
// probe shapes (the records of the lowering at the representative shapes, `poly` and
// `at_rep`, replayed) and at synthetic sizes (resized()); for weights whose stored
// layout leaves a step without a fast kernel somewhere, the candidates -- the stored
// layout, each one oneDNN prefers somewhere, and the layouts of its size-independent
// kernels (direct convolution blocked by 16 or 8, GEMM's plain) -- are scored by the
// tries where no fast kernel takes them. Returns the weights whose best candidate is
// not the stored one.
std::map<WeightsKey, memory::desc> robustWeights(const PolyFunction& poly, const Function& at_rep,
                                                 const std::vector<std::vector<std::vector<int64_t>>>& probes) {
  std::map<ir::ConstId, WeightsKey> key_of;  // a weights argument's constant -> its key
  for (const PolyFunction::Derived& d : poly.derived) key_of.emplace(d.id, WeightsKey{d.source, !d.same_values});
  for (const PolyFunction::Weights& w : poly.weights) key_of.emplace(w.source, WeightsKey{w.source, w.folded});
  std::vector<Function> functions{at_rep};
  for (const auto& shapes : probes) {
    try {
      functions.push_back(replayFunction(poly, shapes));
    } catch (const Error&) {
      // a shape the region cannot take (too small for a window): nothing to learn
    }
  }
  // Every try of a step that reads constant weights, by key, and the candidate layouts.
  std::map<WeightsKey, std::vector<Step>> tries;
  std::map<WeightsKey, std::vector<memory::desc>> candidates;
  auto addCandidate = [&](const WeightsKey& k, const memory::desc& md) {
    for (const memory::desc& c : candidates[k])
      if (sameDesc(c, md)) return;
    candidates[k].push_back(md);
  };
  auto preferred = [&](const WeightsKey& k, const Step& step) {
    Step probe = step;
    probe.find(DNNL_ARG_WEIGHTS)->chosen = true;
    try {
      dnnl::primitive_desc_base pd = makePrimitiveDesc(probe, cpuEngine());
      addCandidate(k, pd.query_md(dnnl::query::exec_arg_md, DNNL_ARG_WEIGHTS));
    } catch (const dnnl::error&) {
    }
  };
  for (size_t f = 0; f < functions.size(); ++f)
    for (const Step& step : functions[f].steps) {
      const Arg* w = step.find(DNNL_ARG_WEIGHTS);
      // RNN weights (DNNL_ARG_WEIGHTS_LAYER is the same key) are always plain ldigo.
      if (!w || w->source != ArgSource::kConstant || step.kind == StepKind::kRnn) continue;
      auto k = key_of.find(ir::ConstId(w->index));
      if (k == key_of.end()) continue;
      addCandidate(k->second, w->md);  // the stored layout comes first
      tries[k->second].push_back(step);
      if (f == 0)
        for (const auto& [batch, sizes] : syntheticSizes(step))
          if (std::optional<Step> t = resized(step, batch, sizes)) tries[k->second].push_back(std::move(*t));
    }
  // Layouts whose kernels take any size (oneDNN's direct and GEMM convolutions, blocked
  // by 16 or 8 channels or plain; matmul's blockings and plain).
  auto addPortable = [&](const WeightsKey& k, const memory::desc like) {
    using tag = memory::format_tag;
    static const std::vector<tag> kTags = {
        tag::OIhw16i16o, tag::OIhw8i8o, tag::Ohwi16o, tag::oihw, tag::gOIhw16i16o, tag::Goihw16g, tag::goihw,
        tag::OIw16i16o,  tag::Owi16o,   tag::oiw,     tag::OIdhw16i16o, tag::oidhw, tag::BA16a64b, tag::BA16a32b,
        tag::BA16a16b,   tag::ab,       tag::ba};
    for (tag t : kTags) {
      try {
        addCandidate(k, memory::desc(like.dims(), like.data_type(), t));
      } catch (const dnnl::error&) {
      }
    }
  };
  std::map<WeightsKey, memory::desc> pins;
  const bool debug = std::getenv("PARTITA_DEBUG_WEIGHTS") != nullptr;
  for (const auto& entry : tries) {  // (no structured binding: lambdas below use it, which clang 14 refuses)
    const WeightsKey& key = entry.first;
    const auto& uses = entry.second;
    // The tries without a fast kernel for layout `md`, counted up to `limit`.
    auto slow = [&](const memory::desc& md, size_t limit = SIZE_MAX) {
      size_t n = 0;
      for (const Step& s : uses) {
        Step t = s;
        Arg* w = t.find(DNNL_ARG_WEIGHTS);
        w->md = md;
        w->chosen = false;
        n += fastKernel(t) ? 0 : 1;
        if (n > limit) break;
      }
      return n;
    };
    const memory::desc stored = candidates[key][0];
    const size_t stored_slow = slow(stored);
    if (stored_slow == 0) continue;
    for (const Step& s : uses) preferred(key, s);
    addPortable(key, stored);
    // The fewest tries without a fast kernel; among equals, the best kernel at the
    // representative shapes (the first try).
    const std::vector<memory::desc>& c = candidates[key];
    auto rankAtRep = [&](const memory::desc& md) {
      Step t = uses.front();
      Arg* w = t.find(DNNL_ARG_WEIGHTS);
      w->md = md;
      w->chosen = false;
      return kernelRank(t);
    };
    size_t best = 0, best_slow = stored_slow;
    int best_rank = rankAtRep(stored);
    for (size_t i = 1; i < c.size(); ++i) {
      const size_t n = slow(c[i], best_slow);
      if (n > best_slow) continue;
      const int rank = rankAtRep(c[i]);
      if (n < best_slow || rank > best_rank) {
        best = i;
        best_slow = n;
        best_rank = rank;
      }
    }
    if (debug)  // PARTITA_DEBUG_WEIGHTS=1: what the choice saw
      std::fprintf(stderr, "dnnl: weights %u%s: %s without a fast kernel in %zu of %zu tries; %s in %zu\n", key.first,
                   key.second ? " (folded)" : "", formatTag(stored).c_str(), stored_slow, uses.size(),
                   formatTag(c[best]).c_str(), best_slow);
    if (best != 0) pins.emplace(key, c[best]);
  }
  return pins;
}

// Lowers a shape-polymorphic region at its representative shapes (the steps stored in
// the blob; oneDNN chooses the weight layouts there, unless robustWeights finds they
// would leave steps without a fast kernel at the probe shapes) and records what the
// run-time half's replays need.
Function compilePolymorphic(const ir::Graph& g, const backend::Region& r, ModuleBuilder& mb) {
  std::shared_ptr<PolyFunction> poly = regionGraph(g, r, mb);
  const ir::Graph at = regionAt(poly->graph, r.representative);
  const backend::Region region = wholeRegion(at);
  if (!r.probes.empty()) {
    // A trial lowering whose derived constants go nowhere, to replay at the probes.
    backend::PendingConstants scratch(g.constants);
    ModuleBuilder trial(g, scratch);
    PolyFunction recorded = *poly;
    trial.beginPolymorphic(at, recorded);
    Function fn = FunctionLowering(at, trial, region).run();
    trial.endPolymorphic();
    mb.pinWeights(robustWeights(recorded, fn, r.probes));
  }
  mb.beginPolymorphic(at, *poly);
  Function fn = FunctionLowering(at, mb, region).run();
  mb.endPolymorphic();
  mb.pinWeights({});
  fn.poly = std::move(poly);
  return fn;
}

}  // namespace

backend::ModuleImage compileRegions(const ir::Graph& g, const std::vector<backend::Region>& regions,
                                    backend::ConstantSink& sink, bool bf16, bool winograd) {
  // oneDNN tunes implementations to the thread count: the compiler driver has set
  // this thread's OpenMP team size to the one runs will use (CompileOptions::threads).
  ModuleBuilder mb(g, sink);
  for (const backend::Region& r : regions) {
    try {
      if (r.polymorphic()) {
        mb.program().functions.push_back(compilePolymorphic(g, r, mb));
      } else {
        FunctionLowering lowering(g, mb, r, bf16, winograd);
        mb.program().functions.push_back(lowering.run());
      }
    } catch (const dnnl::error& e) {
      throw Error(ErrorCode::kInternal,
                  std::string("dnnl backend: oneDNN rejected a region it was given: ") + e.what());
    }
  }
  backend::ModuleImage image = mb.finish();
  // What the recorded layouts were chosen for: checked by DnnlModule::load.
  image.assumptions = layoutAssumptions(omp_get_max_threads());
  return image;
}

}  // namespace partita::dnnl_backend
