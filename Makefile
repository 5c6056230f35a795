# Thin wrappers around scripts/; see each script's header for what it does.
#   make build | install | test | bench | base | busybox | clean
#   make test ARGS='-run TestExec ./exec/...'
#   make install ARGS=--force

SHELL := /usr/bin/env bash
ARGS ?=

.PHONY: build install test bench base busybox clean

build:
	scripts/build.sh

install:
	scripts/install.sh $(ARGS)

test:
	scripts/test.sh $(ARGS)

bench:
	scripts/bench.sh $(ARGS)

base:
	scripts/offline-base.sh $(ARGS)

busybox:
	scripts/busybox-image.sh $(ARGS)

clean:
	rm -rf bin images/bin/sandbox-helper-* images/bin/helper.id
