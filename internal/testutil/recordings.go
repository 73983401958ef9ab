package testutil

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/nftep/nftep/proto"
)

// FelixRecording returns the messages of a recorded Felix stream in this
// package's testdata/felix (name is relative to it, such as
// "two-node/scenario1-n1.bin"): length-prefixed ToDataplane frames, as Felix
// wrote them to its driver.
func FelixRecording(t testing.TB, name string) []*proto.ToDataplane {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("testutil: cannot find its own source directory")
	}
	path := filepath.Join(filepath.Dir(file), "testdata", "felix", name)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("recording: %v", err)
	}
	r := proto.NewReader(bytes.NewReader(data))
	var out []*proto.ToDataplane
	for {
		m, err := r.ReadToDataplane()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("recording %s: frame %d: %v", name, len(out)+1, err)
		}
		out = append(out, m)
	}
}

// Payload returns the Felix message a ToDataplane carries, or nil.
func Payload(m *proto.ToDataplane) any {
	v := m.ProtoReflect()
	fd := v.WhichOneof(v.Descriptor().Oneofs().ByName("payload"))
	if fd == nil {
		return nil
	}
	return v.Get(fd).Message().Interface()
}
