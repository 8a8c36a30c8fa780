# petri — build, test, sanitize.
#
#   make              release build with hardening flags -> build/petri
#   make SAN=1        ASan + UBSan build                 -> build-san/petri
#   make SAN=thread   ThreadSanitizer build              -> build-tsan/petri
#   make test         unit tests + black-box tests against build/petri (the
#                     MCP and E2B SDKs from npm and the web page in
#                     chromium included, CPython's own
#                     regression tests inside and bare)
#   make ci-san       the unit, CLI, API and hostile tiers under ASan+UBSan (CI
#                     runs it after make test: .ci/run)
#   make test-san     the suite under ASan+UBSan, the API and fault tiers
#                     under ThreadSanitizer
#   make unit         C unit tests only
#   make dist         the release tarball petri-$(VERSION).tar.gz (DISTDIR=.)
#   make install      install under PREFIX (/usr/local), DESTDIR honoured;
#   make uninstall    make deb: a Debian package (packaging/packaging.mk)
#
# Dependencies come from Debian packages: scripts/deps installs them.

CC      ?= cc
PYTHON  ?= /usr/bin/python3
# What petri reports itself as (scripts/version: git describe, or the
# VERSION file of a release tarball); `make VERSION=...` overrides it.
VERSION := $(shell scripts/version)
ifneq ($(words $(VERSION)),1)
$(error no version: scripts/version failed, or VERSION= is not one word)
endif
PKGS    := libseccomp jansson libmicrohttpd libcurl sqlite3 inih libarchive libxml-2.0 libcrypto libsystemd zlib libnftables libmnl

ifeq ($(SAN),1)
BUILD    ?= build-san
SANFLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all
OPTFLAGS := -O1 $(SANFLAGS) -fno-omit-frame-pointer
# Tests that measure the daemon's memory skip under ASan (its quarantine).
export PETRI_SANITIZED := 1
else ifeq ($(SAN),thread)
# ThreadSanitizer: the daemon's threads (HTTP workers, streams, reaper,
# disposer, spawners, pool).  Any report fails the run.
BUILD    ?= build-tsan
SANFLAGS := -fsanitize=thread
OPTFLAGS := -O1 $(SANFLAGS) -fno-omit-frame-pointer
export PETRI_SANITIZED := 1
export TSAN_OPTIONS := halt_on_error=1 exitcode=66 second_deadlock_stack=1 \
                       suppressions=$(abspath tests/tsan.supp)
else
BUILD    ?= build
OPTFLAGS := -O2 -D_FORTIFY_SOURCE=2
endif

WARNINGS := -Wall -Wextra -Werror -Wmissing-prototypes -Wstrict-prototypes \
            -Wshadow -Wformat=2 -Wformat-security -Wvla -Wnull-dereference \
            -Wno-unused-parameter
HARDEN   := -fstack-protector-strong -fstack-clash-protection -fcf-protection \
            -fPIE -D_GNU_SOURCE
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS))
PKG_LIBS   := $(shell pkg-config --libs $(PKGS))

CFLAGS  += -std=gnu11 -g $(OPTFLAGS) $(WARNINGS) $(HARDEN) -Isrc $(PKG_CFLAGS) -MMD -MP
LDFLAGS += -pie -Wl,-z,relro,-z,now -Wl,-z,noexecstack -Wl,--as-needed
ifneq ($(SAN),)
LDFLAGS += $(SANFLAGS)
endif
LDLIBS  += $(PKG_LIBS) -lpthread -lm

