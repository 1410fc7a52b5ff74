#include "kernels/nn_window.h"

#include <algorithm>

#include "kernels/op_util.h"
#include "partita/error.h"

namespace partita::kernels {

void failNode(const ir::Node& node, const std::string& msg) {
  throw Error(ErrorCode::kInvalidModel, node.op_type + " node '" + node.name + "': " + msg);
}

void unsupportedNode(const ir::Node& node, const std::string& msg) {
  throw Error(ErrorCode::kUnsupported, node.op_type + " node '" + node.name + "': " + msg);
}

namespace {

// mulDims/addDims (op_util.h) for code that has the node but no context.
struct NodeFail {
  const ir::Node& node;
  [[noreturn]] void fail(const std::string& msg) const { failNode(node, msg); }
};

std::vector<int64_t> readSized(const ir::Node& node, const std::string& name, size_t n, int64_t def,
                               int64_t min_value) {
  std::vector<int64_t> v = node.attrs.getInts(name, std::vector<int64_t>(n, def));
  if (v.size() != n)
    failNode(node, "attribute '" + name + "' has " + std::to_string(v.size()) + " values, expected " +
                       std::to_string(n));
  for (int64_t x : v)
    if (x < min_value) failNode(node, "attribute '" + name + "' has invalid value " + std::to_string(x));
  return v;
}

}  // namespace

Window readWindow(const ir::Node& node, size_t nd, const std::vector<int64_t>& default_kernel) {
  Window w;
  if (node.attrs.has("kernel_shape")) {
    w.kernel = readSized(node, "kernel_shape", nd, 1, 1);
  } else {
    w.kernel = default_kernel;
    if (w.kernel.size() != nd) failNode(node, "kernel_shape is missing or does not match the input rank");
  }
  w.strides = readSized(node, "strides", nd, 1, 1);
  w.dilations = readSized(node, "dilations", nd, 1, 1);
  std::vector<int64_t> pads = readSized(node, "pads", 2 * nd, 0, 0);
  w.pad_begin.assign(pads.begin(), pads.begin() + long(nd));
  w.pad_end.assign(pads.begin() + long(nd), pads.end());
  std::string ap = node.attrs.getString("auto_pad", "NOTSET");
  if (ap == "NOTSET" || ap.empty()) {
    w.auto_pad = AutoPad::kNotSet;
  } else if (ap == "VALID") {
    w.auto_pad = AutoPad::kValid;
  } else if (ap == "SAME_UPPER") {
    w.auto_pad = AutoPad::kSameUpper;
  } else if (ap == "SAME_LOWER") {
    w.auto_pad = AutoPad::kSameLower;
  } else {
    failNode(node, "unknown auto_pad '" + ap + "'");
  }
  if (w.auto_pad != AutoPad::kNotSet) {
    std::fill(w.pad_begin.begin(), w.pad_begin.end(), 0);
    std::fill(w.pad_end.begin(), w.pad_end.end(), 0);
  }
  w.ceil_mode = node.attrs.getInt("ceil_mode", 0) != 0;
  // Every later sum and product of these stays inside int64 once the effective kernel
  // (k - 1) * d + 1 does (pads are summed with checks where they are used).
  const NodeFail f{node};
  for (size_t i = 0; i < nd; ++i)
    if (w.kernel[i] >= 1) addDims(f, mulDims(f, w.kernel[i] - 1, w.dilations[i]), 1);
  return w;
}

int64_t windowOutput(const ir::Node& node, Window& w, size_t i, int64_t in) {
  if (in < 0 || w.kernel[i] < 0) return -1;
  const NodeFail f{node};
  const int64_t ek = w.effectiveKernel(i), s = w.strides[i];
  if (w.auto_pad == AutoPad::kSameUpper || w.auto_pad == AutoPad::kSameLower) {
    const int64_t out = in == 0 ? 0 : (in - 1) / s + 1;  // ceil(in / s) for any stride
    const int64_t total = std::max<int64_t>(0, addDims(f, std::max<int64_t>(out - 1, 0) * s, ek) - in);
    w.pad_begin[i] = w.auto_pad == AutoPad::kSameUpper ? total / 2 : total - total / 2;
    w.pad_end[i] = total - w.pad_begin[i];
    return out;
  }
  const int64_t padded = addDims(f, in, addDims(f, w.pad_begin[i], w.pad_end[i]));
  const int64_t span = padded - ek;
  if (span < 0)
    failNode(node, "the window (" + std::to_string(ek) + ") is larger than the padded input (" +
                       std::to_string(padded) + ") on spatial axis " + std::to_string(i));
  if (!w.ceil_mode) return span / s + 1;
  int64_t out = span / s + (span % s != 0) + 1;
  // A last window starting inside the end padding would see no input at all.
  if ((out - 1) * s >= in + w.pad_begin[i]) --out;
  return out;
}

std::vector<int64_t> resolveWindow(const ir::Node& node, Window& w, const std::vector<int64_t>& in) {
  std::vector<int64_t> out(in.size());
  for (size_t i = 0; i < in.size(); ++i) out[i] = windowOutput(node, w, i, in[i]);
  return out;
}

std::vector<int64_t> readOutputPadding(const ir::Node& node, size_t nd) {
  std::vector<int64_t> opad = node.attrs.getInts("output_padding", std::vector<int64_t>(nd, 0));
  if (opad.size() != nd) failNode(node, "output_padding must have one value per spatial axis");
  return opad;
}

std::vector<int64_t> resolveTransposedWindow(const ir::Node& node, Window& w, const std::vector<int64_t>& in) {
  const size_t nd = in.size();
  const std::vector<int64_t> opad = readOutputPadding(node, nd);
  std::vector<int64_t> oshape = node.attrs.getInts("output_shape");
  if (!oshape.empty()) {
    if (oshape.size() == nd + 2) oshape.erase(oshape.begin(), oshape.begin() + 2);
    if (oshape.size() != nd) failNode(node, "output_shape must have one value per spatial axis");
  }
  std::vector<int64_t> out(nd, -1);
  const struct {
    const ir::Node& node;
    [[noreturn]] void fail(const std::string& msg) const { failNode(node, msg); }
  } f{node};  // checked arithmetic (op_util.h) names the node
  for (size_t i = 0; i < nd; ++i) {
    const int64_t s = w.strides[i];
    const int64_t ek = w.kernel[i] < 0 ? -1 : w.effectiveKernel(i);
    const bool same = w.auto_pad == AutoPad::kSameUpper || w.auto_pad == AutoPad::kSameLower;
    if (!oshape.empty() || same) {
      int64_t o = !oshape.empty() ? oshape[i] : (in[i] < 0 ? -1 : mulDims(f, in[i], s));
      out[i] = o;
      if (o < 0 || in[i] < 0 || ek < 0) continue;
      // Negative totals (output_shape beyond the natural size) halve with flooring, as
      // ONNX's reference does: the extra output goes at the end.
      const int64_t total =
          addDims(f, addDims(f, mulDims(f, s, std::max<int64_t>(in[i] - 1, 0)), opad[i]), ek) - o;
      const int64_t half = total >= 0 ? total / 2 : -((1 - total) / 2);
      w.pad_begin[i] = w.auto_pad == AutoPad::kSameUpper ? half : total - half;
      w.pad_end[i] = total - w.pad_begin[i];
      continue;
    }
    if (in[i] < 0 || ek < 0) continue;
    const int64_t grown = addDims(f, addDims(f, mulDims(f, s, std::max<int64_t>(in[i] - 1, 0)), opad[i]), ek);
    out[i] = grown - addDims(f, w.pad_begin[i], w.pad_end[i]);
    if (out[i] < 0)
      failNode(node, "pads " + std::to_string(w.pad_begin[i]) + " and " + std::to_string(w.pad_end[i]) +
                         " make the output size on spatial axis " + std::to_string(i) + " negative: " +
                         std::to_string(out[i]));
  }
  return out;
}

std::vector<int64_t> spatialDims(const ir::TensorType& t) {
  std::vector<int64_t> out;
  for (size_t i = 2; i < t.rank(); ++i) out.push_back(t.dims[i].isKnown() ? t.dims[i].value : -1);
  return out;
}

ir::TensorType makeType(ir::DType dtype, const ir::Dim& d0, const ir::Dim& d1,
                        const std::vector<int64_t>& spatial) {
  ir::TensorType t;
  t.dtype = dtype;
  t.has_rank = true;
  t.dims.push_back(d0);
  t.dims.push_back(d1);
  for (int64_t s : spatial) t.dims.push_back(s >= 0 ? ir::Dim::known(s) : ir::Dim{});
  return t;
}

Geometry3 toGeometry3(const Window& w, const std::vector<int64_t>& in, const std::vector<int64_t>& out) {
  Geometry3 g;
  const size_t lead = 3 - w.rank();
  for (size_t i = 0; i < 3; ++i) {
    if (i < lead) {
      g.in[i] = g.out[i] = g.k[i] = g.s[i] = g.d[i] = 1;
      g.pb[i] = g.pe[i] = 0;
      continue;
    }
    size_t j = i - lead;
    g.in[i] = in[j];
    g.out[i] = out[j];
    g.k[i] = w.kernel[j];
    g.s[i] = w.strides[j];
    g.d[i] = w.dilations[j];
    g.pb[i] = w.pad_begin[j];
    g.pe[i] = w.pad_end[j];
  }
  return g;
}

}  // namespace partita::kernels
