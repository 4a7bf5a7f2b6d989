# The relay's HTTP and AMQP sinks, for inclusion by the Makefile that builds whizbang-relay
# (`include src/relay/sinks.mk`, paths relative to the repository root). Each sink is built only
# when pkg-config finds its library, so the relay still builds without them (with fewer sinks):
#   WB_RELAY_SINK_SRCS      the sinks' sources and the src/core files they use (combine with
#                           the relay's own list through $(sort …): duplicates drop out)
#   WB_RELAY_SINK_CPPFLAGS  -DWHIZBANG_RELAY_HTTP / -DWHIZBANG_RELAY_AMQP and the libraries' flags
#   WB_RELAY_SINK_LIBS      -lcurl / -lrabbitmq
#   WB_RELAY_SINKS          the names of the sinks built ("http amqp"), for a message
# and the test driver build/relay/sink_check (test/relay/sink_check.cpp). On its own:
#   make -f src/relay/sinks.mk build/relay/sink_check
PKG_CONFIG ?= pkg-config

WB_RELAY_SINKS :=
WB_RELAY_SINK_SRCS := src/core/delivery_verdict.cpp src/core/uri_parts.cpp
WB_RELAY_SINK_CPPFLAGS :=
WB_RELAY_SINK_LIBS :=

ifeq ($(shell $(PKG_CONFIG) --exists libcurl && echo yes),yes)
WB_RELAY_SINKS += http
WB_RELAY_SINK_SRCS += src/relay/sink_http.cpp src/core/backoff.cpp src/core/excerpt.cpp
WB_RELAY_SINK_CPPFLAGS += -DWHIZBANG_RELAY_HTTP $(shell $(PKG_CONFIG) --cflags libcurl)
WB_RELAY_SINK_LIBS += $(shell $(PKG_CONFIG) --libs libcurl)
endif

ifeq ($(shell $(PKG_CONFIG) --exists librabbitmq && echo yes),yes)
WB_RELAY_SINKS += amqp
WB_RELAY_SINK_SRCS += src/relay/sink_amqp.cpp src/core/confirm_window.cpp
WB_RELAY_SINK_CPPFLAGS += -DWHIZBANG_RELAY_AMQP $(shell $(PKG_CONFIG) --cflags librabbitmq)
WB_RELAY_SINK_LIBS += $(shell $(PKG_CONFIG) --libs librabbitmq)
endif

WB_RELAY_SINK_SRCS := $(sort $(WB_RELAY_SINK_SRCS))
WB_RELAY_SINKS := $(strip $(WB_RELAY_SINKS))
$(info whizbang-relay sinks with a library: $(or $(WB_RELAY_SINKS),none (install libcurl4-openssl-dev, librabbitmq-dev)))

# The test driver, compiled in one step (a handful of files): it is rebuilt whenever any of
# them changed, and leaves no objects beside the extension's.
WB_SINK_CHECK_CXXFLAGS ?= -std=c++17 -O1 -g -Wall -Wextra -Werror -Wshadow=compatible-local -Isrc
build/relay/sink_check: test/relay/sink_check.cpp $(WB_RELAY_SINK_SRCS) $(wildcard src/relay/*.h src/core/*.h) src/relay/sinks.mk
	@mkdir -p $(@D)
	$(CXX) $(WB_SINK_CHECK_CXXFLAGS) $(WB_RELAY_SINK_CPPFLAGS) -o $@ test/relay/sink_check.cpp $(WB_RELAY_SINK_SRCS) $(WB_RELAY_SINK_LIBS)
