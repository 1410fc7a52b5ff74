# partita: the two commands a user needs are `make demo` and `make test`.
# Both install what is missing (scripts/setup.sh), configure and build.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all setup build demo test test-long bench debug asan tsan fuzz clean

all: build

setup:
	@./scripts/setup.sh

$(BUILD)/build.ninja: | setup
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

build: setup $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	./scripts/demo.sh $(BUILD)

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -LE long

test-long: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

bench: build
	./bench/run.sh $(BUILD)

debug: setup
	cmake -S . -B build-debug -G Ninja -DCMAKE_BUILD_TYPE=Debug
	cmake --build build-debug -j $(JOBS)
	cd build-debug && ctest --output-on-failure -j $(JOBS) -LE long

asan: setup
	cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DPARTITA_SANITIZE=address
	cmake --build build-asan -j $(JOBS)
	cd build-asan && ctest --output-on-failure -j $(JOBS) -LE 'long|nosan'

tsan: setup
	cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPARTITA_SANITIZE=thread
	cmake --build build-tsan -j $(JOBS)
	# The threaded tests run their kernels on one thread under TSan (libgomp is not
	# instrumented; see host::KernelThreadsForTSan): the sessions' threads are checked.
	cd build-tsan && ctest --output-on-failure -L threads

# The libFuzzer targets (fuzz/, docs/security.md): clang with ASan+UBSan in their own
# build dir. Each runs for FUZZ_SECONDS in turn from its committed seeds
# (fuzz/corpus/<target>/, with fuzz/<target>.dict when there is one); inputs it finds
# go to build-fuzz/corpus/<target>/, findings (crash, sanitizer report, hang > 10 s,
# > 2 GB) to build-fuzz/findings/<target>/.
# FUZZ_TARGET=onnx (or artifact, npy) runs one; FUZZ_FLAGS adds libFuzzer flags (e.g.
# "-fork=1 -ignore_crashes=1" to go on past findings). Fails at the end if any target
# found something.
FUZZ_SECONDS ?= 60
FUZZ_TARGET ?= onnx artifact npy
FUZZ_FLAGS ?=
fuzz: setup
	cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
	  -DPARTITA_FUZZ=ON -DPARTITA_SANITIZE=address -DCMAKE_CXX_FLAGS=-fsanitize=fuzzer-no-link $(CMAKE_FLAGS)
	cmake --build build-fuzz -j $(JOBS) --target $(addsuffix _fuzzer,$(FUZZ_TARGET)) artifact_fuzz_seeds
	@failed=""; for t in $(FUZZ_TARGET); do \
	  mkdir -p build-fuzz/corpus/$$t build-fuzz/findings/$$t; \
	  if [ $$t = artifact ]; then build-fuzz/bin/artifact_fuzz_seeds build-fuzz/corpus/artifact || exit 1; fi; \
	  dict=""; if [ -f fuzz/$$t.dict ]; then dict=-dict=fuzz/$$t.dict; fi; \
	  echo "fuzz: $$t for $(FUZZ_SECONDS) s"; \
	  build-fuzz/bin/$${t}_fuzzer -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 -malloc_limit_mb=2048 \
	    -timeout=10 -print_final_stats=1 -artifact_prefix=build-fuzz/findings/$$t/ $$dict $(FUZZ_FLAGS) \
	    build-fuzz/corpus/$$t fuzz/corpus/$$t || failed="$$failed $$t"; \
	done; \
	if [ -n "$$failed" ]; then echo "fuzz: findings from:$$failed (see build-fuzz/findings/)"; exit 1; fi

clean:
	rm -rf $(BUILD) build-debug build-asan build-tsan build-fuzz
