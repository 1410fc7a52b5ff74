#include "backend/ewise/ewise_module.h"

#include <omp.h>

#include <algorithm>
#include <map>
#include <memory>

#include "kernels/elementwise_functors.h"
#include "ir/type.h"
#include "partita/error.h"

namespace partita::ewise {

namespace {

using namespace kernels::elementwise;

// One operand of an instruction over a tile: a run of values, or one value.
struct Src {
  const float* p = nullptr;
  float s = 0;
  bool vec = true;
};

template <class F>
void unaryLoop(float* __restrict d, const float* __restrict a, int64_t n, const F& f) {
  for (int64_t i = 0; i < n; ++i) d[i] = f(a[i]);
}

template <class F>
void binaryLoop(float* __restrict d, Src a, Src b, int64_t n, const F& f) {
  if (a.vec && b.vec) {
    const float* __restrict x = a.p;
    const float* __restrict y = b.p;
    for (int64_t i = 0; i < n; ++i) d[i] = f(x[i], y[i]);
  } else if (a.vec) {
    const float* __restrict x = a.p;
    const float y = b.s;
    for (int64_t i = 0; i < n; ++i) d[i] = f(x[i], y);
  } else {
    const float x = a.s;
    const float* __restrict y = b.p;
    for (int64_t i = 0; i < n; ++i) d[i] = f(x, y[i]);
  }
}

// The host kernels' functors, so that a fused chain computes what the host's
// separate passes compute, bit for bit.
void execute(const Instr& in, float* d, Src a, Src b, int64_t n) {
  switch (in.op) {
    case Op::kAdd: return binaryLoop(d, a, b, n, AddOp{});
    case Op::kSub: return binaryLoop(d, a, b, n, SubOp{});
    case Op::kMul: return binaryLoop(d, a, b, n, MulOp{});
    case Op::kDiv: return binaryLoop(d, a, b, n, DivOp{});
    case Op::kMax: return binaryLoop(d, a, b, n, MaxOp{});
    case Op::kMin: return binaryLoop(d, a, b, n, MinOp{});
    case Op::kRelu: return unaryLoop(d, a.p, n, ReluOp{});
    case Op::kLeakyRelu: return unaryLoop(d, a.p, n, LeakyReluOp(in.alpha));
    case Op::kThresholdedRelu: return unaryLoop(d, a.p, n, ThresholdedReluOp(in.alpha));
    case Op::kElu: return unaryLoop(d, a.p, n, EluOp(in.alpha));
    case Op::kSelu: return unaryLoop(d, a.p, n, SeluOp(in.alpha, in.beta));
    case Op::kCelu: return unaryLoop(d, a.p, n, CeluOp(in.alpha));
    case Op::kSigmoid: return unaryLoop(d, a.p, n, SigmoidOp{});
    case Op::kHardSigmoid: return unaryLoop(d, a.p, n, HardSigmoidOp(in.alpha, in.beta));
    case Op::kHardSwish: return unaryLoop(d, a.p, n, HardSwishOp{});
    case Op::kSoftplus: return unaryLoop(d, a.p, n, SoftplusOp{});
    case Op::kSoftsign: return unaryLoop(d, a.p, n, SoftsignOp{});
    case Op::kTanh: return unaryLoop(d, a.p, n, TanhOp{});
    case Op::kExp: return unaryLoop(d, a.p, n, ExpOp{});
    case Op::kLog: return unaryLoop(d, a.p, n, LogOp{});
    case Op::kSqrt: return unaryLoop(d, a.p, n, SqrtOp{});
    case Op::kNeg: return unaryLoop(d, a.p, n, NegOp{});
    case Op::kAbs: return unaryLoop(d, a.p, n, AbsOp{});
    case Op::kReciprocal: return unaryLoop(d, a.p, n, ReciprocalOp{});
    case Op::kErf: return unaryLoop(d, a.p, n, ErfOp{});
    case Op::kFloor: return unaryLoop(d, a.p, n, FloorOp{});
    case Op::kCeil: return unaryLoop(d, a.p, n, CeilOp{});
    case Op::kRound: return unaryLoop(d, a.p, n, RoundOp{});
    case Op::kClip: return unaryLoop(d, a.p, n, ClipOp<float>{in.alpha, in.beta});
  }
}

int64_t product(const std::vector<int64_t>& v, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t i = begin; i < end; ++i) n *= v[i];
  return n;
}

// Splits `shape` into outer dimensions [0, k) and an inner run [k, rank) over which
// every constant is either contiguous (its dims there equal the shape's) or constant
// (its dims there are 1). Returns k; `contiguous[c]` says which.
size_t splitInner(const Function& fn, const std::vector<int64_t>& shape, std::vector<bool>& contiguous) {
  enum Mode { kUndecided, kContiguous, kOneValue };
  std::vector<Mode> mode(fn.constants.size(), kUndecided);
  size_t k = shape.size();
  while (k > 0) {
    const size_t d = k - 1;
    std::vector<Mode> next = mode;
    bool ok = true;
    if (shape[d] != 1)
      for (size_t c = 0; c < fn.constants.size() && ok; ++c) {
        Mode want = fn.constants[c].shape[d] == 1 ? kOneValue : kContiguous;
        if (next[c] == kUndecided) next[c] = want;
        ok = next[c] == want;
      }
    if (!ok) break;
    mode = std::move(next);
    k = d;
  }
  contiguous.assign(mode.size(), false);
  for (size_t c = 0; c < mode.size(); ++c) contiguous[c] = mode[c] == kContiguous;
  return k;
}

}  // namespace

