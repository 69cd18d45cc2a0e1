# The two commands of the README:
#   go run ./examples/hostpath   runs the reference driver on its defaults
#   make test                    sets the machine up and runs every test
GO ?= go
GOTESTFLAGS ?=

.PHONY: test run setup

setup:
	./scripts/setup.sh

test: setup
	$(GO) test $(GOTESTFLAGS) ./...

run:
	$(GO) run ./examples/hostpath
