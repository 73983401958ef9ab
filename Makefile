# nftep — see README.md. Kernel tests and the demo need root.
GO ?= go
PKGS := ./...

.PHONY: all build test test-unit bench lint proto fuzz

all: build

build:
	$(GO) build $(PKGS)

## build-static: the static binaries nftep and nftep-felix-driver into
## STATIC_DIR (CI and deploy/Containerfile both run this).
STATIC_DIR ?= bin
.PHONY: build-static
build-static:
	CGO_ENABLED=0 $(GO) build -trimpath -o $(STATIC_DIR)/ ./cmd/nftep ./cmd/nftep-felix-driver

## test: every test, kernel tests included (root), with -race.
test:
	./hack/test.sh

## docs-check: run every command the documentation shows and compare the real
## output with the documented one (root; also part of make test). See docs/doc.go.
.PHONY: docs-check
docs-check:
	$(GO) test -count=1 -run '^TestDocs' -v ./docs/

## vmtest: the IPIP kernel test (TestKernelTwoNodesIPIP) in a qemu VM on Debian's
## stock kernel, which has IPIP (root; Debian packages qemu-system-x86,
## busybox-static, cpio, kmod). make test runs it when the host kernel lacks IPIP.
## VMTEST_RUN=<pattern> runs other dataplane tests there. See hack/vmtest.sh.
.PHONY: vmtest
vmtest:
	./hack/vmtest.sh

## test-unit: the tests that need no root (kernel tests skip in -short mode).
test-unit:
	$(GO) test -race -count=1 -short $(PKGS)

## bench: nftep vs nft -f (root): medians of COUNT runs and ratios, see hack/bench.sh.
bench:
	./hack/bench.sh

## lint: gofmt and go vet must be silent, and go mod tidy must change nothing
## (go.mod and go.sum are restored after the check).
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	@tmp=$$(mktemp -d); cp go.mod go.sum "$$tmp"/; \
	$(GO) mod tidy || { cp "$$tmp"/go.mod "$$tmp"/go.sum .; rm -rf "$$tmp"; exit 1; }; \
	d=$$(diff -u "$$tmp"/go.mod go.mod; diff -u "$$tmp"/go.sum go.sum); \
	cp "$$tmp"/go.mod "$$tmp"/go.sum .; rm -rf "$$tmp"; \
	if [ -n "$$d" ]; then echo "go mod tidy changes go.mod/go.sum:"; echo "$$d"; exit 1; fi

## proto: regenerate proto/felix.pb.go (needs protoc; installs the pinned protoc-gen-go),
## then proto/felix_json.go and proto/felix_equal.go (proto/internal/genjson).
proto:
	$(GO) generate ./proto

## fuzz: run every fuzz target, one at a time, for FUZZTIME each (default
## 60s); prints executions per target. See hack/fuzz.sh.
FUZZTIME ?= 60s
fuzz:
	FUZZTIME=$(FUZZTIME) ./hack/fuzz.sh

## demo: nftep demo (root): a node and four pods in throwaway network namespaces,
## real allowed and denied connections, the ruleset, statuses; then two nodes over
## VXLAN with a pod reaching the other node's and one denied; removes everything.
.PHONY: demo
demo:
	$(GO) run ./cmd/nftep demo