std::shared_ptr<EwiseModule> EwiseModule::load(const runtime::ModuleLoadContext& ctx) {
  std::shared_ptr<EwiseModule> m(new EwiseModule(runtime::shapeCacheEntries(ctx.shape_cache)));
  m->blob_ = ctx.blob;
  Program p = readProgram(ctx.blob.data, ctx.blob.size);
  std::map<ir::ConstId, runtime::ConstUseKind> declared;
  for (const runtime::ConstUse& u : ctx.uses) declared[u.id] = u.kind;
  const std::byte* data = ctx.blob.data + p.data_offset;

  for (size_t f = 0; f < p.functions.size(); ++f) {
    LoadedFunction lf;
    lf.fn = std::move(p.functions[f]);
    const Function& fn = lf.fn;
    const std::string where = "ewise module: function " + std::to_string(f) + ": ";
    for (size_t c = 0; c < fn.constants.size(); ++c) {
      const ConstSlot& slot = fn.constants[c];
      const int64_t numel = ir::shapeNumel(slot.shape);
      auto use = declared.find(slot.id);
      const runtime::ConstUseKind want = slot.embedded ? runtime::ConstUseKind::kEmbed : runtime::ConstUseKind::kBorrow;
      if (use == declared.end() || use->second != want)
        throw Error(ErrorCode::kInvalidArtifact, where + "constant " + std::to_string(slot.id) + " is not declared as " +
                                                     (slot.embedded ? "embedded" : "borrowed") + " by the module");
      if (slot.embedded) {
        const std::byte* at = data + slot.offset;
        if (reinterpret_cast<uintptr_t>(at) % alignof(float) != 0)
          throw Error(ErrorCode::kInvalidArtifact, where + "embedded constant " + std::to_string(slot.id) +
                                                       " is not aligned for float32");
        lf.consts.push_back(reinterpret_cast<const float*>(at));
      } else {
        const ir::Tensor& t = ctx.store->get(slot.id);
        if (t.dtype != ir::DType::kFloat32 || t.numel() != numel || !ctx.store->layout(slot.id).empty())
          throw Error(ErrorCode::kInvalidArtifact, where + "constant " + std::to_string(slot.id) + " is " +
                                                       std::string(ir::dtypeName(t.dtype)) + ir::shapeStr(t.shape) +
                                                       " in the store, the blob expects dense float32" +
                                                       ir::shapeStr(slot.shape));
        lf.consts.push_back(t.as<const float>());
      }
    }
    if (!fn.polymorphic()) lf.walk = planWalk(fn, fn.shape);

    lf.temp_slot.assign(fn.num_registers, -1);
    lf.output_of.assign(fn.num_registers, -1);
    for (size_t o = 0; o < fn.outputs.size(); ++o) lf.output_of[fn.outputs[o]] = int32_t(o);
    for (uint32_t r = fn.num_inputs; r < fn.num_registers; ++r)
      if (lf.output_of[r] < 0) lf.temp_slot[r] = int32_t(lf.num_temps++);
    m->functions_.push_back(std::move(lf));
  }
  return m;
}

