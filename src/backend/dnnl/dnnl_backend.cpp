#include "backend/dnnl/dnnl_backend.h"

#include "backend/dnnl/dnnl_lowering.h"
#include "backend/dnnl/dnnl_claims.h"

namespace partita::backend {

namespace {

class DnnlBackend final : public Backend {
 public:
  std::string_view name() const override { return "dnnl"; }

  bool supports(const ir::Graph& g, ir::NodeId node) const override {
    return dnnl_backend::supportsNode(g, g.nodes[size_t(node)]);
  }

  bool supportsPolymorphic(const ir::Graph& g, const ir::Graph& rep, ir::NodeId node) const override {
    return dnnl_backend::supportsPolymorphicNode(g, rep, node);
  }
  bool evaluatesShapeValues() const override { return true; }  // regionAt (dnnl_replay.h)

  std::string whyNot(const ir::Graph& g, ir::NodeId node) const override {
    std::string why;
    return dnnl_backend::supportsNode(g, g.nodes[size_t(node)], &why) ? std::string() : why;
  }

  std::vector<std::string> patterns() const override {
    return {"Conv+BatchNormalization (folded into derived weights)",
            "Conv|ConvTranspose|MatMul|Gemm+<activation>...",
            "Conv|ConvTranspose|MatMul|Gemm+Add(residual)+<activation>...",
            "Conv|ConvTranspose|MatMul|Gemm+<binary op with a constant or broadcast operand>",
            "Gemm(C) as bias, sum or binary post-op",
            "Add|Sub|Mul|Div|Max|Min+<activation>...",
            "x*Sigmoid(x) (SiLU) as swish",
            "Div+Erf+Add+Mul+Mul (Gelu) as gelu_erf",
            "ReduceMean+Sub+Pow+ReduceMean+Add+Sqrt+Div+Mul+Add as LayerNormalization"};
  }

  void setFloatPrecision(std::string_view precision) override {
    bf16_ = precision == "bf16";
    winograd_ = precision == "fp32-half";
  }

  ModuleImage compile(const ir::Graph& g, const std::vector<Region>& regions, ConstantSink& sink) override {
    return dnnl_backend::compileRegions(g, regions, sink, bf16_, winograd_);
  }

 private:
  bool bf16_ = false, winograd_ = false;
};

}  // namespace

std::unique_ptr<Backend> makeDnnlBackend() { return std::make_unique<DnnlBackend>(); }

}  // namespace partita::backend
