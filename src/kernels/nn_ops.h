// Registration of the neural-network host ops, one function per kernel file; all are
// called by registerNnOps (ops_nn.cpp).
#pragma once

#include "kernels/op_registry.h"

namespace partita::kernels {

void registerConvOps(OpRegistry& r);    // nn_conv.cpp: Conv, ConvTranspose
void registerPoolOps(OpRegistry& r);    // nn_pool.cpp: MaxPool, AveragePool, LpPool, Global*Pool
void registerMatMulOps(OpRegistry& r);  // nn_matmul.cpp: MatMul, Gemm
void registerNormOps(OpRegistry& r);    // nn_norm.cpp: BatchNormalization, InstanceNormalization,
                                        // LayerNormalization, LRN
void registerResizeOps(OpRegistry& r);  // nn_resize.cpp: Resize, Upsample
void registerQuantOps(OpRegistry& r);   // nn_quant.cpp: ConvInteger, MatMulInteger, QLinearConv,
                                        // QLinearMatMul
void registerRecurrentOps(OpRegistry& r);  // nn_recurrent.cpp: LSTM, GRU, RNN
void registerQuantLinearOps(OpRegistry& r);  // nn_quant_linear.cpp: QuantizeLinear, DequantizeLinear,
                                             // DynamicQuantizeLinear

}  // namespace partita::kernels
