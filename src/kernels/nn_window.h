// Sliding-window geometry shared by Conv, ConvTranspose and the pooling ops: reads
// kernel_shape / strides / dilations / pads / auto_pad, resolves the padding and
// computes output sizes (unknown sizes stay -1 so inference can leave them unknown).
// The one reading of ONNX's window semantics: the host kernels and the dnnl backend's
// claims both use it, so a backend cannot pad differently from the host.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/type.h"

namespace partita::kernels {

enum class AutoPad { kNotSet, kValid, kSameUpper, kSameLower };

// Error(kInvalidModel) "<op> node '<name>': <msg>".
[[noreturn]] void failNode(const ir::Node& node, const std::string& msg);
// Error(kUnsupported) "<op> node '<name>': <msg>".
[[noreturn]] void unsupportedNode(const ir::Node& node, const std::string& msg);

struct Window {
  std::vector<int64_t> kernel, strides, dilations, pad_begin, pad_end;
  AutoPad auto_pad = AutoPad::kNotSet;
  bool ceil_mode = false;

  size_t rank() const { return kernel.size(); }
  int64_t effectiveKernel(size_t i) const { return (kernel[i] - 1) * dilations[i] + 1; }
};

// Reads the window attributes for `nd` spatial dims. `kernel` is the kernel_shape
// attribute when present, else `default_kernel` (Conv: from the weights; may hold -1).
Window readWindow(const ir::Node& node, size_t nd, const std::vector<int64_t>& default_kernel);

// Output size of a forward (Conv/pool) window over an input of size `in` (-1 when
// unknown) along axis i; for SAME padding also sets pad_begin/pad_end[i] (when `in` is
// known). Fails for a window larger than the padded input.
int64_t windowOutput(const ir::Node& node, Window& w, size_t i, int64_t in);

// Resolves all axes: returns the output spatial sizes (-1 when unknown).
std::vector<int64_t> resolveWindow(const ir::Node& node, Window& w, const std::vector<int64_t>& in);

// ConvTranspose's output_padding: one value per spatial axis, 0 when absent.
std::vector<int64_t> readOutputPadding(const ir::Node& node, size_t nd);

// ConvTranspose: the output spatial sizes over an input of sizes `in` (-1 when unknown).
// When output_shape or SAME auto_pad fixes the output, resolves pad_begin/pad_end from
// it as ONNX does: an odd total puts the larger half at the end for SAME_UPPER and at
// the beginning otherwise (SAME_LOWER, or NOTSET with output_shape).
std::vector<int64_t> resolveTransposedWindow(const ir::Node& node, Window& w, const std::vector<int64_t>& in);

// The spatial sizes of a type from dimension 2 on (-1 when unknown).
std::vector<int64_t> spatialDims(const ir::TensorType& t);

// [d0, d1] + spatial, with -1 as an unknown dimension.
ir::TensorType makeType(ir::DType dtype, const ir::Dim& d0, const ir::Dim& d1,
                        const std::vector<int64_t>& spatial);

// Pads a spatial problem of 1..3 dims to exactly 3 (leading size-1 axes).
struct Geometry3 {
  int64_t in[3], out[3], k[3], s[3], d[3], pb[3], pe[3];
};
Geometry3 toGeometry3(const Window& w, const std::vector<int64_t>& in, const std::vector<int64_t>& out);

}  // namespace partita::kernels
