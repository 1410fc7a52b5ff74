// Builds the oneDNN primitive descriptor a Step describes. The compile half calls it
// with oneDNN free to choose the layouts of `chosen` arguments and records the choice;
// the loader calls it the same way and checks that this machine chooses the same
// layouts (so the derived weights in the store fit), then creates the primitive.
#pragma once

#include <dnnl.hpp>
#include <string>
#include <utility>
#include <vector>

#include "backend/dnnl/dnnl_program.h"

namespace partita::dnnl_backend {

// Throws dnnl::error when oneDNN has no implementation for the step.
dnnl::primitive_desc_base makePrimitiveDesc(const Step& step, const dnnl::engine& engine);

// oneDNN's resampling builds tables of source indices and weights per output
// coordinate when the primitive is created (load time), bytes in proportion to the
// output's spatial sizes whatever the run's data. Larger spatial sizes stay on the
// host (claim) and are refused in a blob (load): a declared [.., 8.6e9] output made
// oneDNN allocate 34 GB at load (fuzz finding resize_huge_output_at_load).
inline constexpr int64_t kMaxResamplingExtent = int64_t(1) << 24;

// oneDNN 2.6's convolutions also build tables per output position when they are made:
// about 250 bytes a position of a plain [1, 3, H, W] convolution, ten times that where
// padding dominates (a [1, 3, 20, 24] source padded by 5,898,241 on the right: more
// than 24 GB before any run). A convolution stays on the host (claim, and a shape
// polymorphic function's replay) and is refused in a blob (load) when an output
// spatial size passes kMaxConvExtent or a padding is wider than the dilated kernel.
inline constexpr int64_t kMaxConvExtent = int64_t(1) << 22;
// And oneDNN 2.6 makes a 1x1 convolution's primitive (brgconv_1x1) in time in
// proportion to its output positions (about 2-6 ns each: 49 ms at 2160 x 3840, 0.5 s
// at 16384 x 16384), which a blob could declare by the hundred billion (buffers of up
// to 1 TiB): a convolution or deconvolution of more output positions (the product of
// its output's spatial sizes) stays on the host and is refused in a blob, as above.
inline constexpr int64_t kMaxConvPositions = int64_t(1) << 28;
// The reason a convolution or deconvolution with these output spatial sizes is left to
// the host for their number; empty when it is not.
std::string convPositionsBound(const std::vector<int64_t>& out_spatial);
// The reason a convolution of these output spatial sizes, kernel, dilations (oneDNN's:
// ONNX's - 1) and pads is left to the host; empty when oneDNN may make it.
std::string convTablesBound(const std::vector<int64_t>& out_spatial, const std::vector<int64_t>& kernel,
                            const std::vector<int64_t>& dilates, const std::vector<int64_t>& pad_l,
                            const std::vector<int64_t>& pad_r);

// oneDNN 2.6's reference pooling (taken for layouts its jit kernels do not cover)
// visits every element of every window, padding included: a pooling of more window
// elements in all (N x C x outputs x kernel) stays on the host (claim), whose kernels
// clip windows to the source, and is refused in a blob (load). Fuzz finding: a blob
// pooling of a [1, 1, 5, 5] source with a kernel height of 2^38 + 2 (and as much end
// padding) ran without end.
inline constexpr int64_t kMaxPoolWindowElements = int64_t(1) << 34;
// The reason a pooling into `dst_dims` ([N, C, spatial...]) with `kernel` is left to the
// host; empty when oneDNN may make it.
std::string poolWorkBound(const std::vector<int64_t>& dst_dims, const std::vector<int64_t>& kernel);

// Writes the layouts oneDNN chose into the step's `chosen` arguments.
void recordChosenLayouts(Step& step, const dnnl::primitive_desc_base& pd);

// Empty when every `chosen` argument of `step` matches what `pd` wants; otherwise a
// message naming the argument, the recorded and the wanted layout.
std::string chosenLayoutMismatch(const Step& step, const dnnl::primitive_desc_base& pd);

// The implementation oneDNN picked, e.g. "brgconv:avx512_core".
std::string implementationName(const dnnl::primitive_desc_base& pd);
// Whether that implementation is oneDNN's reference C++ loops ("ref:any", ...).
bool isReference(const dnnl::primitive_desc_base& pd);
// A step too small to share: made (at compile time and at load) and run for one
// thread whatever the model's thread count, since splitting it over a team costs a
// wake-up and a barrier (a few microseconds on an idle machine, far more when the
// other core is busy) for less work than that saves. Small means: a convolution or
// matmul under 2^17 multiply-adds; an RNN under 2^18 a timestep (batch * gates *
// hidden^2; its cell synchronises every timestep); any other step under 2^14
// destination elements, or 2^16 for a float binary step without post-ops (it only
// streams memory). A streaming model's frame is dozens of such steps.
inline constexpr int64_t kOneThreadElements = int64_t(1) << 14;
inline constexpr int64_t kOneThreadBinaryElements = int64_t(1) << 16;
bool stepOnOneThread(const Step& s);
// The team size to make `s` for and run it on: one for a step too small to share,
// else `threads`.
int stepThreads(const Step& s, int threads);
// Sets this thread's OpenMP team size for a scope (oneDNN fixes the size of most of
// its primitives when they are created, and takes the caller's for the simple ones).
class OmpThreadsScope {
 public:
  explicit OmpThreadsScope(int threads);
  ~OmpThreadsScope();
  OmpThreadsScope(const OmpThreadsScope&) = delete;
  OmpThreadsScope& operator=(const OmpThreadsScope&) = delete;

 private:
  int saved_;
};

// What derived weight layouts assume of the machine (a module's assumptions):
// oneDNN's version "major.minor.patch" of this build, the effective CPU ISA oneDNN
// dispatches to here (e.g. "avx512_core") and an OpenMP team size.
inline constexpr const char* kAssumeVersion = "dnnl.version";
inline constexpr const char* kAssumeIsa = "isa";
inline constexpr const char* kAssumeThreads = "threads";
std::string dnnlVersionString();
std::string effectiveIsaName();
std::vector<std::pair<std::string, std::string>> layoutAssumptions(int threads);

}  // namespace partita::dnnl_backend
