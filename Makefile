# saturate: `make run` sets up, builds and runs a search; `make test` sets up, builds and tests.
BUILD ?= build
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc)
PYTHON ?= python3
export CCACHE_BASEDIR := $(CURDIR)
export CCACHE_SLOPPINESS := pch_defines,time_macros,include_file_mtime,include_file_ctime
export CCACHE_NOHASHDIR := 1

.PHONY: setup configure build test test-all test-quick test-loaded sanitize run deps bench clean

setup:
	@bash scripts/setup.sh

$(BUILD)/build.ninja: CMakeLists.txt
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) \
	  -DCMAKE_PREFIX_PATH="$$($(PYTHON) -c 'import torch;print(torch.utils.cmake_prefix_path)')" \
	  -DPython3_EXECUTABLE=$$(command -v $(PYTHON))

configure: setup $(BUILD)/build.ninja

# the build fails when the compiler warns (-Wall -Wextra clean; scripts/build_checked.py)
build: configure
	$(PYTHON) scripts/build_checked.py $(BUILD) -j $(JOBS)

# every test but the two longest statistical runs (a 2-epoch convnet to 85 % test accuracy, 15 min on
# a busy 2-core machine; the convnet noise scale against brute force, 9 min): their mlp versions stay
# in. `make test-all` runs them too. CI (.ci/run) runs `make test` and must finish in 90 minutes.
LONG_TESTS := ^cli\.train_fashion_mnist_convnet$$|^GradientNoiseScale\.OnAConvnetAndFashionMnist
test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 1800 -E '$(LONG_TESTS)'

# every test, the two long runs included
test-all: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 1800

# every test with every core busy (stress-ng hogs): what a busy developer machine does to CI
test-loaded: build
	bash scripts/test_loaded.sh $(BUILD) $(JOBS)

# ASan+UBSan build in build-asan/ and the unit tests against it (scripts/sanitize.sh; README: time)
sanitize: setup
	bash scripts/sanitize.sh build-asan $(JOBS)

# the loop after a change: the GoogleTest suites and the layer checks, without the suites labelled
# slow (statistical, timed or killed runs; tests/CMakeLists.txt). `make test` runs everything.
test-quick: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 900 -L '^(unit|layers)$$' -LE '^(slow|fuzz)$$'

# only the command-line tool (no tests), then a search whose table shows the boundary: a 256 MiB
# budget keeps the demo under a minute on 2 cores (the default 4 GiB takes minutes there)
run: configure
	cmake --build $(BUILD) -j $(JOBS) --target saturate
	$(BUILD)/saturate search --model convnet --memory-budget 256MiB

deps:
	bash scripts/fill_deps.sh

bench: build
	$(PYTHON) bench/search_strategies.py --saturate $(BUILD)/saturate

clean:
	rm -rf $(BUILD)

# GPU check (docs/gpu.md): `make gpu-pack` here packs the built binaries and the libraries a bare
# GPU machine lacks into gpu-pack/; `make gpu-check` there runs every GPU check in one bounded run
# (no setup/build prerequisites: the GPU machine has no Debian packages). GPU_CHECK_ARGS: e.g.
# --dry-run, or --device cpu --quick for the CPU rehearsal.
.PHONY: gpu-check gpu-pack
gpu-check: ; bash scripts/gpu_check.sh $(GPU_CHECK_ARGS)
gpu-pack: ; bash scripts/gpu_pack.sh