MAIN_SRC := src/cli/main.c
EXT_MAIN := src/runtime/pyext.c
PID1_MAIN := src/jail/pid1.c
LIB_SRC  := $(filter-out $(MAIN_SRC) $(EXT_MAIN) $(PID1_MAIN),$(shell find src -name '*.c' | sort))
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o) $(BUILD)/src/util/embed.o
UNIT_SRC := $(filter-out tests/unit/session/%,$(shell find tests/unit -name '*.c' | sort))
UNIT_OBJ := $(UNIT_SRC:%.c=$(BUILD)/%.o)
# The session manager over a fake sandbox (tests/unit/session/fake_box.h):
# a binary of its own, linked from objects named here and not from
# libpetri.a, so that no real box or jail can come in with an archive member.
SESSION_UNIT_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(wildcard tests/unit/session/*.c)) \
	$(patsubst %,$(BUILD)/src/%.o,session/session session/spawner session/probe session/procs session/commands session/watch \
		session/tables exec/request exec/exec \
		session/workspace workspace/ws record/record record/chain \
		exec/result runtime/processes exec/languages config/config exec/limits net/policy net/router util/base64 util/buf util/clock \
		util/cidr util/ids util/log util/metrics util/num util/timefmt util/utf8 util/version util/workq)

all: $(BUILD)/petri

$(BUILD)/petri: $(BUILD)/src/cli/main.o $(BUILD)/libpetri.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/libpetri.a: $(LIB_OBJ)
	rm -f $@
	ar rcs $@ $^

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	@$(CC) $(CFLAGS) -c -o $@ $<

# The version, for src/util/version.c alone.  The header is rewritten only
# when the string changes (FORCE runs the check on every make; cmp keeps the
# file, and so its time, when it says the same), so that a build stays
# incremental and a new commit recompiles one file.
$(BUILD)/version-string.h: FORCE
	@mkdir -p $(dir $@)
	@printf '#define PETRI_VERSION "%s"\n' '$(VERSION)' > $@.tmp
	@if cmp -s $@.tmp $@; then rm -f $@.tmp; else echo "  GEN     $@ ($(VERSION))"; mv $@.tmp $@; fi
$(BUILD)/src/util/version.o: $(BUILD)/version-string.h
$(BUILD)/src/util/version.o: CFLAGS += -I$(BUILD)
FORCE:

# The template's C extension (warm path): the jail code it needs, built for
# Debian's CPython and never with sanitizers (it is loaded by python3, not
# by petri).
PY_INCLUDE := $(shell $(PYTHON) -c 'import sysconfig; print(sysconfig.get_paths()["include"])' 2>/dev/null)
EXT_SRC    := $(EXT_MAIN) src/jail/template.c src/jail/init.c src/jail/reap.c src/jail/mounts.c \
              src/jail/landlock.c src/jail/policy.c src/jail/safe.c src/util/buf.c
$(BUILD)/_petri.so: $(EXT_SRC) $(wildcard src/jail/*.h src/util/*.h)
	@mkdir -p $(dir $@)
	@echo "  CCLD    $@"
	@$(CC) -std=gnu11 -g -O2 -D_FORTIFY_SOURCE=2 $(WARNINGS) $(HARDEN) -fPIC -Isrc \
		-I$(PY_INCLUDE) -shared -o $@ $(EXT_SRC) -Wl,-z,relro,-z,now -lseccomp

# pid 1 of the sandboxes a template forks (src/jail/pid1.c): a static
# program of its own, so that it needs no file inside the sandbox, and never
# built with sanitizers (it runs under the sandbox's seccomp filter).
PID1_SRC := $(PID1_MAIN) src/jail/reap.c src/jail/safe.c
$(BUILD)/petri-init: $(PID1_SRC) $(wildcard src/jail/*.h)
	@mkdir -p $(dir $@)
	@echo "  CCLD    $@"
	@$(CC) -std=gnu11 -O2 -D_FORTIFY_SOURCE=2 $(WARNINGS) $(HARDEN) -Isrc \
		-static-pie -o $@ $(PID1_SRC) -Wl,-z,relro,-z,now

# Embedded in the binary, so that petri is one file: the Python driver, the
# template extension, the OpenAPI document and the web page (src/web).
$(BUILD)/src/util/embed.o: src/util/embed.S src/runtime/driver.py docs/openapi.json \
			      src/runtime/run.js src/runtime/profile.R src/runtime/Run.java \
			      src/web/index.html src/web/app.js src/web/app.css \
			      src/web/plotly-frame.html src/web/plotly-frame.js \
			      src/web/html-frame.html src/web/html-frame.js \
			      $(BUILD)/_petri.so $(BUILD)/petri-init
	@mkdir -p $(dir $@)
	@echo "  AS      $<"
	@$(CC) -c -o $@ -Isrc/runtime -Idocs -Isrc/web -I$(BUILD) $<

$(BUILD)/unit-tests: $(UNIT_OBJ) $(BUILD)/libpetri.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) $(shell pkg-config --libs check)

$(BUILD)/unit-session: $(SESSION_UNIT_OBJ)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) $(shell pkg-config --libs check)

unit: $(BUILD)/unit-tests $(BUILD)/unit-session
	$(BUILD)/unit-tests
	$(BUILD)/unit-session

# The unit tests under valgrind (memcheck; definite leaks are errors).  The
# policy suite loads seccomp filters, a system call valgrind does not know:
# it runs natively only.  tests/unit/valgrind.supp: a forked child that
# _exit()s holding its parent's heap is no leak.
# Children are traced (petri's own helpers), but not the host's programs a
# test runs (the font cache's build: fc-cache, python3), which are not
# petri's code and would take minutes under memcheck; the suppressions by
# absolute path, for children that run elsewhere.
VALGRIND := valgrind -q --error-exitcode=99 --leak-check=full --vgdb=no \
            --suppressions=$(abspath tests/unit/valgrind.supp) \
            --errors-for-leak-kinds=definite --trace-children=yes \
            --trace-children-skip='*/fc-cache,*/python3*'
# Each a process of its own, the longest first (15-30 s each under
# memcheck here: the session suite, the record's listings, tens of MiB
# through SQLite, as cases of their own, SUITE:CASE), so that the two cores
# end together.
VALGRIND_SUITES := session record:listings record:core record:whole cache junit export cgroup \
		   record:budgets workq ws request codec languages mcp mounts config util share \
		   buf lease procs
ifneq ($(SAN),)
unit-valgrind:
	@echo "unit-valgrind: skipped in the sanitizer build (valgrind cannot run sanitized code)"
else
# Each suite is a process of its own, VALGRIND_JOBS at a time (memcheck
# runs one thread per process: one per core); xargs fails if any does.
# Under memcheck code runs 20-50 times slower, and on a loaded machine the
# record suite's 45 MiB listing passed its 120 s: each test's timeout is
# four times its own here (a hang still ends it).
VALGRIND_JOBS ?= 2
unit-valgrind: $(BUILD)/unit-tests $(BUILD)/unit-session
	@printf '%s\n' $(VALGRIND_SUITES) | CK_TIMEOUT_MULTIPLIER=4 xargs -P $(VALGRIND_JOBS) -I{} sh -c \
		'suite={}; case=; case $$suite in *:*) case=$${suite#*:}; suite=$${suite%%:*};; esac; \
		 if [ $$suite = session ]; then exec $(VALGRIND) $(BUILD)/unit-session; fi; \
		 exec env CK_RUN_SUITE=$$suite $${case:+CK_RUN_CASE=$$case} $(VALGRIND) $(BUILD)/unit-tests'
endif

# Black-box tests run the real binary (PETRI_BIN) with pytest from Debian.
PYTEST := $(PYTHON) -m pytest -q -ra -p no:cacheprovider
# Test processes of a pytest run: the black-box and hostile tiers mostly
# wait on sandboxes, so twice the cores keeps both busy.
PYTEST_JOBS ?= 4
# The runs of several tiers at once (blackbox's second, ci-san's API and
# hostile) wait more: at 4 processes the cores were idle 15% of the time,
# at 6 they are busy, and the run takes 9% less.
MERGED_JOBS ?= 6
# The daemons the tests start keep their execution records (persistent by
# default, docs/record.md) here rather than in the machine's state directory.
export STATE_DIRECTORY := $(abspath $(BUILD))/test-state

# The black-box tiers: the CLI's alone (at its end it checks that no
# sandbox process outlived its supervisor and that the host's mounts are
# as they were, which a daemon the faults kill -9 would fail), then the
# others in one pytest run (docs/testing.md, "Several tiers in one pytest
# run"): one tier's slowest tests overlap the next one's, and the tests
# that wait keep the cores busy with the ones that do not.
BLACKBOX := tests/driver tests/api tests/analyst tests/docs tests/hostile tests/net
blackbox: $(BUILD)/petri
	PETRI_BIN=$(abspath $(BUILD)/petri) $(PYTEST) -n $(PYTEST_JOBS) tests/cli
	PETRI_BIN=$(abspath $(BUILD)/petri) $(PYTEST) -n $(MERGED_JOBS) $(BLACKBOX)

# The adversarial tier: hostile programs on the cold path, cold sessions and
# warm sessions; the syscall sweep; the posture of a running sandbox.
hostile: $(BUILD)/petri
	PETRI_BIN=$(abspath $(BUILD)/petri) $(PYTEST) -n $(PYTEST_JOBS) $(HOSTILE_SELECT) tests/hostile

# Load and faults: 100 sessions with hostile neighbours, kill -9 of the
# daemon, the warm template killed under load, SIGTERM under load.  Alone
# and serially, after the blackbox tiers: its tests load the machine on
# purpose and give their own executions limits of a second, which the
# other tiers' load starved when they ran beside them (CI: an execution of
# 1 s given 43 ms of CPU).  It writes latencies to tests/faults/out/ (it
# asserts none).
faults: $(BUILD)/petri
	PETRI_BIN=$(abspath $(BUILD)/petri) $(PYTEST) -s tests/faults

# Three nodes behind HAProxy (deploy/local/cluster), through the router
# only; one cluster for the module, its tests in order (~1 minute).
cluster-test: $(BUILD)/petri tests/e2b/new/node_modules
	PETRI_BIN=$(abspath $(BUILD)/petri) $(PYTEST) tests/cluster

# MCP: raw-protocol tests, and the official MCP TypeScript SDK as a client
# (installed with npm ci from tests/mcp/package-lock.json when missing).
tests/mcp/node_modules: tests/mcp/package.json tests/mcp/package-lock.json
	cd tests/mcp && npm ci --prefer-offline --no-audit --no-fund
	@touch $@

mcp-test: $(BUILD)/petri tests/mcp/node_modules
	PETRI_BIN=$(abspath $(BUILD)/petri) $(PYTEST) -n $(PYTEST_JOBS) tests/mcp
	cd tests/mcp && PETRI_BIN=$(abspath $(BUILD)/petri) node --test sdk.test.mjs

# The web page (docs/web.md) in Debian's chromium, driven by playwright-core
# (pinned in tests/web/package-lock.json), against petri serve: one browser
# and one daemon per file, the files in parallel.  web-screenshots also
# saves the main views into docs/ (web-session.png, web-overview.png).
tests/web/node_modules: tests/web/package.json tests/web/package-lock.json
	cd tests/web && npm ci --prefer-offline --no-audit --no-fund
	@touch $@

web-test: $(BUILD)/petri tests/web/node_modules
	cd tests/web && PETRI_BIN=$(abspath $(BUILD)/petri) node --test page.test.mjs keys.test.mjs first-minute.test.mjs ports.test.mjs

web-screenshots: $(BUILD)/petri tests/web/node_modules
	cd tests/web && PETRI_BIN=$(abspath $(BUILD)/petri) PETRI_WEB_SCREENSHOTS=$(abspath docs) \
		node --test page.test.mjs

# The official E2B JS SDKs (e2b, @e2b/code-interpreter), newest and oldest
# pinned in tests/e2b/{new,old}/package-lock.json, against petri serve.
tests/e2b/%/node_modules: tests/e2b/%/package.json tests/e2b/%/package-lock.json
	cd tests/e2b/$* && npm ci --prefer-offline --no-audit --no-fund
	@touch $@

# The three SDK runs at once: each spends most of its time waiting (~10 s of
# CPU in ~65 s one after the other).
e2b-test: $(BUILD)/petri tests/e2b/new/node_modules tests/e2b/old/node_modules
	PETRI_BIN=$(abspath $(BUILD)/petri) $(PYTEST) -n 3 tests/e2b

# deploy/kubernetes offline (seconds): every object against its schema from
# kubernetes-models (pinned in tests/kubernetes/package-lock.json), unknown
# fields included; its ports, paths and grace period agree with petri.ini;
# haproxy.cfg is what deploy/kubernetes/generate writes, and HAProxy starts
# with it and answers in JSON while no node's name resolves.
tests/kubernetes/node_modules: tests/kubernetes/package.json tests/kubernetes/package-lock.json
	cd tests/kubernetes && npm ci --prefer-offline --no-audit --no-fund
	@touch $@

kubernetes-test: $(BUILD)/petri tests/kubernetes/node_modules
	PETRI_BIN=$(abspath $(BUILD)/petri) $(PYTEST) tests/kubernetes

# CPython's own regression tests (Debian's libpython3.11-testsuite) for the
# modules that exercise the sandbox's decisions, bare, in a cold sandbox and
# in a warm session at once; a test that passes bare must pass inside.  One
# pytest process: the three runs share one fixture (~2.5 minutes).
cpython-test: $(BUILD)/petri
	PETRI_BIN=$(abspath $(BUILD)/petri) $(PYTEST) tests/cpython

# petri ask against a scripted OpenAI-compatible server.
ask-test: $(BUILD)/petri
	PETRI_BIN=$(abspath $(BUILD)/petri) $(PYTEST) -n $(PYTEST_JOBS) tests/ask

# make install and uninstall into a temporary DESTDIR, the systemd unit
# (systemd-analyze verify, its capabilities, sd_notify), make deb, and the
# package installed on this host and purged (as root, when no petri package
# is installed already).  Serially: one package at a time.
install-test: $(BUILD)/petri
	PETRI_BUILD=$(BUILD) $(PYTEST) tests/install

# `make test`: what the tiers run is built first, JOBS at a time; then the
# tiers, one after the other, under scripts/leftovers:
# TMPDIR is a directory of the suite's own, and a file the suite leaves
# there or in /tmp fails it.  The last, `waiting`, runs the tiers that
# mostly wait several at a time.
JOBS  := $(or $(JOBS),$(shell nproc))
CLIENT_TIERS := mcp-test web-test e2b-test ask-test install-test kubernetes-test fuzz-smoke
TIERS := unit unit-valgrind blackbox faults waiting

clients:
	@$(MAKE) --no-print-directory -j$(JOBS) --output-sync=target $(CLIENT_TIERS)

# The tiers that mostly wait (on CPython's own tests, HAProxy and three
# nodes, node, chromium, a scripted model, dpkg), WAIT_JOBS at a time,
# each one's output together once it ends.
WAITING_TIERS := cpython-test cluster-test $(CLIENT_TIERS)
WAIT_JOBS ?= 4
waiting:
	@$(MAKE) --no-print-directory -j$(WAIT_JOBS) --output-sync=target $(WAITING_TIERS)

test-build: $(BUILD)/petri $(BUILD)/unit-tests $(BUILD)/unit-session

test:
	@$(MAKE) --no-print-directory -j$(JOBS) test-build fuzz-build
	@scripts/leftovers $(MAKE) --no-print-directory -j1 $(TIERS)

# What CI runs after `make test` (.ci/run): the unit, CLI, API and hostile
# tiers against the ASan+UBSan build, where petri meets what clients and
# sandboxes send; a memory error or undefined behaviour stops the change.
# Of the hostile corpus it runs the attacks on the daemon (not those on the
# jail alone), on the cold path (tests/hostile/test_corpus.py says why);
# the API and hostile tiers in one pytest run, as `blackbox` runs them (no
# API test is named as the selection leaves out).  The unit tier, one
# process that keeps half a core busy, runs beside the CLI's.
CI_SAN_HOSTILE := -m 'not jail' -k 'not run: and not serve-warm:'
ci-san:
	@$(MAKE) --no-print-directory SAN=1 -j$(JOBS) test-build
	@scripts/leftovers $(MAKE) --no-print-directory SAN=1 ci-san-tiers

ci-san-tiers:
	@$(MAKE) --no-print-directory -j2 --output-sync=target unit cli-test
	@$(MAKE) --no-print-directory api-hostile

api-hostile: $(BUILD)/petri
	PETRI_BIN=$(abspath $(BUILD)/petri) $(PYTEST) -n $(MERGED_JOBS) $(CI_SAN_HOSTILE) tests/api tests/hostile tests/net

# .ci/run's builds at once, the release build's (with the fuzzers) and the
# sanitizer build's, JOBS jobs between them: either alone leaves a core
# idle for much of its time.  `make test` and `make ci-san` then find them
# made.
ci-build:
	@$(MAKE) --no-print-directory -j$(JOBS) ci-build-release ci-build-san
ci-build-release:
	@$(MAKE) --no-print-directory test-build fuzz-build
ci-build-san:
	@$(MAKE) --no-print-directory SAN=1 test-build

# The whole suite under ASan+UBSan; then the tiers where the daemon's
# threads meet (the API and the faults) under ThreadSanitizer.
test-san:
	$(MAKE) SAN=1 test
	$(MAKE) SAN=thread unit api-test faults

api-test: $(BUILD)/petri
	PETRI_BIN=$(abspath $(BUILD)/petri) $(PYTEST) -n $(PYTEST_JOBS) tests/api

cli-test: $(BUILD)/petri
	PETRI_BIN=$(abspath $(BUILD)/petri) $(PYTEST) -n $(PYTEST_JOBS) tests/cli

# Benchmarks against peers, with a CPU profile of petri (bench/README.md);
# BENCH_QUICK=1 for a short run.
bench: $(BUILD)/petri
	bench/deps
	$(PYTHON) bench/bench.py --profile --petri $(abspath $(BUILD)/petri)
.PHONY: bench

clean:
	rm -rf build build-san build-tsan

# The release tarball: the tracked files as they are in the work tree
# (git stash create: uncommitted changes to tracked files included, untracked
# files not), under petri-$(VERSION)/, plus a VERSION file that
# scripts/version reads where there is no .git.  An unpacked copy builds
# with `make` and reports the same version.
DISTDIR ?= .
DIST    := petri-$(VERSION)
dist:
	@git rev-parse --git-dir >/dev/null 2>&1 || { echo "make dist: needs a git checkout" >&2; exit 1; }
	@set -e; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	tree=$$(git stash create); \
	git archive --format=tar --prefix=$(DIST)/ $${tree:-HEAD} > "$$tmp/dist.tar"; \
	mkdir "$$tmp/$(DIST)"; echo '$(VERSION)' > "$$tmp/$(DIST)/VERSION"; \
	tar --append -f "$$tmp/dist.tar" -C "$$tmp" --owner=0 --group=0 --numeric-owner \
	    --mtime="@$$(git log -1 --format=%ct $${tree:-HEAD})" $(DIST)/VERSION; \
	gzip -n -9 < "$$tmp/dist.tar" > "$$tmp/dist.tar.gz"; \
	mv "$$tmp/dist.tar.gz" "$(DISTDIR)/$(DIST).tar.gz"
	@echo "  DIST    $(DISTDIR)/$(DIST).tar.gz"

include tests/fuzz/fuzz.mk
include packaging/packaging.mk

.PHONY: FORCE dist all unit unit-valgrind blackbox api-test cli-test waiting hostile cpython-test faults mcp-test web-test web-screenshots e2b-test ask-test install-test kubernetes-test test test-build clients ci-san ci-san-tiers ci-build ci-build-release ci-build-san api-hostile test-san clean fuzz fuzz-smoke

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
