#!/usr/bin/env bash
# gen.sh regenerates felix.pb.go from felix.proto.
#
# Needs: protoc (Debian/Ubuntu: apt-get install protobuf-compiler) and Go. The
# protoc-gen-go plugin is pinned to the google.golang.org/protobuf version in
# go.mod and installed into a cache directory on first use, so the generated
# code always matches the runtime we link.
#
# Run it as `go generate ./proto` (or `make proto`) from the repository root.
set -o errexit -o nounset -o pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "${here}/.." && pwd)"
cd "${root}"

if ! command -v protoc >/dev/null 2>&1; then
	echo "gen.sh: protoc not found; install it (apt-get install protobuf-compiler)" >&2
	exit 1
fi

version="$(go list -m -f '{{.Version}}' google.golang.org/protobuf)"
if [[ -z "${version}" ]]; then
	echo "gen.sh: google.golang.org/protobuf is not required in go.mod" >&2
	exit 1
fi

gobin="${NFTEP_PROTOBIN:-${TMPDIR:-/tmp}/nftep-protoc-gen-go-${version}}"
plugin="${gobin}/protoc-gen-go"
if [[ ! -x "${plugin}" ]] || [[ "$("${plugin}" --version)" != "protoc-gen-go ${version}" ]]; then
	echo "gen.sh: installing protoc-gen-go ${version} into ${gobin}" >&2
	GOBIN="${gobin}" go install "google.golang.org/protobuf/cmd/protoc-gen-go@${version}"
fi

# -I . makes the registered file path "proto/felix.proto", unique to this module.
protoc \
	--plugin=protoc-gen-go="${plugin}" \
	-I . \
	--go_out=. \
	--go_opt=paths=source_relative \
	proto/felix.proto
