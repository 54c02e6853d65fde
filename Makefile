# tq — GNU make build. Sources are discovered by wildcard so that adding a file
# to a library folder, a tool to cmd/ or a test to tests/ needs no Makefile edit.

PREFIX  ?= /usr/local
DESTDIR ?=
CC      ?= cc
OPT     ?= -O2
BUILD   ?= build
BIN     ?= bin

PKGS := libzstd libcrypto libcjson libarchive libpcre2-8 libutf8proc

# A machine without the libraries: make (any goal but deps, clean, help and print-*) names
# the ones pkg-config cannot find and runs scripts/install-deps check, which lists each
# package it will install and why before installing it (apt-get or brew): what the build and
# make check need, so that `make demo` then `make check` work on a fresh machine. `make deps`
# runs the same on request (scripts/install-deps --dry-run SET only lists; SET build, check,
# bench or ci).
# macOS with Homebrew: openssl@3 and libarchive are keg-only (formulae.brew.sh; see
# scripts/install-deps), so their .pc files are not in brew's pkgconfig folder; put their
# folders on PKG_CONFIG_PATH (what `brew info libarchive` advises). Never run on a Mac here.
ifeq ($(shell uname -s),Darwin)
BREW_PREFIX := $(shell brew --prefix 2>/dev/null)
ifneq ($(BREW_PREFIX),)
export PKG_CONFIG_PATH := $(BREW_PREFIX)/opt/openssl@3/lib/pkgconfig:$(BREW_PREFIX)/opt/libarchive/lib/pkgconfig$(if $(PKG_CONFIG_PATH),:$(PKG_CONFIG_PATH))
endif
endif
ifeq ($(filter clean help deps print-%,$(MAKECMDGOALS)),)
PKG_OK := $(shell pkg-config --exists $(PKGS) && echo yes)
ifneq ($(PKG_OK),yes)
PKG_MISSING := $(strip $(foreach p,$(PKGS),$(if $(shell pkg-config --exists $(p) && echo yes),,$(p))))
$(info tq: pkg-config cannot find $(PKG_MISSING); running scripts/install-deps check (make deps does this on its own))
DEPS_RC := $(shell ./scripts/install-deps check >&2; echo $$?)
ifneq ($(DEPS_RC),0)
$(error scripts/install-deps failed; install the development packages of $(PKG_MISSING) by hand)
endif
endif
endif

PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)

WARN    := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wno-unused-parameter -Wno-psabi
# gcc warns when an error message might be cut to fit tq_err; cutting is intended. clang lacks the flag.
WARN    += $(if $(findstring clang,$(shell $(CC) --version 2>/dev/null | head -n1)),,-Wno-format-truncation)
CFLAGS  ?=
CSTD    := -std=c11
CFLAGS  += $(CSTD) -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 $(OPT) -g $(WARN) \
           -ffp-contract=off -fno-fast-math -pthread -I. $(PKG_CFLAGS) $(EXTRA_CFLAGS)
LDFLAGS += -pthread $(EXTRA_LDFLAGS)
LDLIBS  += $(PKG_LIBS) -lm

# The GPU backend (runtime/metal/, docs/metal.md): its kernels build as C everywhere (the shim
# make check runs); on macOS with Xcode's Metal compiler they also build as a metallib that is
# embedded in the library, with the Objective-C host code. Elsewhere the build says the host
# code was skipped, and tq-run --backend metal exits 2.
UNAME_S := $(shell uname -s)
METAL   := $(if $(filter Darwin,$(UNAME_S)),$(shell xcrun -sdk macosx -f metal 2>/dev/null))
ifneq ($(METAL),)
METAL_OBJ  := $(BUILD)/runtime/metal/metal.o $(BUILD)/runtime/metal/metallib.o
CFLAGS     += -DTQ_HAVE_METAL=1
LDLIBS     += -framework Metal -framework Foundation -framework CoreGraphics
METAL_NOTE := tq: Metal backend: runtime/metal/metal.m and kernels.metal built with $(METAL)
else
METAL_OBJ  :=
METAL_NOTE := tq: Metal host code (runtime/metal/metal.m) skipped: $(if $(filter Darwin,$(UNAME_S)),no Metal compiler (xcrun -f metal failed: install Xcode and its Metal toolchain),not macOS); the kernels are built and tested through the C shim
endif