std::shared_ptr<const EwiseModule::Walk> EwiseModule::planWalk(const Function& fn, const std::vector<int64_t>& shape) {
  auto walk = std::make_shared<Walk>();
  walk->shape = shape;
  const size_t k = splitInner(fn, shape, walk->contiguous);
  walk->outer.assign(shape.begin(), shape.begin() + std::ptrdiff_t(k));
  walk->rows = product(shape, 0, k);
  walk->inner = product(shape, k, shape.size());
  for (const ConstSlot& slot : fn.constants) {
    // Row-major strides of the constant, zero along its broadcast dimensions.
    std::vector<int64_t> strides(slot.shape.size());
    int64_t s = 1;
    for (size_t d = slot.shape.size(); d-- > 0;) {
      strides[d] = slot.shape[d] == 1 ? 0 : s;
      s *= slot.shape[d];
    }
    walk->row_strides.emplace_back(strides.begin(), strides.begin() + std::ptrdiff_t(k));
  }
  return walk;
}

bool EwiseModule::shapePolymorphic(uint32_t fn) const {
  return fn < functions_.size() && functions_[fn].fn.polymorphic();
}

const std::vector<int64_t>& EwiseModule::callShape(uint32_t f, const std::vector<ir::Tensor>& inputs,
                                                   const std::vector<ir::Tensor>* outputs) const {
  const Function& fn = functions_[f].fn;
  const std::string where = "ewise function " + std::to_string(f) + ": ";
  if (inputs.size() != fn.num_inputs || (outputs && outputs->size() != fn.outputs.size()))
    throw Error(ErrorCode::kInvalidArgument, where + "called with " + std::to_string(inputs.size()) + " inputs and " +
                                                 std::to_string(outputs ? outputs->size() : 0) +
                                                 " outputs, compiled for " + std::to_string(fn.num_inputs) + " and " +
                                                 std::to_string(fn.outputs.size()));
  // Every tensor has the first input's shape, which fits the function's.
  const std::vector<int64_t>& shape = inputs.empty() ? fn.shape : inputs[0].shape;
  auto fits = [&](const ir::Tensor& t) {
    if (t.dtype != ir::DType::kFloat32 || t.shape != shape || shape.size() != fn.shape.size()) return false;
    for (size_t d = 0; d < shape.size(); ++d)
      if (fn.shape[d] != kRunTimeDim && fn.shape[d] != shape[d]) return false;
    return true;
  };
  auto check = [&](const ir::Tensor& t, const char* what, size_t i) {
    if (!fits(t)) {
      std::string compiled = "[";
      for (size_t d = 0; d < fn.shape.size(); ++d)
        compiled += (d ? "," : "") + (fn.shape[d] == kRunTimeDim ? std::string("?") : std::to_string(fn.shape[d]));
      throw Error(ErrorCode::kInvalidArgument, where + what + " " + std::to_string(i) + " is " +
                                                   std::string(ir::dtypeName(t.dtype)) + ir::shapeStr(t.shape) +
                                                   ", compiled for float32" + compiled + "]" +
                                                   (i > 0 || outputs ? " with every input and output of one shape" : ""));
    }
  };
  for (size_t i = 0; i < inputs.size(); ++i) check(inputs[i], "input", i);
  if (outputs)
    for (size_t i = 0; i < outputs->size(); ++i) check((*outputs)[i], "output", i);
  return shape;
}

std::vector<std::vector<int64_t>> EwiseModule::outputShapes(uint32_t f, const std::vector<ir::Tensor>& inputs) const {
  if (f >= functions_.size())
    throw Error(ErrorCode::kInvalidArgument, "ewise module has no function " + std::to_string(f));
  const std::vector<int64_t>& shape = callShape(f, inputs, nullptr);
  return std::vector<std::vector<int64_t>>(functions_[f].fn.outputs.size(), shape);
}

size_t EwiseModule::scratchpadBytes() const {
  uint32_t temps = 0;
  for (const LoadedFunction& lf : functions_) temps = std::max(temps, lf.num_temps);
  return size_t(temps) * kTile * sizeof(float);
}

