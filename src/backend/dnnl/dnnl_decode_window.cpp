// Decoding the sliding-window ops (Conv, ConvTranspose, pooling) into oneDNN terms.
// The window itself (attributes, auto_pad, pads, output sizes) is the host's reading
// (kernels/nn_window.h); what is oneDNN's own is here: dilations minus one, end padding
// that stands in for ceil_mode, and output_padding folded into the end padding.
#include "backend/dnnl/dnnl_decode.h"

#include "backend/dnnl/dnnl_decode_util.h"
#include "backend/dnnl/dnnl_primitive.h"
#include "kernels/nn_window.h"

namespace partita::dnnl_backend {

namespace {

using dnnl::algorithm;

// Resolves the padding of a forward (Conv, pooling) window for input sizes `in` as
// the host does, and checks that the host's output sizes are `out` (the node's type).
bool resolveForwardWindow(const ir::Node& n, kernels::Window& w, const std::vector<int64_t>& in,
                          const std::vector<int64_t>& out, std::string* why) {
  auto host_out = hostOr(why, [&] { return kernels::resolveWindow(n, w, in); });
  if (!host_out) return false;
  if (*host_out != out) return noBool(why, "output size does not match the window");
  return true;
}

// The end pads to give oneDNN for a resolved forward window. oneDNN has no ceil_mode:
// it produces floor((in + pad_l + pad_r - ek) / s) + 1 outputs. Where the host's
// ceil_mode gives one more (a last window that starts inside the input and runs past
// the end padding), the end is padded by the overrun so oneDNN's formula yields the
// same size; `extended` says whether any axis needed that.
std::vector<int64_t> oneDnnEndPads(const kernels::Window& w, const std::vector<int64_t>& in,
                                   const std::vector<int64_t>& out, bool& extended) {
  std::vector<int64_t> pad_r = w.pad_end;
  extended = false;
  for (size_t i = 0; i < in.size(); ++i) {
    const int64_t overrun =
        (out[i] - 1) * w.strides[i] + w.effectiveKernel(i) - (in[i] + w.pad_begin[i] + w.pad_end[i]);
    if (overrun <= 0) continue;
    pad_r[i] += overrun;
    extended = true;
  }
  return pad_r;
}

std::vector<int64_t> dnnlDilates(const std::vector<int64_t>& d) {
  std::vector<int64_t> out;
  for (int64_t x : d) out.push_back(x - 1);
  return out;
}

}  // namespace

std::optional<ConvSpec> decodeConv(const ir::Graph& g, const ir::Node& n, std::string* why) {
  if (!onlyFirstOutput(n, why) || !n.hasInput(0) || !n.hasInput(1) || n.inputs.size() > 3)
    return no(why, "bad inputs");
  if (!isDenseF32(g, n.inputs[0], why, "input") || !isDenseF32(g, n.outputs[0], why, "output"))
    return std::nullopt;
  if (!isConstant(g, n.inputs[1]) || !isDenseF32(g, n.inputs[1], why, "weights"))
    return no(why, "weights are not a float32 constant");
  if (n.hasInput(2) && (!isConstant(g, n.inputs[2]) || !isDenseF32(g, n.inputs[2], why, "bias")))
    return no(why, "bias is not a float32 constant");
  return decodeConvWindow(g, n, n.inputs[0], n.inputs[1], n.hasInput(2) ? n.inputs[2] : ir::kNoValue, why);
}

std::optional<ConvSpec> decodeConvWindow(const ir::Graph& g, const ir::Node& n, ir::ValueId x, ir::ValueId weights,
                                         ir::ValueId bias, std::string* why) {
  ConvSpec s;
  s.transposed = n.op_type == "ConvTranspose";
  s.has_bias = bias != ir::kNoValue;
  if (!constantOf(g, weights).layout.empty()) return no(why, "weights have a packed layout");
  s.in_shape = shapeOf(g, x);
  s.weight_shape = shapeOf(g, weights);
  s.out_shape = shapeOf(g, n.outputs[0]);
  const size_t rank = s.in_shape.size();
  if (rank < 3 || rank > 5) return no(why, "only 1-D, 2-D and 3-D convolutions");
  if (s.weight_shape.size() != rank || s.out_shape.size() != rank) return no(why, "rank mismatch");
  const size_t sp = rank - 2;
  s.groups = n.attrs.getInt("group", 1);
  if (s.groups < 1) return no(why, "bad group");
  std::vector<int64_t> wk(s.weight_shape.begin() + 2, s.weight_shape.end());
  auto w = hostOr(why, [&] { return kernels::readWindow(n, sp, wk); });
  if (!w) return std::nullopt;
  if (w->kernel != wk) return no(why, "kernel_shape disagrees with the weights");
  int64_t c_in = s.in_shape[1], c_out = s.out_shape[1];
  if (!s.transposed) {
    if (c_in % s.groups || c_out % s.groups || s.weight_shape[1] * s.groups != c_in ||
        s.weight_shape[0] != c_out)
      return no(why, "channel counts do not match the weights and groups");
  } else {
    if (c_in % s.groups || s.weight_shape[0] != c_in || s.weight_shape[1] * s.groups != c_out)
      return no(why, "channel counts do not match the weights and groups");
  }
  if (s.has_bias && shapeOf(g, bias) != std::vector<int64_t>{c_out}) return no(why, "bias shape");
  std::vector<int64_t> in(s.in_shape.begin() + 2, s.in_shape.end()),
      out(s.out_shape.begin() + 2, s.out_shape.end());
  s.strides = w->strides;
  s.dilates = dnnlDilates(w->dilations);
  if (!s.transposed) {
    if (!resolveForwardWindow(n, *w, in, out, why)) return std::nullopt;
    bool extended = false;  // exact either way: a convolution's padding adds zeros
    s.pad_l = w->pad_begin;
    s.pad_r = oneDnnEndPads(*w, in, out, extended);
    if (std::string bound = convTablesBound(out, w->kernel, s.dilates, s.pad_l, s.pad_r); !bound.empty())
      return no(why, bound);
    return s;
  }
  auto out_pad = hostOr(why, [&] { return kernels::readOutputPadding(n, sp); });
  if (!out_pad) return std::nullopt;
  auto host_out = hostOr(why, [&] { return kernels::resolveTransposedWindow(n, *w, in); });
  if (!host_out) return std::nullopt;
  if (*host_out != out) return no(why, "output size does not match the window");
  if (std::string bound = convPositionsBound(out); !bound.empty()) return no(why, bound);
  s.pad_l = w->pad_begin;
  s.pad_r.assign(sp, 0);
  for (size_t i = 0; i < sp; ++i) {
    if (w->pad_begin[i] < 0 || w->pad_end[i] < 0)
      return no(why, "output_shape larger than the transposed convolution produces");
    // oneDNN's deconvolution produces stride*(in-1) + eff - begin - end; output_padding
    // extends the end, which is exact while it only removes end padding.
    s.pad_r[i] = w->pad_end[i] - (*out_pad)[i];
    if (s.pad_r[i] < 0) return no(why, "output padding beyond the padded end");
  }
  return s;
}

std::optional<PoolSpec> decodePool(const ir::Graph& g, const ir::Node& n, std::string* why) {
  // The maximum of uint8/int8 values (a QDQ model's MaxPool, passes::fuseQuantizedOps) is exact too.
  const auto int8 = [&](ir::ValueId v) {
    const ir::TensorType& t = g.typeOf(v);
    return (t.dtype == ir::DType::kUInt8 || t.dtype == ir::DType::kInt8) && t.isStatic() && t.numel() > 0 &&
           t.rank() <= kMaxRank;
  };
  const bool int8_max = (n.op_type == "MaxPool" || n.op_type == "GlobalMaxPool") && n.hasInput(0) &&
                        onlyFirstOutput(n, nullptr) && int8(n.inputs[0]) &&
                        g.typeOf(n.outputs[0]).dtype == g.typeOf(n.inputs[0]).dtype && int8(n.outputs[0]);
  if (!int8_max && !unaryShape(g, n, why)) return std::nullopt;
  std::vector<int64_t> x = shapeOf(g, n.inputs[0]), y = shapeOf(g, n.outputs[0]);
  if (x.size() < 3 || x.size() > 5 || y.size() != x.size()) return no(why, "only 1-D, 2-D and 3-D pooling");
  const size_t sp = x.size() - 2;
  std::vector<int64_t> in(x.begin() + 2, x.end()), out(y.begin() + 2, y.end());
  PoolSpec s;
  const std::string& op = n.op_type;
  if (op == "GlobalAveragePool" || op == "GlobalMaxPool") {
    s.alg = op == "GlobalMaxPool" ? algorithm::pooling_max : algorithm::pooling_avg_exclude_padding;
    s.kernel = in;
    s.strides.assign(sp, 1);
    s.dilates.assign(sp, 0);
    s.pad_l.assign(sp, 0);
    s.pad_r.assign(sp, 0);
    for (int64_t d : out)
      if (d != 1) return no(why, "global pooling output is not 1");
    return s;
  }
  if (!n.attrs.has("kernel_shape")) return no(why, "kernel_shape missing");
  auto w = hostOr(why, [&] { return kernels::readWindow(n, sp, {}); });
  if (!w || !resolveForwardWindow(n, *w, in, out, why)) return std::nullopt;
  bool include_pad = false;
  if (op == "MaxPool") {
    s.alg = algorithm::pooling_max;
  } else {
    include_pad = n.attrs.getInt("count_include_pad", 0) != 0;
    s.alg = include_pad ? algorithm::pooling_avg_include_padding : algorithm::pooling_avg_exclude_padding;
  }
  s.kernel = w->kernel;
  s.strides = w->strides;
  s.dilates = dnnlDilates(w->dilations);
  s.pad_l = w->pad_begin;
  bool extended = false;
  s.pad_r = oneDnnEndPads(*w, in, out, extended);
  // The extra end padding is exact only where padding is not counted.
  if (extended && include_pad) return no(why, "ceil_mode average pooling that counts pads");
  if (std::string bound = poolWorkBound(y, s.kernel); !bound.empty()) return no(why, bound);
  return s;
}
}  // namespace partita::dnnl_backend