# The library: the toolbox, the formats, the kernels and one folder per pipeline.
LIBDIRS  := common formats quant quant/convert layout/split layout/rows verify runtime runtime/metal tokenizer
# common/platform_*.c: the one place with OS-specific calls (common/platform.h); each build
# takes its system's file only.
PLATFORM := $(if $(filter Darwin,$(shell uname -s)),macos,linux)
LIB_SRC  := $(filter-out $(filter-out common/platform_$(PLATFORM).c,$(wildcard common/platform_*.c)),\
              $(sort $(wildcard $(addsuffix /*.c,$(LIBDIRS)))))
LIB_OBJ  := $(patsubst %.c,$(BUILD)/%.o,$(LIB_SRC))
LIB      := $(BUILD)/libtq.a
# The shared library beside it, with the soname of the major version: libtq.so.0.1.0,
# soname libtq.so.0 (macOS: libtq.0.1.0.dylib, install name libtq.0.dylib). The library's
# objects are position-independent so that both are made from the same objects.
VERSION  := $(shell sed -n 's/^\#define TQ_VERSION "\(.*\)"/\1/p' common/common.h)
SOMAJOR  := $(firstword $(subst ., ,$(VERSION)))
ifeq ($(shell uname -s),Darwin)
SO_REAL  := libtq.$(VERSION).dylib
SO_NAME  := libtq.$(SOMAJOR).dylib
SO_DEV   := libtq.dylib
SO_FLAGS  = -dynamiclib -install_name $(PREFIX)/lib/$(SO_NAME)
else
SO_REAL  := libtq.so.$(VERSION)
SO_NAME  := libtq.so.$(SOMAJOR)
SO_DEV   := libtq.so
SO_FLAGS  = -shared -Wl,-soname,$(SO_NAME) -Wl,--version-script=scripts/libtq.map
endif
SHLIB    := $(BUILD)/$(SO_REAL)
# Public headers: every header of a library folder except the *_internal.h ones, and tq.h,
# which includes them all. Installed as make builds them in $(BUILD)/include: tq.h at the
# top, the others under tq/ and rewritten to include each other as "tq/FOLDER/NAME.h", so
# that pkg-config --cflags tq puts PREFIX/include on a user's include path and no generic
# names (tq.h, header comment).
LIB_HDR  := $(filter-out %_internal.h,$(sort $(wildcard $(addsuffix /*.h,$(LIBDIRS)))))
INC_HDR  := $(BUILD)/include/tq.h $(patsubst %,$(BUILD)/include/tq/%,$(LIB_HDR))

# The synthetic-model generator: linked into tq-mkmodel, the tests and the benchmarks only,
# not into the installed library.
MK_SRC   := $(sort $(wildcard testdata/mkmodel/*.c))
MK_OBJ   := $(patsubst %.c,$(BUILD)/%.o,$(MK_SRC))
MKLIB    := $(BUILD)/libtqmk.a

CMD_SRC  := $(sort $(wildcard cmd/tq-*.c))
TOOLS    := $(patsubst cmd/%.c,$(BIN)/%,$(CMD_SRC))
CMD_COMMON_SRC := $(filter-out cmd/tq-%.c,$(wildcard cmd/*.c))
CMD_COMMON_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(CMD_COMMON_SRC))

TEST_SRC := $(sort $(wildcard tests/unit/test_*.c))
TEST_BIN := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(TEST_SRC))
TEST_COMMON_SRC := $(filter-out tests/unit/test_%.c,$(wildcard tests/unit/*.c))
TEST_COMMON_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(TEST_COMMON_SRC))

# Fuzz targets (tests/fuzz/fuzz_*.c) are also linked with a replay driver so that make check
# runs their seed corpora and every regression input with the ordinary (or ASan) build.
# The other tests/fuzz/*.c are helpers linked into every fuzz program.
FUZZ_SRC    := $(sort $(wildcard tests/fuzz/fuzz_*.c))
FUZZ_REPLAY := $(patsubst tests/fuzz/%.c,$(BUILD)/fuzz-replay/%,$(FUZZ_SRC))
FUZZ_COMMON_SRC := $(filter-out tests/fuzz/fuzz_%.c tests/fuzz/replay_main.c,$(wildcard tests/fuzz/*.c))
FUZZ_COMMON_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(FUZZ_COMMON_SRC))
# make fuzz-build: the same targets as libFuzzer programs, $(FUZZ_BUILD)/fuzz_NAME, built by
# clang with ASan + UBSan in their own tree (library and tools instrumented for coverage too).
FUZZ_BUILD  := build-fuzz
FUZZ_CC     := clang
FUZZ_PROGS  := $(patsubst tests/fuzz/%.c,$(BUILD)/%,$(FUZZ_SRC))
SAN_CFLAGS  := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
SAN_LDFLAGS := -fsanitize=address,undefined

# Variants of the metal tests with another build of the shim (runtime/metal/shim.c), run by
# tests/cli/metal-shim-barriers.sh and metal-shim-modes.sh (docs/metal.md, The shim): -mut is
# built from a copy of kernels.metal whose barriers TQ_SHIM_MUT deletes or makes divergent
# (scripts/shim-barriers); -fma with floating-point contraction (fused multiply-adds, as a GPU
# compiler may emit; x86-64 needs -mfma for them, and a CPU with FMA to run them).
SHIMVAR      := $(BUILD)/shimvar
# -O2 after $(OPT): GCC forms fused multiply-adds only with -fexpensive-optimizations (-O2 and
# up), and check-asan builds at -O1, where the fma variant would have none
SHIM_FMA_CFLAGS := -O2 -ffp-contract=fast -DTQ_SHIM_FMA=1 $(if $(filter x86_64-% amd64-%,$(shell $(CC) -dumpmachine)),-mfma)
SHIMVAR_BIN  := $(SHIMVAR)/test_metal_kernels-mut $(SHIMVAR)/test_metal_kernels-fma $(SHIMVAR)/test_metal_decode-fma
SHIM_DEPS     = runtime/metal/shim.c runtime/metal/kernels.metal $(wildcard runtime/metal/*.h) $(LIB_CFLAGS_STAMP)

# Benchmark programs (bench/*.c), run by the bench/*.sh scripts: $(BUILD)/bench/NAME.
BENCH_SRC := $(sort $(wildcard bench/*.c))
BENCH_BIN := $(patsubst bench/%.c,$(BUILD)/bench/%,$(BENCH_SRC))

MAN1 := $(wildcard man/*.1)
MAN5 := $(wildcard man/*.5)

.SECONDARY:
.PHONY: deps all headers tools lib tests bench-build check check-asan check-tsan check-long check-arm64 check-metal posix-syntax demo bench verify mutate fuzz fuzz-build fuzz-progs install uninstall completions clean help metal-note
all: metal-note $(LIB) $(SHLIB) $(TOOLS) completions headers
lib: $(LIB) $(SHLIB)
headers: $(INC_HDR)
tools: $(TOOLS)
tests: $(TEST_BIN) $(FUZZ_REPLAY) $(SHIMVAR_BIN)
bench-build: $(BENCH_BIN)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(LIB): $(LIB_OBJ) $(METAL_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@
	ar rcs $@ $^

# Hidden visibility: libtq.so exports only what the public headers declare with TQ_API
# (common/common.h; tests/cli/exports.sh). The tools and tests link libtq.a, where hidden
# symbols still link between objects.
LIB_OBJ_FLAGS := -fPIC -fvisibility=hidden
$(LIB_OBJ) $(METAL_OBJ): CFLAGS += $(LIB_OBJ_FLAGS)
# The library's objects are rebuilt when its compile flags change (an older build tree's
# objects without -fPIC cannot go into libtq.so): $(BUILD)/lib.cflags holds the flags and
# is rewritten only when they differ.
LIB_CFLAGS_STAMP := $(BUILD)/lib.cflags
ifeq ($(filter clean help print-%,$(MAKECMDGOALS)),)
$(shell mkdir -p $(BUILD) && { echo '$(CC) $(CFLAGS) $(LIB_OBJ_FLAGS)' | cmp -s - $(LIB_CFLAGS_STAMP) || echo '$(CC) $(CFLAGS) $(LIB_OBJ_FLAGS)' >$(LIB_CFLAGS_STAMP); })
endif
$(LIB_OBJ): $(LIB_CFLAGS_STAMP)

$(SHLIB): $(LIB_OBJ) $(METAL_OBJ) scripts/libtq.map
	@mkdir -p $(dir $@)
	$(CC) $(SO_FLAGS) $(LDFLAGS) $(filter %.o,$^) $(LDLIBS) -o $@
	ln -sf $(SO_REAL) $(BUILD)/$(SO_NAME)
	ln -sf $(SO_NAME) $(BUILD)/$(SO_DEV)

# Shell completions made from the tools' option tables (scripts/completions).
COMPL := $(BUILD)/completions
completions: $(COMPL)/zsh/_tq
$(COMPL)/zsh/_tq: $(TOOLS) scripts/completions
	rm -rf $(COMPL)
	./scripts/completions $(BIN) $(COMPL)

# The installed headers (LIB_HDR above): quoted includes of the tree become "tq/...".
$(BUILD)/include/tq.h: tq.h
	@mkdir -p $(dir $@)
	sed 's|^#include "\(.*\)"|#include "tq/\1"|' $< >$@
$(BUILD)/include/tq/%.h: %.h
	@mkdir -p $(dir $@)
	sed 's|^#include "\(.*\)"|#include "tq/\1"|' $< >$@

# tq.pc and tq-static.pc (libtq.a, the system libraries shared) for pkg-config, for the
# PREFIX given to make install.
$(BUILD)/tq.pc $(BUILD)/tq-static.pc: $(BUILD)/%.pc: scripts/%.pc.in common/common.h Makefile
	@mkdir -p $(dir $@)
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' -e 's|@REQUIRES@|$(PKGS)|' $< >$@
.PHONY: $(BUILD)/tq.pc $(BUILD)/tq-static.pc

metal-note:
	@echo "$(METAL_NOTE)"

# macOS only: kernels.metal → metallib, embedded as bytes; metal.m as Objective-C without ARC.
# scripts/metal-flags asks the compiler for the pinned language and IEEE arithmetic
# (-fmetal-math-mode=safe, else -fno-fast-math; -ffp-contract=off) and stops the build when it
# accepts none (docs/metal.md, Building). METAL_CC / METALLIB_CC: the commands (a test puts a
# fake compiler there: tests/cli/metal-flags.sh).
METAL_CC    ?= xcrun -sdk macosx metal
METALLIB_CC ?= xcrun -sdk macosx metallib
$(BUILD)/runtime/metal/kernels.air: runtime/metal/kernels.metal runtime/metal/shim_internal.h runtime/metal/abi_internal.h scripts/metal-flags
	@mkdir -p $(dir $@)
	@flags=$$(scripts/metal-flags $(METAL_CC)) || { echo "tq: the Metal kernels were not built (above: why)" >&2; exit 1; }; \
	 echo "$(METAL_CC) $$flags -I. -c $< -o $@"; \
	 $(METAL_CC) $$flags -I. -c $< -o $@

$(BUILD)/runtime/metal/kernels.metallib: $(BUILD)/runtime/metal/kernels.air
	$(METALLIB_CC) $< -o $@

$(BUILD)/runtime/metal/metallib.c: $(BUILD)/runtime/metal/kernels.metallib scripts/embed-bytes
	scripts/embed-bytes rtm_metallib $< > $@.tmp && mv $@.tmp $@

$(BUILD)/runtime/metal/metallib.o: $(BUILD)/runtime/metal/metallib.c
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/runtime/metal/metal.o: runtime/metal/metal.m
	@mkdir -p $(dir $@)
	$(CC) $(filter-out $(CSTD),$(CFLAGS)) -std=gnu11 -x objective-c -fno-objc-arc -MMD -MP -c $< -o $@

$(MKLIB): $(MK_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@
	ar rcs $@ $^

$(BIN)/tq-mkmodel: $(BUILD)/cmd/tq-mkmodel.o $(CMD_COMMON_OBJ) $(MKLIB) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

$(BIN)/tq-%: $(BUILD)/cmd/tq-%.o $(CMD_COMMON_OBJ) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

$(BUILD)/tests/%: $(BUILD)/tests/unit/%.o $(TEST_COMMON_OBJ) $(MKLIB) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

$(SHIMVAR)/kernels/runtime/metal/kernels.metal: runtime/metal/kernels.metal scripts/shim-barriers
	@mkdir -p $(dir $@)
	scripts/shim-barriers $< $@ > $(SHIMVAR)/barriers.count

$(SHIMVAR)/shim-mut.o: $(SHIM_DEPS) $(SHIMVAR)/kernels/runtime/metal/kernels.metal
	$(CC) $(CFLAGS) $(LIB_OBJ_FLAGS) -iquote $(SHIMVAR)/kernels -c $< -o $@

$(SHIMVAR)/shim-fma.o: $(SHIM_DEPS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LIB_OBJ_FLAGS) $(SHIM_FMA_CFLAGS) -c $< -o $@

$(SHIMVAR)/%-mut: $(BUILD)/tests/unit/%.o $(SHIMVAR)/shim-mut.o $(TEST_COMMON_OBJ) $(MKLIB) $(LIB)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

$(SHIMVAR)/%-fma: $(BUILD)/tests/unit/%.o $(SHIMVAR)/shim-fma.o $(TEST_COMMON_OBJ) $(MKLIB) $(LIB)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

# The option tables' test links the front-ends' shared code (cmd/cli.c, cmd/opts.c) too.
$(BUILD)/tests/test_cli_opts: $(BUILD)/tests/unit/test_cli_opts.o $(TEST_COMMON_OBJ) $(CMD_COMMON_OBJ) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

$(BUILD)/fuzz-replay/%: $(BUILD)/tests/fuzz/%.o $(BUILD)/tests/fuzz/replay_main.o $(FUZZ_COMMON_OBJ) $(MKLIB) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

# libFuzzer supplies main(); only meaningful inside make fuzz-build (BUILD=$(FUZZ_BUILD)).
$(FUZZ_PROGS): $(BUILD)/%: $(BUILD)/tests/fuzz/%.o $(FUZZ_COMMON_OBJ) $(MKLIB) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -fsanitize=fuzzer $^ $(LDLIBS) -o $@

$(BENCH_BIN): $(BUILD)/bench/%: $(BUILD)/bench/%.o $(MKLIB) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

-include $(LIB_OBJ:.o=.d) $(METAL_OBJ:.o=.d) $(MK_OBJ:.o=.d) $(TEST_SRC:%.c=$(BUILD)/%.d) $(TEST_COMMON_OBJ:.o=.d) $(CMD_SRC:%.c=$(BUILD)/%.d) $(CMD_COMMON_OBJ:.o=.d) $(FUZZ_SRC:%.c=$(BUILD)/%.d) $(FUZZ_COMMON_OBJ:.o=.d) $(BENCH_SRC:%.c=$(BUILD)/%.d)

# make check: every unit test binary and every CLI test; ends with "N passed, N failed".
check: all tests
	@BIN=$(abspath $(BIN)) BUILD=$(abspath $(BUILD)) ./tests/run-tests

# The whole suite again, built with ASan + UBSan in a separate tree.
check-asan:
	$(MAKE) check BUILD=build-asan BIN=build-asan/bin OPT=-O1 \
	  EXTRA_CFLAGS="$(SAN_CFLAGS)" EXTRA_LDFLAGS="$(SAN_LDFLAGS)"

# The metal tests under ThreadSanitizer, in their own tree (docs/metal.md, The shim): the
# shim's fibers are announced to it as threads, and only barriers, simd collectives and the
# start and end of a threadgroup order them, so a kernel thread that reads another's write with
# no barrier between is reported as a race (halt_on_error: the test dies and fails); the
# same tests with every barrier deleted must get such a report. test_metal_decode runs
# TSAN_DECODE_FIXTURES only: the whole of it takes more than the runner's 600 s under
# ThreadSanitizer (6 of its 11 groups finished in 600 s), these about 70 s of CPU. They cover
# each path of the decode: dense with the TurboQuant rotation (llama-tq3); MoE resident, streamed
# through the cache and its reader threads into device memory, split resident and mapped
# (qwen3_moe-tq3); latent attention, sigmoid routing and affine rows (deepseek_v3-aff8); MXFP4
# experts (gpt_oss-bf16-hf); the Gated DeltaNet kernels, streamed and mapped (qwen3_5_moe-aff8);
# the CPU parts on a pool of 5 threads (threads). The same decode with every barrier deleted
# must get a race report too.
TSAN_DECODE_FIXTURES := llama-tq3 qwen3_moe-tq3 deepseek_v3-aff8 gpt_oss-bf16-hf qwen3_5_moe-aff8 threads
check-tsan:
	$(MAKE) BUILD=build-tsan BIN=build-tsan/bin OPT=-O1 EXTRA_CFLAGS="-fsanitize=thread -fno-omit-frame-pointer" \
	  EXTRA_LDFLAGS="-fsanitize=thread" build-tsan/tests/test_metal_kernels build-tsan/shimvar/test_metal_kernels-mut \
	  build-tsan/tests/test_metal_decode build-tsan/shimvar/test_metal_decode-mut
	@BIN=$(abspath build-tsan/bin) BUILD=$(abspath build-tsan) TSAN_OPTIONS="halt_on_error=1 $(TSAN_OPTIONS)" \
	  TQ_METAL_FIXTURES="$(TSAN_DECODE_FIXTURES)" TQ_TEST_FILTER='^test_metal_(kernels|decode)$$' ./tests/run-tests
	@cd build-tsan && TQ_METAL_CASES="rmsnorm softmax" TQ_SHIM_MUT=-1 TSAN_OPTIONS=halt_on_error=1 \
	  shimvar/test_metal_kernels-mut > tsan-nobarrier.out 2>&1; \
	  grep 'ThreadSanitizer: data race' tsan-nobarrier.out >/dev/null || \
	  { echo "check-tsan: with every barrier deleted, ThreadSanitizer reports no race (build-tsan/tsan-nobarrier.out)" >&2; exit 1; }; \
	  echo "check-tsan: with every barrier deleted, ThreadSanitizer reports a race, as it must"
	@cd build-tsan && rm -rf tsan-tmp && mkdir tsan-tmp && TQ_TMP=$$PWD/tsan-tmp TQ_METAL_FIXTURES=llama-tq3 \
	  TQ_SHIM_MUT=-1 TSAN_OPTIONS=halt_on_error=1 shimvar/test_metal_decode-mut > tsan-decode-nobarrier.out 2>&1; \
	  rm -rf tsan-tmp; \
	  grep 'ThreadSanitizer: data race' tsan-decode-nobarrier.out >/dev/null || \
	  { echo "check-tsan: a decode with every barrier deleted, and ThreadSanitizer reports no race (build-tsan/tsan-decode-nobarrier.out)" >&2; exit 1; }; \
	  echo "check-tsan: a decode with every barrier deleted gets a race report, as it must"

# On a Mac with Xcode's Metal toolchain: the GPU backend's checks, which must run on the GPU
# (TQ_REQUIRE_METAL: a test that cannot open it fails instead of skipping): every kernel against
# its reference (test_metal_kernels), whole decodes of every family against the CPU backend
# (test_metal_decode, run-backend) and the build's Metal line (metal-build). docs/metal.md,
# On a Mac. Elsewhere it stops at once, saying why. Written without a Mac: never run.
check-metal:
ifeq ($(METAL),)
	@echo "check-metal: not run: $(METAL_NOTE)" >&2; \
	 echo "check-metal: needs macOS with Xcode's Metal compiler (xcrun -sdk macosx -f metal)" >&2; exit 2
else
	$(MAKE) all tests
	@BIN=$(abspath $(BIN)) BUILD=$(abspath $(BUILD)) TQ_REQUIRE_METAL=1 \
	  TQ_TEST_FILTER='^(test_metal_kernels|test_metal_decode|run-backend|metal-build)$$' ./tests/run-tests
endif

# Cross-builds for Linux arm64 and runs the unit tests and make verify under qemu-user (scripts/check-arm64;
# installs the cross compiler, qemu-user and arm64 libraries). Not in check or CI: slow.
# ARM64_CLI=subset (or 1) adds the golden and byte-identity CLI tests with the arm64 tools,
# ARM64_CLI=all every CLI test (HACKING.md, arm64).
check-arm64:
	@TQ_ARM64_CLI="$(or $(ARM64_CLI),$(TQ_ARM64_CLI))" ./scripts/check-arm64

# The portable part (every source but common/platform_*.c) compiled as POSIX.1-2008 with its
# XSI extension and without _GNU_SOURCE, syntax only: a Linux-only call outside the platform
# layer (common/platform.h) is an implicit declaration here. tests/cli/platform-layer.sh.
PORTABLE_SRC := $(filter-out common/platform_%.c,$(LIB_SRC) $(CMD_SRC) $(CMD_COMMON_SRC) $(MK_SRC))
posix-syntax:
	@printf '%s\n' $(PORTABLE_SRC) | xargs -P2 -n8 $(CC) $(CSTD) -D_POSIX_C_SOURCE=200809L -D_XOPEN_SOURCE=700 \
	  -D_FILE_OFFSET_BITS=64 $(WARN) -ffp-contract=off -pthread -I. $(PKG_CFLAGS) -fsyntax-only

check-long: all tests
	@BIN=$(abspath $(BIN)) BUILD=$(abspath $(BUILD)) TQ_LONG=1 ./tests/run-tests

demo: all
	@BIN=$(abspath $(BIN)) ./scripts/demo

bench: all
	@BIN=$(abspath $(BIN)) BUILD=$(abspath $(BUILD)) ./scripts/bench

verify: all
	@BIN=$(abspath $(BIN)) ./scripts/verify

# make mutate: each mutation of tests/mutations/*.mut applied alone to a scratch copy of the
# tree, rebuilt and tested with golden updates disabled; prints the kill rate and the
# survivors (tests/MUTATION.md). Slow (hours on two cores): not part of make check.
# MUTATE_ARGS passes options, e.g. MUTATE_ARGS='--filter cache' or '--check'.
mutate: all tests
	@./scripts/mutate $(MUTATE_ARGS)

# make fuzz FUZZ_SECONDS=N: scripts/fuzz installs clang's libFuzzer when missing, runs
# make fuzz-build and then every target for N seconds.
fuzz:
	+@FUZZ_BUILD=$(FUZZ_BUILD) ./scripts/fuzz $(or $(FUZZ_SECONDS),30)

fuzz-build:
	@$(MAKE) -s fuzz-progs CC=$(FUZZ_CC) BUILD=$(FUZZ_BUILD) BIN=$(FUZZ_BUILD)/bin OPT=-O1 \
	  EXTRA_CFLAGS="$(SAN_CFLAGS) -fsanitize=fuzzer-no-link" EXTRA_LDFLAGS="$(SAN_LDFLAGS)"

fuzz-progs: $(FUZZ_PROGS) $(TOOLS)

# make install: every file goes through scripts/install-tree, which records what it put
# under DESTDIR/PREFIX (files, links and the directories it had to make) in
# share/tq/installed; make uninstall removes exactly those.
install: all $(BUILD)/tq.pc $(BUILD)/tq-static.pc
	{ for t in $(TOOLS); do echo "755 $$t bin/$$(basename $$t)"; done; \
	  echo "644 $(LIB) lib/libtq.a"; echo "755 $(SHLIB) lib/$(SO_REAL)"; \
	  echo "link $(SO_REAL) lib/$(SO_NAME)"; echo "link $(SO_NAME) lib/$(SO_DEV)"; \
	  echo "644 $(BUILD)/tq.pc lib/pkgconfig/tq.pc"; \
	  echo "644 $(BUILD)/tq-static.pc lib/pkgconfig/tq-static.pc"; \
	  echo "644 $(BUILD)/include/tq.h include/tq.h"; \
	  for h in $(LIB_HDR); do echo "644 $(BUILD)/include/tq/$$h include/tq/$$h"; done; \
	  for m in $(MAN1); do echo "644 $$m share/man/man1/$$(basename $$m)"; done; \
	  for m in $(MAN5); do echo "644 $$m share/man/man5/$$(basename $$m)"; done; \
	  for c in $(COMPL)/bash/*; do echo "644 $$c share/bash-completion/completions/$$(basename $$c)"; done; \
	  echo "644 $(COMPL)/zsh/_tq share/zsh/site-functions/_tq"; \
	} | ./scripts/install-tree install "$(DESTDIR)$(PREFIX)"

uninstall:
	./scripts/install-tree uninstall "$(DESTDIR)$(PREFIX)"

clean:
	rm -rf build build-asan build-tsan $(FUZZ_BUILD) build-o0 bin

# make print-VAR: a variable's value, for a script that must agree with the build.
print-%:
	@echo '$($*)'

# What the build and make check need, each package named with its reason before installing.
deps:
	./scripts/install-deps check

help:
	@echo "targets: deps all check check-asan check-tsan check-long check-metal demo bench bench-build verify mutate fuzz fuzz-build install uninstall clean"
