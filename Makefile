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

# The artifact loader's libFuzzer target (fuzz/): clang with ASan+UBSan in its own
# build dir, seeded with small valid artifacts, run for FUZZ_SECONDS.
FUZZ_SECONDS ?= 60
fuzz: setup
	cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
	  -DPARTITA_FUZZ=ON -DPARTITA_SANITIZE=address -DCMAKE_CXX_FLAGS=-fsanitize=fuzzer-no-link
	cmake --build build-fuzz -j $(JOBS) --target artifact_fuzzer artifact_fuzz_seeds
	mkdir -p build-fuzz/corpus build-fuzz/crashes
	build-fuzz/bin/artifact_fuzz_seeds build-fuzz/corpus
	build-fuzz/bin/artifact_fuzzer -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=4096 -timeout=10 \
	  -artifact_prefix=build-fuzz/crashes/ build-fuzz/corpus

clean:
	rm -rf $(BUILD) build-debug build-asan build-tsan build-fuzz
