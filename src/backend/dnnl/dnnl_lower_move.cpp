// Lowering of the ops that only place data: Concat (in the producers' common layout
// when they share one), views (no step: the output names the input's bytes) and
// Transpose / Slice (one reorder from a strided view of the input).
#include "backend/dnnl/dnnl_function_lowering.h"

#include <string>

#include "backend/dnnl/dnnl_module.h"
#include "backend/dnnl/dnnl_primitive.h"

namespace partita::dnnl_backend {

using ir::ValueId;

void FunctionLowering::lowerConcat(size_t pos) {
  const ir::Node& node = nodeAt(pos);
  const int64_t axis = decoded(decodeConcat(g_, node, nullptr), pos);
  const ValueId out = node.outputs[0];
  // Keep the producers' layout when all inputs share one, else go row-major.
  std::string common;
  bool same = true;
  for (ValueId in : node.inputs) {
    std::string tag = isConstant(in) ? "const" : formatTag(primary(in).md);
    if (common.empty()) common = tag;
    same &= tag == common && tag != "const" && dimsOf(primary(in).md) == shapeOf(in);
  }
  auto build = [&](bool use_primary, Step& step) {
    step = Step{};
    step.kind = StepKind::kConcat;
    step.label = labelOf(pos, {});
    step.axis = axis;
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      ValueId in = node.inputs[i];
      memory::desc md = use_primary ? primary(in).md : plainDesc(shapeOf(in));
      step.args.push_back(Arg{DNNL_ARG_MULTIPLE_SRC + int(i), ArgSource::kBuffer, 0, md, false});
    }
    step.args.push_back(Arg{DNNL_ARG_DST, ArgSource::kBuffer, 0, anyDesc(shapeOf(out)), true});
  };
  Step step;
  dnnl::primitive_desc_base pd;
  bool use_primary = same;
  build(use_primary, step);
  try {
    pd = makePrimitiveDesc(step, cpuEngine());
  } catch (const dnnl::error&) {
    if (!use_primary) throw;
    use_primary = false;
    build(false, step);
    pd = makePrimitiveDesc(step, cpuEngine());
  }
  recordChosenLayouts(step, pd);
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    ValueId in = node.inputs[i];
    Arg* a = step.find(DNNL_ARG_MULTIPLE_SRC + int(i));
    if (isConstant(in))
      *a = mb_.borrow(a->key, constOf(in), a->md);
    else
      a->index = use_primary ? primary(in).buffer : plain(in).buffer;
  }
  consume(pos);
  Arg* dst = step.find(DNNL_ARG_DST);
  dst->index = newBuffer(dst->md);
  place(out, Loc{uint32_t(dst->index), dst->md});
  fn_.steps.push_back(std::move(step));
}

void FunctionLowering::lowerView(size_t pos) {
  const ir::Node& node = nodeAt(pos);
  const ValueId x = node.inputs[0], out = node.outputs[0];
  if (node.op_type == "Identity" || node.op_type == "Dropout") {
    std::vector<Loc> same = locsOf(x);
    consume(pos);
    for (const Loc& l : same) place(out, l);
    return;
  }
  const Loc src = plain(x);
  consume(pos);
  place(out, Loc{src.buffer, withDataType(plainDesc(shapeOf(out)), elementType(out))});
}

void FunctionLowering::lowerMove(size_t pos) {
  const ir::Node& node = nodeAt(pos);
  const MoveSpec spec = decoded(decodeMove(g_, node, nullptr), pos);
  const ValueId x = node.inputs[0], out = node.outputs[0];
  const Loc src = plain(x);
  memory::desc view = withStrides(spec.dims, spec.strides);
  view.data.offset0 = spec.offset;
  Step step;
  step.kind = StepKind::kReorder;
  step.label = labelOf(pos, {});
  step.args.push_back(bufferArg(DNNL_ARG_SRC, src.buffer, view));
  consume(pos);
  emitToNewBuffer(std::move(step), plainDesc(spec.dims), out);
}

}  // namespace partita::dnnl_backend
