# The fuzzing tier: a libFuzzer harness for every parser of untrusted input.
# Included by the top-level Makefile.
#
#   make fuzz          every harness for FUZZ_TIME seconds (default 300), one
#                      after the other; new inputs go to tests/fuzz/out/<name>/
#   make fuzz-smoke    every harness over its seed corpus, then mutating for
#                      FUZZ_SMOKE_TIME seconds (default 2; for CI and `make test`)
#   make fuzz-build    only build build/fuzz/fuzz_<name>
#   make fuzz-<name>   one harness for FUZZ_TIME seconds, e.g. `make fuzz-frame`
#
# The harnesses are built with clang (-fsanitize=fuzzer,address,undefined).
# The src/*.c files they test are compiled again here, with clang and the
# same sanitizers, into build/fuzz/libpetri-fuzz.a: never linked from the
# gcc-built build/libpetri.a.  The archive lets the linker take only the
# objects a harness needs.
#
# A crash leaves tests/fuzz/out/<name>-crash-<sha1>: reproduce it with
#   build/fuzz/fuzz_<name> tests/fuzz/out/<name>-crash-<sha1>
# fix the parser, and add the input to tests/fuzz/corpus/<name>/ as a
# regression seed.

FUZZ_CC     ?= clang
FUZZ_BUILD  := build/fuzz
FUZZ_OUT    := tests/fuzz/out
FUZZ_NAMES  := frame jstring result path url body config mcp chat multipart junit procs netrule
FUZZ_TIME   ?= 300
FUZZ_SMOKE_TIME ?= 2

FUZZ_SAN    := -fsanitize=address,undefined -fno-sanitize-recover=all \
               -fno-omit-frame-pointer
# Warnings as in the main build, but not fatal: a clang-only warning in
# src/ must not stop the fuzzers from building.
FUZZ_CFLAGS := -std=gnu11 -g -O1 $(FUZZ_SAN) -fsanitize=fuzzer-no-link -D_GNU_SOURCE \
               $(filter-out -Werror,$(WARNINGS)) -Isrc $(PKG_CFLAGS) -MMD -MP
FUZZ_LDLIBS := $(PKG_LIBS) -lpthread -lm

# The main build's list of library sources, and its embedded files (data,
# not code: the driver, the template extension, the OpenAPI document).
FUZZ_LIB_OBJ := $(LIB_SRC:%.c=$(FUZZ_BUILD)/%.o) $(BUILD)/src/util/embed.o
FUZZ_BINS    := $(FUZZ_NAMES:%=$(FUZZ_BUILD)/fuzz_%)

# libFuzzer flags for every run, and per harness (dictionaries, sizes).
FUZZ_FLAGS        := -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
FUZZ_FLAGS_frame  := -dict=tests/fuzz/json.dict -max_len=8192
FUZZ_FLAGS_jstring := -dict=tests/fuzz/json.dict -max_len=8192
FUZZ_FLAGS_result := -max_len=4096
FUZZ_FLAGS_path   := -dict=tests/fuzz/path.dict -max_len=8192
FUZZ_FLAGS_url    := -dict=tests/fuzz/path.dict -max_len=8192
FUZZ_FLAGS_body   := -dict=tests/fuzz/json.dict -max_len=8192
FUZZ_FLAGS_config := -dict=tests/fuzz/config.dict -max_len=4096
FUZZ_FLAGS_mcp    := -dict=tests/fuzz/json.dict -max_len=8192
FUZZ_FLAGS_chat   := -dict=tests/fuzz/json.dict -max_len=8192
FUZZ_FLAGS_multipart := -max_len=16384
FUZZ_FLAGS_junit  := -dict=tests/fuzz/junit.dict -max_len=16384
FUZZ_FLAGS_procs  := -max_len=2048

fuzz-build: $(FUZZ_BINS)

$(FUZZ_BUILD)/src/%.o: src/%.c
	@mkdir -p $(dir $@)
	@echo "  FUZZCC  $<"
	@$(FUZZ_CC) $(FUZZ_CFLAGS) -c -o $@ $<

# The version string: the main build's header (the top-level Makefile).
$(FUZZ_BUILD)/src/util/version.o: $(BUILD)/version-string.h
$(FUZZ_BUILD)/src/util/version.o: FUZZ_CFLAGS += -I$(BUILD)

$(FUZZ_BUILD)/libpetri-fuzz.a: $(FUZZ_LIB_OBJ)
	@rm -f $@
	@ar rcs $@ $^

# Three harnesses #include a src/*.c file to reach its static parsers, so
# they too build without -Werror.
$(FUZZ_BUILD)/fuzz_%.o: tests/fuzz/fuzz_%.c
	@mkdir -p $(dir $@)
	@echo "  FUZZCC  $<"
	@$(FUZZ_CC) $(FUZZ_CFLAGS) -c -o $@ $<

$(FUZZ_BUILD)/fuzz_%: $(FUZZ_BUILD)/fuzz_%.o $(FUZZ_BUILD)/libpetri-fuzz.a
	@echo "  FUZZLD  $@"
	@$(FUZZ_CC) $(FUZZ_SAN) -fsanitize=fuzzer -o $@ $^ $(FUZZ_LDLIBS)

# $(1): harness, $(2): scratch directory under $(FUZZ_OUT), $(3): more
# libFuzzer flags.  New inputs go to the scratch directory (listed first),
# never into the seed corpus in git; the log is $(FUZZ_OUT)/$(2).log.
fuzz_run = @mkdir -p $(FUZZ_OUT)/$(2) && echo "  FUZZ    $(1)" && \
	if ! $(FUZZ_BUILD)/fuzz_$(1) $(FUZZ_FLAGS) $(FUZZ_FLAGS_$(1)) $(3) \
		-artifact_prefix=$(FUZZ_OUT)/$(1)- $(FUZZ_OUT)/$(2) tests/fuzz/corpus/$(1) \
		>$(FUZZ_OUT)/$(2).log 2>&1; then tail -n 60 $(FUZZ_OUT)/$(2).log; exit 1; fi; \
	grep -E '^(stat::number_of_executed_units|stat::average_exec_per_sec|Done)' \
		$(FUZZ_OUT)/$(2).log | sed 's/^/          $(1): /'

fuzz: $(FUZZ_NAMES:%=fuzz-%)

$(FUZZ_NAMES:%=fuzz-%): fuzz-%: $(FUZZ_BUILD)/fuzz_%
	$(call fuzz_run,$*,$*,-max_total_time=$(FUZZ_TIME))

fuzz-smoke: $(FUZZ_NAMES:%=fuzz-smoke-%)

$(FUZZ_NAMES:%=fuzz-smoke-%): fuzz-smoke-%: $(FUZZ_BUILD)/fuzz_%
	@rm -rf $(FUZZ_OUT)/smoke-$*
	$(call fuzz_run,$*,smoke-$*,-max_total_time=$(FUZZ_SMOKE_TIME))

.SECONDARY: $(FUZZ_NAMES:%=$(FUZZ_BUILD)/fuzz_%.o)
.PHONY: fuzz-build $(FUZZ_NAMES:%=fuzz-%) $(FUZZ_NAMES:%=fuzz-smoke-%)

-include $(shell find $(FUZZ_BUILD) -name '*.d' 2>/dev/null)
