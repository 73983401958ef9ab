package testutil

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/nftep/nftep/proto"
)

// FelixMessages returns the messages of the recorded Felix stream name
// (see FelixRecording): length-prefixed ToDataplane frames, as Felix wrote
// them to its driver.
func FelixMessages(t testing.TB, name string) []*proto.ToDataplane {
	t.Helper()
	r := proto.NewReader(bytes.NewReader(ReadFelixRecording(t, name)))
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
