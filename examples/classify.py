#!/usr/bin/python3
"""classify.py: the demo in Python (examples/classify.cpp's twin).

    PYTHONPATH=build/python /usr/bin/python3 examples/classify.py MODEL IMAGES.npy LABELS.npy CLASSES.txt

MODEL is the Fashion-MNIST demo model, as a compiled artifact (.pta, `partita compile`
or partita.compile) or as ONNX (compiled in memory). Runs it on a batch of images
through partita.InferenceSession -- the ONNX Runtime surface: with
`import onnxruntime as ort` instead, the same lines run on ONNX Runtime -- and prints
each prediction next to its label and the accuracy on the set, as the C++ example does.
"""
import sys

import numpy as np

import partita as ort


def main(argv):
    if len(argv) != 5:
        print(f"usage: {argv[0]} MODEL IMAGES.npy LABELS.npy CLASSES.txt", file=sys.stderr)
        return 2
    model, images_path, labels_path, classes_path = argv[1:]
    try:
        sess = ort.InferenceSession(model)
        images = np.load(images_path)
        labels = np.load(labels_path)
        with open(classes_path) as f:
            classes = f.read().splitlines()
        if labels.dtype != np.int64 or labels.ndim != 1:
            raise ValueError("labels must be an int64 vector")
        (logits,) = sess.run(None, {sess.get_inputs()[0].name: images})
        n, k = logits.shape
        if n != labels.size or k != len(classes):
            raise ValueError("model output does not match labels/classes")
        predicted = logits.argmax(axis=1)
        for i, (best, truth) in enumerate(zip(predicted, labels)):
            wrong = "" if best == truth else "  <- wrong"
            print(f"image {i:3d}: predicted {classes[best]:<12} actual {classes[truth]:<12} {wrong}")
        correct = int((predicted == labels).sum())
        print(f"accuracy: {correct} / {n} = {100.0 * correct / n:.1f}%")
    except (ort.Error, OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
