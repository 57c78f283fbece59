# xmq — `make help` lists the targets. Each recipe is the plain command, so
# you can also run it by hand.

GO       ?= go
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
COMMIT   ?= $(shell git rev-parse HEAD 2>/dev/null)
# The commit's time stands for the build date, so builds are reproducible.
DATE     ?= $(shell TZ=UTC git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ 2>/dev/null)
LDFLAGS  := -X main.version=$(VERSION) -X main.commit=$(COMMIT) -X main.date=$(DATE)
# The platforms xmq is built and vetted for (make release, make vet-cross).
PLATFORMS ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64 freebsd/amd64 freebsd/arm64
export VERSION COMMIT DATE PLATFORMS
FUZZTIME ?= 10s
ARGS     ?=
ADDR     ?= 127.0.0.1:1883

.DEFAULT_GOAL := help
.PHONY: build run test test-short bench fuzz cover lint fmt vet vet-cross tidy-check certs-dev loadtest bench-peers bench-lowrate bench-cluster bench-bridge cluster soak deps \
	licenses man release release-check image image-test deb deb-test deb-systemd-test clean help

build: ## build bin/xmq, stamped with VERSION
	$(GO) build -ldflags '$(LDFLAGS)' -o bin/xmq ./cmd/xmq

run: ## run the broker: MQTT on :1883 (TCP), :8883 (TLS), :8083 (WebSocket), :8084 (WSS), :14567/udp (QUIC), dashboard :18083 (flags: ARGS='-data ""')
	$(GO) run -ldflags '$(LDFLAGS)' ./cmd/xmq $(ARGS)

test: deps vet-cross ## every test, with the race detector (what CI runs); core's again over loopback TCP
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

vet-cross: ## go vet for every platform in PLATFORMS (static, -trimpath: make release reuses what it compiles)
	for p in $(PLATFORMS); do echo "vet $$p"; CGO_ENABLED=0 GOOS=$${p%/*} GOARCH=$${p#*/} $(GO) vet -trimpath ./... || exit 1; done

tidy-check: ## fail if go.mod / go.sum are not tidy
	$(GO) mod tidy -diff

certs-dev: ## development CA and server certificate in ./data/certs (made if missing; prints the paths)
	$(GO) run ./cmd/xmq certs -data ./data

loadtest: ## build bin/loadtest and load test the broker at ADDR (127.0.0.1:1883): make loadtest ARGS='-mode pubsub -rate 100'
	$(GO) build -o bin/loadtest ./cmd/loadtest && bin/loadtest -addr $(ADDR) $(ARGS)

bench-peers: ## xmq vs Mosquitto, mochi-mqtt and NATS on one broker core (~10 min): docs/benchmarks.md
	scripts/bench-peers.sh

bench-lowrate: ## xmq vs Mosquitto in the many-connections, low-rate shapes (idle RSS, 1 msg/s, 19,000 connections; ~25 min)
	scripts/bench-lowrate.sh

bench-cluster: ## one 3-node cluster measurement on pinned cores: ARGS=pubsub or ARGS=storm, SECURE=secret|tls|none (docs/cluster.md)
	SECURE=$(or $(SECURE),secret) scripts/bench-cluster.sh $(ARGS)

bench-bridge: ## one bridge's throughput and added latency: xmq→Mosquitto, xmq→xmq, Mosquitto→Mosquitto (~10 min)
	scripts/bench-bridge.sh

cluster: ## a 3-node cluster on loopback (MQTT 127.0.0.1:31883-31885, NATS embedded), every URL printed; Ctrl-C stops it
	scripts/cluster.sh

soak: ## 10 minutes of fan-out at 1.5M deliveries/s: RSS, goroutines and fds must stay flat, no error logged
	scripts/soak.sh

deps: ## install what tests need (C compiler for -race, mosquitto-clients) when root with apt-get; else no-op
	@.ci/deps

licenses: ## list the licences of every linked dependency, fail on one Apache-2.0 cannot ship, write the notices
	scripts/licenses.sh

man: ## man pages (from -h and xmq.example.yaml) and shell completions in dist/share
	scripts/man.sh

release: licenses man ## archives of xmq and loadtest for PLATFORMS, static and reproducible, and SHA256SUMS, in dist/
	scripts/release.sh

release-check: release ## build the release again in another directory (every binary relinked) and compare the bytes; and a release of one platform
	rm -rf dist/.again && mkdir -p dist/.again && cp -r dist/share dist/.again/
	DIST=dist/.again scripts/release.sh >/dev/null
	diff dist/SHA256SUMS dist/.again/SHA256SUMS && echo "release-check: same bytes" && rm -rf dist/.again
	# One platform without Windows makes no .zip: the release must not need one.
	rm -rf dist/.one && mkdir -p dist/.one && cp -r dist/share dist/.one/
	PLATFORMS=linux/$$(go env GOARCH) DIST=dist/.one scripts/release.sh >/dev/null && echo "release-check: one platform" && rm -rf dist/.one

image: licenses ## container image xmq:VERSION FROM scratch with buildah (Containerfile)
	scripts/image.sh

image-test: image ## run the image with podman: health check, MQTT, XMQ_ configuration, non-root, /data
	scripts/image-test.sh

deb: licenses man ## Debian package dist/xmq_VERSION_ARCH.deb with the systemd unit (dpkg-deb)
	scripts/deb.sh

deb-test: deb ## install the package on this machine (root), run the installed broker, verify the unit, purge it
	scripts/deb-test.sh

deb-systemd-test: deb ## the package under a real systemd: boots this machine's Debian in systemd-nspawn (root)
	scripts/deb-systemd-test.sh

clean: ## remove build, release and coverage output
	rm -rf bin dist cover.out

help: ## list the targets
	@awk -F ':.*## ' '/^[a-z-]+:.*## / { printf "  %-16s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)
