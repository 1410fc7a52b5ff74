"""Item 3: runs release the GIL, and one InferenceSession (a pool of partita sessions)
or one Model (a Session per thread) runs from 4 Python threads at once with results
identical to a single-threaded run."""
import sys
import threading

import numpy as np

import partita
from conftest import exported

THREADS = 4
RUNS = 3


def _run_in_threads(work):
    """Runs work(i) on THREADS threads started together; returns their results."""
    results = [None] * THREADS
    errors = []
    barrier = threading.Barrier(THREADS)

    def body(i):
        try:
            barrier.wait()
            results[i] = work(i)
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return results


def _inputs(images):
    # A different input per thread, so that a mix-up between concurrent runs shows.
    return [np.ascontiguousarray(np.roll(images, i, axis=0)) for i in range(THREADS)]


def test_one_inference_session_from_4_threads(fashion_pta, fashion_images):
    sess = partita.InferenceSession(fashion_pta, providers=["dnnl", "host"])
    feeds = _inputs(fashion_images)
    reference = [sess.run(None, {"input": f})[0] for f in feeds]
    results = _run_in_threads(lambda i: [sess.run(None, {"input": feeds[i]})[0] for _ in range(RUNS)])
    for i, runs in enumerate(results):
        for y in runs:
            np.testing.assert_array_equal(y, reference[i])


def test_one_model_from_4_threads(fashion_pta, fashion_images):
    model = partita.load(fashion_pta)
    feeds = _inputs(fashion_images)
    reference = [model.session().run({"input": f})["logits"] for f in feeds]

    def work(i):
        session = model.session()
        return [session.run({"input": feeds[i]})["logits"] for _ in range(RUNS)]

    for i, runs in enumerate(_run_in_threads(work)):
        for y in runs:
            np.testing.assert_array_equal(y, reference[i])


def test_one_session_from_4_threads_takes_turns(fashion_pta, fashion_images):
    session = partita.load(fashion_pta).session()
    feeds = _inputs(fashion_images)
    reference = [session.run({"input": f})["logits"] for f in feeds]
    results = _run_in_threads(lambda i: [session.run({"input": feeds[i]})["logits"] for _ in range(RUNS)])
    for i, runs in enumerate(results):
        for y in runs:
            np.testing.assert_array_equal(y, reference[i])


def test_resnet18_on_one_inference_session_from_4_threads():
    onnx_path, x, _ = exported("resnet18")
    sess = partita.InferenceSession(onnx_path, providers=["dnnl", "host"])
    feeds = [np.ascontiguousarray(x * (1 + 0.1 * i)) for i in range(THREADS)]
    reference = [sess.run(None, {"input": f})[0] for f in feeds]
    for i, y in enumerate(_run_in_threads(lambda i: sess.run(None, {"input": feeds[i]})[0])):
        np.testing.assert_array_equal(y, reference[i])


def test_run_releases_the_gil(fashion_onnx, fashion_images):
    """With a switch interval of 1 s, the main thread can run during another thread's run
    only if that run released the GIL: otherwise it gets the GIL back only after the
    run, by which time the run has said it is done."""
    sess = partita.InferenceSession(fashion_onnx, providers=["dnnl", "host"])
    feed = {"input": fashion_images}
    sess.run(None, feed)  # first run: makes the session
    started, done = threading.Event(), threading.Event()

    def runner():
        started.set()
        sess.run(None, feed)
        done.set()

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1.0)
    try:
        t = threading.Thread(target=runner)
        t.start()
        started.wait()
        spins = 0
        while not done.is_set():
            spins += 1
        t.join()
    finally:
        sys.setswitchinterval(interval)
    assert spins > 100, spins
