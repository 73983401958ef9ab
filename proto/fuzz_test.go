package proto_test

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"

	"google.golang.org/protobuf/proto"

	"github.com/nftep/nftep/internal/testutil"
	felix "github.com/nftep/nftep/proto"
)

// fuzzMaxFrame is the Reader cap under fuzzing.
const fuzzMaxFrame = 1 << 20

// FuzzReader feeds arbitrary bytes to a Reader. It must never panic, never
// return a frame larger than its cap, stop with io.EOF only at a frame
// boundary, and every frame it returns must re-encode to the bytes it was read
// from. Frames that decode as ToDataplane must survive a re-encode too.
func FuzzReader(f *testing.F) {
	f.Add(testutil.ReadFelixRecording(f, "real-felix-session.bin"))
	f.Add(wepFrame)
	f.Add([]byte{})
	f.Add(header(0))
	f.Add(frame([]byte{0x0a, 0x00}))                        // InSync
	f.Add(frame([]byte{0x78, 0x28, 0xba, 0x01, 0x00}))      // reserved payload 23
	f.Add(frame([]byte{0x0a, 0x05, 0x00}))                  // body that does not decode
	f.Add(header(fuzzMaxFrame + 1))                         // over the cap
	f.Add(append(header(fuzzMaxFrame), make([]byte, 9)...)) // at the cap, truncated
	f.Add(wepFrame[:len(wepFrame)-1])                       // truncated body
	f.Add(wepFrame[:5])                                     // truncated header

	f.Fuzz(func(t *testing.T, data []byte) {
		frames, consumed, err := readFuzz(bytes.NewReader(data))
		switch {
		case err == io.EOF:
			if consumed != len(data) {
				t.Fatalf("io.EOF after %d of %d bytes", consumed, len(data))
			}
		case errors.Is(err, io.ErrUnexpectedEOF):
		default:
			var tl *felix.FrameTooLargeError
			if !errors.As(err, &tl) || tl.Length <= fuzzMaxFrame || tl.Max != fuzzMaxFrame {
				t.Fatalf("unexpected error: %v", err)
			}
		}

		var again bytes.Buffer
		w := felix.NewWriter(&again)
		for i, b := range frames {
			if len(b) > fuzzMaxFrame || cap(b) > fuzzMaxFrame {
				t.Fatalf("frame %d: len %d cap %d over the cap %d", i, len(b), cap(b), fuzzMaxFrame)
			}
			if err := w.WriteFrame(b); err != nil {
				t.Fatal(err)
			}
			checkMessageRoundTrip(t, i, b)
		}
		if !bytes.Equal(again.Bytes(), data[:consumed]) {
			t.Fatalf("re-encoded frames differ from the input they came from")
		}

		// A reader that returns one byte at a time sees the same frames and error.
		frames1, consumed1, err1 := readFuzz(iotest.OneByteReader(bytes.NewReader(data)))
		if consumed1 != consumed || len(frames1) != len(frames) || errString(err1) != errString(err) {
			t.Fatalf("one-byte reader: %d frames, %d bytes, error %v; plain reader: %d frames, %d bytes, error %v",
				len(frames1), consumed1, err1, len(frames), consumed, err)
		}
	})
}

// readFuzz reads frames until an error, returning them, the bytes they span
// and the error.
func readFuzz(src io.Reader) ([][]byte, int, error) {
	r := felix.NewReader(src, felix.WithMaxFrameSize(fuzzMaxFrame))
	var frames [][]byte
	consumed := 0
	for {
		b, err := r.ReadFrame()
		if err != nil {
			return frames, consumed, err
		}
		frames = append(frames, b)
		consumed += felix.HeaderSize + len(b)
	}
}

// checkMessageRoundTrip decodes b as a ToDataplane and, if that works, checks
// that encoding and decoding again gives an equal message.
func checkMessageRoundTrip(t *testing.T, i int, b []byte) {
	m := new(felix.ToDataplane)
	if proto.Unmarshal(b, m) != nil {
		return
	}
	enc, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		t.Fatalf("frame %d: re-encode of a decoded message: %v", i, err)
	}
	m2 := new(felix.ToDataplane)
	if err := proto.Unmarshal(enc, m2); err != nil {
		t.Fatalf("frame %d: decode of our own encoding: %v", i, err)
	}
	if !proto.Equal(m, m2) {
		t.Fatalf("frame %d: message changed through encode/decode", i)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
