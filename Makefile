# PGXS build of whizbang.so: `make`, `make install`, `make installcheck`.
EXTENSION = whizbang
EXTVERSION = $(shell sed -n "s/^default_version = '\(.*\)'/\1/p" whizbang.control)

MODULE_big = whizbang
CXX_SRCS = $(sort $(wildcard src/pg/*.cpp) $(wildcard src/pg/*/*.cpp) $(wildcard src/core/*.cpp))
OBJS = $(CXX_SRCS:.cpp=.o)

DATA = $(wildcard sql/whizbang--*.sql)
# No DOCS: PGXS would install README.md under that name into the documentation folder every
# extension shares ($(docdir)/extension/). The docs go into a folder of their own (below).

# Regression tests are every sql/*.sql that is not an extension script (pgvector's habit:
# the list is derived from the files, not kept by hand).
REGRESS = $(sort $(patsubst sql/%.sql,%,$(filter-out sql/whizbang--%,$(wildcard sql/*.sql))))
REGRESS_OPTS = --load-extension=whizbang

PG_CONFIG ?= pg_config
PG_CXXFLAGS = -std=c++17 -fPIC -Wall -Wextra -Werror -Wshadow=compatible-local -Wno-unused-parameter -Wno-missing-field-initializers \
	-Wno-register -Wno-cast-function-type -Isrc \
	-DWHIZBANG_VERSION=\"$(EXTVERSION)\" -MMD -MP
SHLIB_LINK = -lstdc++

# PGXS would compile every .cpp to LLVM bitcode with clang for JIT inlining; whizbang's
# functions gain nothing from JIT and the clang toolchain is not otherwise needed.
override with_llvm = no

PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# Supported majors: 15, 16, 17 and 18 (version differences live in src/pg/boundary/pg_compat.h).
# Another major fails to compile, or worse, builds and misbehaves. Say so at once.
WB_SUPPORTED_MAJORS = 15 16 17 18
ifeq ($(filter $(WB_SUPPORTED_MAJORS),$(MAJORVERSION)),)
$(error whizbang supports PostgreSQL 15, 16, 17 and 18; found $(MAJORVERSION) through $(PG_CONFIG) (set PG_CONFIG to the pg_config of a supported major))
endif

# Objects compiled against one major must never be linked into another's library (the structs
# and signatures differ: pg_compat.h). PGXS does not know which server an object was built for,
# so a stamp per major does: `make` or `make install` for another major than the last build
# removes the objects first (while reading this file, before make compares any times), so that
# everything is compiled again. Other goals (installcheck, clean, dist) and `make -n` leave them.
ifeq ($(filter-out all install,$(or $(MAKECMDGOALS),all)),)
ifeq ($(findstring n,$(firstword -$(MAKEFLAGS))),)
ifeq ($(wildcard src/.built-for-pg$(MAJORVERSION)),)
$(shell rm -f src/.built-for-pg* $(OBJS) $(OBJS:.o=.d) $(shlib) && touch src/.built-for-pg$(MAJORVERSION))
endif
endif
endif
EXTRA_CLEAN += src/.built-for-pg*

# Header dependencies written by -MMD, so a changed header rebuilds what includes it.
-include $(OBJS:.o=.d)
EXTRA_CLEAN += $(OBJS:.o=.d)

# version() reports the control file's version, compiled in.
src/pg/module.o: whizbang.control

# Documentation in a folder of its own, $(docdir)/extension/whizbang/: README.md and
# docs/*.md, laid out as in the source tree so that the README's links still work.
WB_DOCDIR = $(DESTDIR)$(docdir)/$(docmoduledir)/whizbang
install: install-docs
uninstall: uninstall-docs
.PHONY: install-docs uninstall-docs dist
install-docs:
ifdef docdir
	$(MKDIR_P) '$(WB_DOCDIR)/docs'
	$(INSTALL_DATA) $(srcdir)/README.md '$(WB_DOCDIR)/'
	$(INSTALL_DATA) $(addprefix $(srcdir)/, $(wildcard docs/*.md)) '$(WB_DOCDIR)/docs/'
endif
uninstall-docs:
ifdef docdir
	rm -rf '$(WB_DOCDIR)'
endif

# whizbang-relay (docs/relay.md, DESIGN §3.10): a program, not part of the library. Built with
# libpq into build/relay/, objects of its own (also for the src/core files it uses), so the
# per-major stamp above, which removes the library's objects, never touches it. `make` builds
# it beside the library; `make install` puts it into PostgreSQL's bindir.
# The sinks that need a client library (sink_http.cpp, sink_amqp.cpp) are built only where
# src/relay/sinks.mk finds it; it sets WB_RELAY_SINK_SRCS, _CPPFLAGS and _LIBS (empty without it).
RELAY = build/relay/whizbang-relay
-include src/relay/sinks.mk
RELAY_CORE = backoff canonical_json confirm_tracker outbox_fields relay_options replication_decode sha uuid
RELAY_SRCS = $(sort $(filter-out src/relay/sink_http.cpp src/relay/sink_amqp.cpp,$(wildcard src/relay/*.cpp)) \
	$(RELAY_CORE:%=src/core/%.cpp) $(WB_RELAY_SINK_SRCS))
RELAY_OBJS = $(patsubst src/%.cpp,build/relay/%.o,$(RELAY_SRCS))
RELAY_DEFS = $(WB_RELAY_SINK_CPPFLAGS)
RELAY_LIBS = $(WB_RELAY_SINK_LIBS)
RELAY_CXXFLAGS = -std=c++17 -pthread -O2 -g -Wall -Wextra -Werror -Wshadow=compatible-local -Isrc \
	-I$(shell $(PG_CONFIG) --includedir) -DWHIZBANG_VERSION=\"$(EXTVERSION)\" $(RELAY_DEFS) -MMD -MP
all: $(RELAY)
$(RELAY): $(RELAY_OBJS)
	$(CXX) -pthread -o $@ $(RELAY_OBJS) -L$(shell $(PG_CONFIG) --libdir) -lpq $(RELAY_LIBS)
build/relay/%.o: src/%.cpp
	@mkdir -p $(dir $@)
	$(CXX) $(RELAY_CXXFLAGS) -c -o $@ $<
build/relay/relay/main.o: whizbang.control
-include $(RELAY_OBJS:.o=.d)
install: install-relay
uninstall: uninstall-relay
.PHONY: install-relay uninstall-relay
install-relay: $(RELAY)
	$(MKDIR_P) '$(DESTDIR)$(bindir)'
	$(INSTALL_PROGRAM) $(RELAY) '$(DESTDIR)$(bindir)/whizbang-relay'
uninstall-relay:
	rm -f '$(DESTDIR)$(bindir)/whizbang-relay'
EXTRA_CLEAN += build/relay

# PGXN distribution: whizbang-<version>.zip of the committed tree (HEAD) under a
# whizbang-<version>/ folder. git archive takes only tracked files, so no build output;
# .gitattributes marks what else stays out (export-ignore: benchmark results, CI files).
# The archive is HEAD, so its version is HEAD's default_version too, not the working tree's.
DIST_VERSION = $(shell git show HEAD:whizbang.control | sed -n "s/^default_version = '\(.*\)'/\1/p")
dist:
	git archive --format zip --prefix whizbang-$(DIST_VERSION)/ --output whizbang-$(DIST_VERSION).zip HEAD
