# Entry point. `make serve` and `make test` work on a fresh Debian 12 machine: they install what
# is missing, fetch and build the pinned engine into a cache outside build/, then build 1bit.
#   make build [CUDA=1] [VULKAN=1]   engine + 1bit; the binary is build/bin/1bit
#   make serve [ARGS=...] build, then `build/bin/1bit serve $(ARGS)`
#   make test             build with the tests, then run every test through ctest
#   make clean            remove build/ (the engine cache stays)

BUILD_DIR ?= build
JOBS ?= $(shell nproc)
CUDA ?=
VULKAN ?=
ARGS ?=
REQUIRE_TESTS ?= OFF

ON_VALUES := 1 ON on yes
ENGINE_FLAGS := $(if $(filter $(ON_VALUES),$(CUDA)),--cuda) $(if $(filter $(ON_VALUES),$(VULKAN)),--vulkan)
SETUP_FLAGS := $(if $(filter $(ON_VALUES),$(VULKAN)),--with-vulkan)
CXX_COMPILER := $(shell command -v clang++ 2>/dev/null || command -v c++)

.PHONY: build build-tests serve test clean setup setup-tests

setup:
	@scripts/setup.sh $(SETUP_FLAGS)

setup-tests:
	@scripts/setup.sh --with-tests $(SETUP_FLAGS)

build: setup
	@$(MAKE) --no-print-directory compile

build-tests: setup-tests
	@$(MAKE) --no-print-directory compile REQUIRE_TESTS=ON

.PHONY: compile
# CMake cannot switch an existing build directory to another compiler (make serve before clang++
# is installed, make test after): such a directory is configured afresh.
compile:
	@prefix=$$(scripts/engine.sh $(ENGINE_FLAGS)) && \
	if [ -f $(BUILD_DIR)/CMakeCache.txt ] && \
	   ! grep -q '^CMAKE_CXX_COMPILER:[A-Z]*=$(CXX_COMPILER)$$' $(BUILD_DIR)/CMakeCache.txt; then \
	  rm -rf $(BUILD_DIR)/CMakeCache.txt $(BUILD_DIR)/CMakeFiles; \
	fi && \
	cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=$(CXX_COMPILER) \
	      -DONEBIT_ENGINE_PREFIX="$$prefix" -DONEBIT_REQUIRE_TESTS=$(REQUIRE_TESTS) \
	      -DONEBIT_CUDA=$(if $(filter --cuda,$(ENGINE_FLAGS)),ON,OFF) \
	      -DONEBIT_VULKAN=$(if $(filter --vulkan,$(ENGINE_FLAGS)),ON,OFF) >/dev/null && \
	cmake --build $(BUILD_DIR) -j $(JOBS)

serve: build
	$(BUILD_DIR)/bin/1bit serve $(ARGS)

test: build-tests
	cd $(BUILD_DIR) && ctest --output-on-failure --no-tests=error -j $(JOBS)

clean:
	rm -rf $(BUILD_DIR)
