# switchboard — build, test, bench, fuzz.
# Sources are found by wildcard, so a new module needs no Makefile edit:
#   library code : schemas/ bus/ common/ sandbox/ store/ cluster/ actors/ actors/*/ cli/ (all but cli/main.c)
#   unit tests   : tests/unit/test_<module>.c  -> $(BUILD)/tests/test_<module>
#   fuzz targets : tests/fuzz/fuzz_<name>.c    -> $(BUILD)/fuzz/fuzz_<name>
#   benchmarks   : bench/bench_<name>.c        -> $(BUILD)/bench/bench_<name>

BUILD   ?= build
CC      ?= cc
SAN     ?=
PKGS    := libczmq libzmq msgpack libcurl lmdb jansson libsodium libedit libwebsockets libpq libcrypto libpng libjpeg libgif libwebp
OPT     ?= -O2
JOBS    ?= $(shell nproc 2>/dev/null || echo 2)

# -Wno-missing-field-initializers: schema rows (sb_field_t) leave off the
# trailing range members unless they declare one.
CFLAGS  += -std=gnu11 $(OPT) -g -Wall -Wextra -Werror -Wno-unused-parameter -Wno-missing-field-initializers $(if $(findstring clang,$(CC)),,-Wno-format-truncation) \
           -D_GNU_SOURCE -I. $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
LDLIBS  += $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lpthread -lm

ifeq ($(SAN),1)
CFLAGS  += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDFLAGS += -fsanitize=address,undefined
endif

LIB_SRC  := $(filter-out cli/main.c,$(wildcard schemas/*.c bus/*.c common/*.c sandbox/*.c store/*.c cluster/*.c actors/*.c actors/*/*.c cli/*.c gateway/*.c workers/*.c))
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
HDRS     := $(wildcard bench/*.h schemas/*.h bus/*.h common/*.h sandbox/*.h store/*.h cluster/*.h actors/*.h actors/*/*.h cli/*.h gateway/*.h workers/*.h)
TEST_HDRS:= $(wildcard tests/common/*.h)
UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)
BENCH_SRC:= $(wildcard bench/bench_*.c)
BENCH_BIN:= $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)
FUZZ_SRC := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BIN := $(FUZZ_SRC:tests/fuzz/%.c=build-fuzz/%)

.PHONY: all run test unit integration bench fuzz fuzz-smoke asan docs clean deps deps-test deps-fuzz check-deps FORCE

all: $(BUILD)/switchboard

# what building and running need; deps-test adds what the tests need
# (Criterion, clang, Chromium, the npm test modules), deps-fuzz clang (each
# a superset of deps, so that one apt-get runs at a time)
deps:
	@bash scripts/deps.sh

deps-test:
	@bash scripts/deps.sh --tests

deps-fuzz:
	@bash scripts/deps.sh --fuzz

$(BUILD)/obj/%.o: %.c $(HDRS)
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	@$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/libswitchboard.a: $(LIB_OBJ)
	@rm -f $@
	@ar rcs $@ $^

$(BUILD)/switchboard: $(BUILD)/obj/cli/main.o $(BUILD)/libswitchboard.a
	@echo "  LINK    $@"
	@$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# Unit tests wrap malloc so the codec tests can prove that validation allocates nothing.
# They find the SSE transcripts in this tree unless $$SB_FIXTURES names others.
$(BUILD)/tests/%: tests/unit/%.c $(BUILD)/libswitchboard.a $(HDRS) $(TEST_HDRS)
	@mkdir -p $(dir $@)
	@echo "  TEST    $@"
	@$(CC) $(CFLAGS) -DSB_FIXTURES_DIR='"$(CURDIR)/tests/fixtures/llm"' $(LDFLAGS) -o $@ $< $(BUILD)/libswitchboard.a $(LDLIBS) -lcriterion

$(BUILD)/bench/%: bench/%.c $(BUILD)/libswitchboard.a $(HDRS)
	@mkdir -p $(dir $@)
	@echo "  BENCH   $@"
	@$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libswitchboard.a $(LDLIBS)

# built in parallel, as test is (JOBS: nproc)
run: deps
	@$(MAKE) -j$(JOBS) --no-print-directory all
	./$(BUILD)/switchboard serve

test: deps-test
	@$(MAKE) -j$(JOBS) --no-print-directory all units fuzz-smoke-build
	@bash tests/run_all.sh $(BUILD)

units: $(UNIT_BIN)

unit: units
	@bash tests/run_all.sh $(BUILD) unit

integration: all
	@bash tests/run_all.sh $(BUILD) integration

asan: deps-test
	@$(MAKE) -j$(JOBS) --no-print-directory BUILD=build-asan SAN=1 OPT=-O1 all units
	@ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp:print_suppressions=0 \
	  SB_ASAN=1 bash tests/run_all.sh build-asan

bench: deps all $(BENCH_BIN)
	@bash scripts/deps.sh --bench
	@bash bench/ws_deps.sh
	@bash bench/run.sh $(BUILD)

# libFuzzer targets are built with clang: the library once, instrumented
# (fuzzer-no-link), then each target linked with libFuzzer's main. A UBSan
# report aborts (no recovery), so an overflow fails the run like a crash.
FUZZ_SAN := -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
FUZZ_CFLAGS := -std=gnu11 -g -O1 -D_GNU_SOURCE -I. $(FUZZ_SAN) $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
FUZZ_OBJ := $(LIB_SRC:%.c=build-fuzz/obj/%.o)
# the objects depend on the flags: a change (as to the sanitizers) rebuilds them
build-fuzz/flags: FORCE
	@mkdir -p build-fuzz
	@echo '$(FUZZ_CFLAGS)' | cmp -s - $@ || echo '$(FUZZ_CFLAGS)' > $@
build-fuzz/obj/%.o: %.c $(HDRS) build-fuzz/flags
	@mkdir -p $(dir $@)
	@echo "  FUZZCC  $<"
	@clang $(FUZZ_CFLAGS) -c $< -o $@
build-fuzz/libfuzzlib.a: $(FUZZ_OBJ)
	@rm -f $@
	@ar rcs $@ $^
build-fuzz/%: tests/fuzz/%.c build-fuzz/libfuzzlib.a build-fuzz/flags $(HDRS) $(TEST_HDRS)
	@echo "  FUZZ    $@"
	@clang $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< build-fuzz/libfuzzlib.a $(LDLIBS)

fuzz-smoke-build: $(FUZZ_BIN)

fuzz: deps-fuzz $(FUZZ_BIN)
	@bash tests/fuzz/run.sh long

docs: all
	@mkdir -p docs
	./$(BUILD)/switchboard schemas --markdown > docs/protocol.md
	@echo "wrote docs/protocol.md"

clean:
	rm -rf build build-asan build-fuzz
