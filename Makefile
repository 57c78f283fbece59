# xmq — `make help` lists the targets. Each recipe is the plain command, so
# you can also run it by hand.

GO       ?= go
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -X main.version=$(VERSION)
FUZZTIME ?= 10s
ARGS     ?=
ADDR     ?= 127.0.0.1:1883

.DEFAULT_GOAL := help
.PHONY: build run test test-short bench fuzz cover lint fmt vet tidy-check certs-dev loadtest bench-peers bench-bridge soak deps clean help

build: ## build bin/xmq, stamped with VERSION
	$(GO) build -ldflags '$(LDFLAGS)' -o bin/xmq ./cmd/xmq

run: ## run the broker: MQTT over TCP on :1883 (pass flags with ARGS='-listen :1884 -data ""')
	$(GO) run -ldflags '$(LDFLAGS)' ./cmd/xmq $(ARGS)

test: deps ## every test, with the race detector (what CI runs); core's again over loopback TCP
	$(GO) test -race -count=1 ./...
	XMQ_CORE_TCP=1 $(GO) test -race -count=1 ./core

test-short: ## the quick tests: -short, no race detector
	$(GO) test -short -count=1 ./...

bench: ## every benchmark, with allocations
	$(GO) test -run '^$$' -bench . -benchmem ./...

fuzz: ## each fuzz target in ./codec for FUZZTIME (default 10s)
	for f in $$($(GO) test -list '^Fuzz' ./codec | grep '^Fuzz'); do $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) ./codec || exit 1; done

cover: ## test coverage per function, total last (cover.out)
	$(GO) test -count=1 -coverprofile=cover.out ./... && $(GO) tool cover -func=cover.out

lint: vet ## gofmt check and go vet
	@test -z "$$(gofmt -l . | tee /dev/stderr)" || { echo 'lint: files above need gofmt (make fmt)'; exit 1; }

fmt: ## gofmt every file in place
	gofmt -w .

vet: ## go vet
	$(GO) vet ./...

tidy-check: ## fail if go.mod / go.sum are not tidy
	$(GO) mod tidy -diff

certs-dev: ## development CA and server certificate in ./data/certs (made if missing; prints the paths)
	$(GO) run ./cmd/xmq certs -data ./data

loadtest: ## build bin/loadtest and load test the broker at ADDR (127.0.0.1:1883): make loadtest ARGS='-mode pubsub -rate 100'
	$(GO) build -o bin/loadtest ./cmd/loadtest && bin/loadtest -addr $(ADDR) $(ARGS)

bench-peers: ## xmq vs Mosquitto, mochi-mqtt and NATS on one broker core (~10 min): docs/benchmarks.md
	scripts/bench-peers.sh

bench-bridge: ## one bridge's throughput and added latency: xmq→Mosquitto, xmq→xmq, Mosquitto→Mosquitto (~10 min)
	scripts/bench-bridge.sh

soak: ## 10 minutes of fan-out at 1.5M deliveries/s: RSS, goroutines and fds must stay flat, no error logged
	scripts/soak.sh

deps: ## install what tests need (C compiler for -race, mosquitto-clients) when root with apt-get; else no-op
	@.ci/deps

clean: ## remove build and coverage output
	rm -rf bin cover.out

help: ## list the targets
	@awk -F ':.*## ' '/^[a-z-]+:.*## / { printf "  %-11s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)
