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
void registerLossOps(OpRegistry& r);    // nn_loss.cpp: NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss
void registerSignalOps(OpRegistry& r);  // signal_ops.cpp: Hann/Hamming/BlackmanWindow, MelWeightMatrix,
                                        // DFT, STFT
void registerSampleOps(OpRegistry& r);  // nn_sample.cpp: GridSample, AffineGrid
void registerDetectionOps(OpRegistry& r);  // nn_detection.cpp: NonMaxSuppression, RoiAlign
void registerUnpoolOps(OpRegistry& r);  // nn_unpool.cpp: MaxUnpool
void registerRandomOps(OpRegistry& r);  // random_ops.cpp: Bernoulli, Random*, Multinomial
void registerGroupNormOps(OpRegistry& r);  // nn_groupnorm.cpp: GroupNormalization
void registerDeformOps(OpRegistry& r);     // nn_deform.cpp: Col2Im, DeformConv
void registerTrainingOps(OpRegistry& r);   // training_ops.cpp: Adagrad, Momentum, Adam (ai.onnx.preview.training)
void registerTextOps(OpRegistry& r);       // text_tfidf.cpp: TfIdfVectorizer (integer tokens)
void registerQuantOps(OpRegistry& r);   // nn_quant.cpp: ConvInteger, MatMulInteger, QLinearConv,
                                        // QLinearMatMul
void registerRecurrentOps(OpRegistry& r);  // nn_recurrent.cpp: LSTM, GRU, RNN
void registerQuantLinearOps(OpRegistry& r);  // nn_quant_linear.cpp: QuantizeLinear, DequantizeLinear,
                                             // DynamicQuantizeLinear

}  // namespace partita::kernels
