// classify: the run-time C++ API end to end on the Fashion-MNIST demo.
//   classify MODEL.pta IMAGES.npy LABELS.npy CLASSES.txt
// Loads a compiled artifact (`partita compile`), runs it on a batch of images, prints
// each prediction next to its label and the accuracy on the set. Uses only the public
// headers and links partita_rt: no importer or compiler.
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "partita/error.h"
#include "partita/model.h"
#include "partita/npy.h"

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s MODEL.pta IMAGES.npy LABELS.npy CLASSES.txt\n", argv[0]);
    return 2;
  }
  try {
    std::shared_ptr<const partita::Model> model = partita::Model::load(argv[1]);
    partita::Tensor images = partita::readNpy(argv[2]);
    partita::Tensor labels = partita::readNpy(argv[3]);
    std::vector<std::string> classes;
    std::ifstream in(argv[4]);
    for (std::string line; std::getline(in, line);) classes.push_back(line);
    if (labels.dtype() != partita::DType::kInt64 || labels.shape().size() != 1)
      throw partita::Error(partita::ErrorCode::kInvalidArgument, "labels must be an int64 vector");

    partita::Session session(model);
    session.setInput(model->inputs().at(0).name, images);
    session.run();
    const partita::Tensor& logits = session.outputs().at(0);
    int64_t n = logits.shape().at(0), k = logits.shape().at(1);
    if (n != labels.numel() || k != int64_t(classes.size()))
      throw partita::Error(partita::ErrorCode::kInvalidArgument, "model output does not match labels/classes");

    int correct = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float* row = logits.as<float>() + i * k;
      int64_t best = 0;
      for (int64_t j = 1; j < k; ++j)
        if (row[j] > row[best]) best = j;
      int64_t truth = labels.as<int64_t>()[i];
      correct += best == truth;
      std::printf("image %3lld: predicted %-12s actual %-12s %s\n", static_cast<long long>(i), classes[size_t(best)].c_str(),
                  classes[size_t(truth)].c_str(), best == truth ? "" : "  <- wrong");
    }
    std::printf("accuracy: %d / %lld = %.1f%%\n", correct, static_cast<long long>(n), 100.0 * correct / double(n));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