std::vector<std::pair<ir::ConstId, const float*>> EwiseModule::constantPointers(uint32_t fn) const {
  std::vector<std::pair<ir::ConstId, const float*>> out;
  const LoadedFunction& lf = functions_.at(fn);
  for (size_t c = 0; c < lf.consts.size(); ++c) out.emplace_back(lf.fn.constants[c].id, lf.consts[c]);
  return out;
}

void EwiseModule::runTile(const LoadedFunction& lf, const Walk& walk, const std::vector<ir::Tensor>& inputs,
                          const std::vector<ir::Tensor>& outputs, int64_t row, int64_t begin, int64_t n,
                          float* scratch) const {
  const Function& fn = lf.fn;
  const int64_t base = row * walk.inner + begin;
  // Each constant's offset for this row.
  constexpr size_t kInlineConsts = 16;
  int64_t offsets_inline[kInlineConsts];
  std::unique_ptr<int64_t[]> offsets_heap;
  int64_t* offsets = offsets_inline;
  if (lf.consts.size() > kInlineConsts) {
    offsets_heap.reset(new int64_t[lf.consts.size()]);
    offsets = offsets_heap.get();
  }
  std::fill(offsets, offsets + lf.consts.size(), 0);
  int64_t rest = row;
  for (size_t d = walk.outer.size(); d-- > 0;) {
    const int64_t idx = rest % walk.outer[d];
    rest /= walk.outer[d];
    for (size_t c = 0; c < lf.consts.size(); ++c) offsets[c] += idx * walk.row_strides[c][d];
  }

  auto reg = [&](uint32_t r) -> float* {
    if (r < fn.num_inputs) return inputs[r].as<float>() + base;  // read only
    if (lf.output_of[r] >= 0) return outputs[size_t(lf.output_of[r])].as<float>() + base;
    return scratch + int64_t(lf.temp_slot[r]) * kTile;
  };
  auto src = [&](const Operand& o) -> Src {
    if (o.kind == OperandKind::kRegister) return {reg(o.index), 0, true};
    if (o.kind == OperandKind::kNone) return {};
    const float* c = lf.consts[o.index];
    if (walk.contiguous[o.index]) return {c + offsets[o.index] + begin, 0, true};
    return {nullptr, c[offsets[o.index]], false};
  };
  for (const Instr& in : fn.code) execute(in, reg(in.dst), src(in.a), src(in.b), n);
}

void EwiseModule::run(uint32_t f, const std::vector<ir::Tensor>& inputs, const std::vector<ir::Tensor>& outputs) const {
  if (f >= functions_.size())
    throw Error(ErrorCode::kInvalidArgument, "ewise module has no function " + std::to_string(f));
  const LoadedFunction& lf = functions_[f];
  const Function& fn = lf.fn;
  const std::vector<int64_t>& shape = callShape(f, inputs, &outputs);
  std::shared_ptr<const Walk> planned = lf.walk;
  if (!planned) {
    // A polymorphic function: the walk of this shape, planned on first use.
    planned = walks_.find(f, outputs);
    if (!planned) planned = walks_.insert(f, outputs, planWalk(fn, shape));
  }
  const Walk& walk = *planned;

  const int64_t tiles_per_row = (walk.inner + kTile - 1) / kTile;
  const int64_t chunks = walk.rows * tiles_per_row;
  const int64_t numel = walk.rows * walk.inner;
  const int threads = threadsFor(numel, int64_t(fn.code.size()) * kMedium);
  auto body = [&](int64_t first, int64_t last) {
    std::unique_ptr<float[]> scratch(new float[size_t(std::max<uint32_t>(lf.num_temps, 1)) * kTile]);
    for (int64_t c = first; c < last; ++c) {
      const int64_t row = c / tiles_per_row, begin = (c % tiles_per_row) * kTile;
      runTile(lf, walk, inputs, outputs, row, begin, std::min(kTile, walk.inner - begin), scratch.get());
    }
  };
  if (threads <= 1) {
    body(0, chunks);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    body(chunks * t / nt, chunks * (t + 1) / nt);
  }
}

runtime::ModuleKind ewiseModuleKind() {
  return {kModuleKind, [](const runtime::ModuleLoadContext& ctx) -> std::shared_ptr<runtime::RuntimeModule> {
            return EwiseModule::load(ctx);
          }};
}

}  // namespace partita::ewise
