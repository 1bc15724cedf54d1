# kvbench - one Makefile. Targets:
#   all (default)  build build/kvbench
#   test           install what is missing, fetch the default model, build, run every test
#   check          build and run the tests only (no installs, no download)
#   sanitize       the test suite under AddressSanitizer + UndefinedBehaviorSanitizer
#                  (and float-cast-overflow, which gcc's -fsanitize=undefined leaves out)
#   tsan           the test suite under ThreadSanitizer (clang, LLVM's OpenMP; not in CI)
#   model          fetch the default model into models/ (idempotent, sha256-checked)
#   deps           install missing Debian/PyPI packages (apt-get only as root)
#   bench          kvbench bench engine + methods on the default model
#   plots          kvbench plot RUN=results/<run>
#   fuzz           run every fuzz target for a bounded time (clang libFuzzer)
#   clean
# Variables: BUILD (output dir), OPT (optimisation flags), WERROR=1 (CI), CC,
# JOBS (parallel compile jobs of test / sanitize; default: the machine's cores);
# environment: TEST_JOBS (tests run at once by tests/run.sh; default: the cores, at most 4).

BUILD  ?= build
# make's own default CC is cc, which `?=` would keep: gcc (what deps.sh installs) unless the
# command line or the environment names another compiler
ifeq ($(origin CC),default)
CC     := gcc
endif
OPT    ?= -O2 -march=native
SAN    ?=
CFLAGS  = -std=c11 $(OPT) $(SAN) -g -Wall -Wextra $(if $(WERROR),-Werror) -fopenmp \
          -D_GNU_SOURCE -I. $(EXTRA_CFLAGS)
LDLIBS  = -lopenblas -lcjson -lcsv -lm -lpthread

LIB_SRC  := $(sort $(filter-out harness/main.c,$(wildcard harness/*.c harness/*/*.c \
              methods/*.c kernels/*.c kernels/*/*.c datasets/*.c)))
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
TEST_SRC := $(sort $(wildcard tests/unit/test_*.c))
TEST_BIN := $(TEST_SRC:tests/unit/%.c=$(BUILD)/tests/%)
TEST_SUPPORT := $(wildcard tests/unit/support/*.c)
TEST_SUPPORT_OBJ := $(TEST_SUPPORT:%.c=$(BUILD)/obj/%.o)
JOBS ?= $(shell nproc 2>/dev/null || echo 2)

MODEL_FILE := models/SmolLM2-135M-Instruct.Q4_1.gguf

.PHONY: all test check sanitize tsan model deps bench plots fuzz clean FORCE
.DEFAULT_GOAL := all

all: $(BUILD)/kvbench

# The compiler and its flags: every object is rebuilt when they change (a `make sanitize`
# whose sanitizer list changed used to relink objects built with the old one).
BUILD_FLAGS := $(CC) $(CFLAGS) $(LDLIBS)
$(BUILD)/flags: FORCE
	@mkdir -p $(BUILD)
	@echo '$(BUILD_FLAGS)' | cmp -s - $@ || echo '$(BUILD_FLAGS)' > $@

$(BUILD)/obj/%.o: %.c $(BUILD)/flags
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

# The commit goes into run.json: version.o is rebuilt whenever it changes.
GIT_DESC := $(shell git describe --always --dirty --abbrev=12 2>/dev/null || echo unknown)
$(BUILD)/git_desc: FORCE
	@mkdir -p $(BUILD)
	@echo '$(GIT_DESC)' | cmp -s - $@ || echo '$(GIT_DESC)' > $@
$(BUILD)/obj/harness/version.o: $(BUILD)/git_desc
$(BUILD)/obj/harness/version.o: CFLAGS += -DKB_GIT_DESC='"$(GIT_DESC)"'

$(BUILD)/libkvbench.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/kvbench: $(BUILD)/obj/harness/main.o $(BUILD)/libkvbench.a
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

# the tests' shared support code is compiled once, not into every test binary
$(TEST_SUPPORT_OBJ): CFLAGS += -Itests/unit

$(BUILD)/tests/%: tests/unit/%.c $(TEST_SUPPORT_OBJ) $(BUILD)/libkvbench.a $(BUILD)/flags
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -MF $@.d -Itests/unit $< $(TEST_SUPPORT_OBJ) $(BUILD)/libkvbench.a -o $@ $(LDLIBS)

tests: $(TEST_BIN)

deps:
	@bash scripts/deps.sh

model:
	@bash scripts/fetch_model.sh

# The README's test command: set-up from nothing (the packages first, also under make -j:
# the model's fetch needs pip), then every test.
test: deps
	@$(MAKE) --no-print-directory model
	@$(MAKE) --no-print-directory -j$(JOBS) check

check: all tests
	@bash tests/run.sh $(BUILD)

sanitize:
	@$(MAKE) --no-print-directory BUILD=build-san OPT="-O1 -march=native" \
	  SAN="-fsanitize=address,undefined,float-cast-overflow -fno-omit-frame-pointer -fno-sanitize-recover=undefined,float-cast-overflow" \
	  -j$(JOBS) check

# ThreadSanitizer needs an OpenMP runtime it can see through: clang with LLVM's
# libomp and its archer tool (Debian: clang, libomp-dev), not gcc's libgomp,
# whose own synchronisation it would report as races. About 10 minutes on 2
# cores, so not part of CI; run it after touching the pool (kernels/cpu/pool.c)
# or anything run in parallel. KVBENCH_TSAN tells the tests (one skips a part:
# docs/RELIABILITY.md).
TSAN_OMP_TOOL ?= $(firstword $(wildcard /usr/lib/llvm-*/lib/libarcher.so))
tsan:
	@test -n "$(TSAN_OMP_TOOL)" && command -v clang >/dev/null || { echo "make tsan: needs clang and LLVM's OpenMP with libarcher.so (apt-get install clang libomp-dev)" >&2; exit 2; }
	@$(MAKE) --no-print-directory BUILD=build-tsan CC=clang OPT="-O1 -march=native" \
	  SAN="-fsanitize=thread -fno-omit-frame-pointer" -j$(JOBS) all tests
	@OMP_TOOL_LIBRARIES=$(TSAN_OMP_TOOL) TSAN_OPTIONS="ignore_noninstrumented_modules=1" \
	  KVBENCH_TSAN=1 bash tests/run.sh build-tsan

bench: all model
	$(BUILD)/kvbench bench engine -m $(MODEL_FILE)
	$(BUILD)/kvbench bench methods -m $(MODEL_FILE)

plots: all
	@test -n "$(RUN)" || { echo "usage: make plots RUN=results/<run>" >&2; exit 2; }
	$(BUILD)/kvbench plot "$(RUN)"

fuzz:
	@bash tests/fuzz/run.sh

clean:
	rm -rf build build-san build-tsan build-fuzz .cache

-include $(LIB_OBJ:.o=.d) $(BUILD)/obj/harness/main.d $(TEST_BIN:=.d) $(TEST_SUPPORT_OBJ:.o=.d)
