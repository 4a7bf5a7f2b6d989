# PGXS build of whizbang.so: `make`, `make install`, `make installcheck`.
EXTENSION = whizbang
EXTVERSION = $(shell sed -n "s/^default_version = '\(.*\)'/\1/p" whizbang.control)

MODULE_big = whizbang
CXX_SRCS = $(sort $(wildcard src/pg/*.cpp) $(wildcard src/core/*.cpp))
OBJS = $(CXX_SRCS:.cpp=.o)

DATA = $(wildcard sql/whizbang--*.sql)
DOCS = README.md

# Regression tests are every sql/*.sql that is not an extension script (pgvector's habit:
# the list is derived from the files, not kept by hand).
REGRESS = $(sort $(patsubst sql/%.sql,%,$(filter-out sql/whizbang--%,$(wildcard sql/*.sql))))
REGRESS_OPTS = --load-extension=whizbang

PG_CONFIG ?= pg_config
PG_CXXFLAGS = -std=c++17 -fPIC -Wall -Wextra -Werror -Wno-unused-parameter -Wno-missing-field-initializers \
	-Wno-register -Wno-cast-function-type -Isrc \
	-DWHIZBANG_VERSION=\"$(EXTVERSION)\" -MMD -MP
SHLIB_LINK = -lstdc++

# PGXS would compile every .cpp to LLVM bitcode with clang for JIT inlining; whizbang's
# functions gain nothing from JIT and the clang toolchain is not otherwise needed.
override with_llvm = no

PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# Header dependencies written by -MMD, so a changed header rebuilds what includes it.
-include $(OBJS:.o=.d)
EXTRA_CLEAN = $(OBJS:.o=.d)

# version() reports the control file's version, compiled in.
src/pg/module.o: whizbang.control
