package main

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nftep/nftep/proto"
)

// TestGeneratedFilesUpToDate: felix_json.go and felix_equal.go are what
// this generator writes for the felix.proto compiled into felix.pb.go
// (after a change to either, run `go generate ./proto`).
func TestGeneratedFilesUpToDate(t *testing.T) {
	for _, f := range []struct {
		file string
		gen  func() ([]byte, error)
	}{
		{"../../felix_json.go", func() ([]byte, error) { return generate(proto.File_proto_felix_proto) }},
		{"../../felix_equal.go", func() ([]byte, error) { return generateEqual(proto.File_proto_felix_proto) }},
	} {
		want, err := f.gen()
		require.NoError(t, err)
		got, err := os.ReadFile(f.file)
		require.NoError(t, err)
		assert.True(t, string(want) == string(got), "%s is not what genjson writes: run go generate ./proto", f.file)
	}
}
