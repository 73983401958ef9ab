package proto_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/protobuf/testing/protocmp"

	felix "github.com/nftep/nftep/proto"
)

// frame returns the encoding of one frame by hand: the length as 8 bytes
// little-endian, then the body. Tests compare the Writer against it.
func frame(body []byte) []byte {
	return append(header(uint64(len(body))), body...)
}

// header returns a frame header announcing n bytes.
func header(n uint64) []byte {
	return binary.LittleEndian.AppendUint64(nil, n)
}

// readerWrappers are the ways a test feeds a stream to a Reader: whole, one
// byte per Read, half of each request per Read, and with the final data
// delivered together with io.EOF.
var readerWrappers = []struct {
	name string
	wrap func(io.Reader) io.Reader
}{
	{"plain", func(r io.Reader) io.Reader { return r }},
	{"one-byte", iotest.OneByteReader},
	{"half", iotest.HalfReader},
	{"data-err", iotest.DataErrReader},
}

// readAll reads frames until an error and returns the bodies and that error.
func readAll(r *felix.Reader) ([][]byte, error) {
	var bodies [][]byte
	for {
		b, err := r.ReadFrame()
		if err != nil {
			return bodies, err
		}
		bodies = append(bodies, b)
	}
}

func TestFrameRoundTrip(t *testing.T) {
	t.Parallel()
	big := bytes.Repeat([]byte{0xa5, 0x5a, 0x00}, 25_000) // 75 KB: over the Reader's first buffer
	tests := []struct {
		name   string
		bodies [][]byte
		// wire is the expected stream, when short enough to write out.
		wire []byte
	}{
		{
			name:   "no frames",
			bodies: nil,
			wire:   []byte{},
		},
		{
			name:   "empty frame",
			bodies: [][]byte{{}},
			wire:   []byte{0, 0, 0, 0, 0, 0, 0, 0},
		},
		{
			name:   "one byte",
			bodies: [][]byte{{0x42}},
			wire:   []byte{1, 0, 0, 0, 0, 0, 0, 0, 0x42},
		},
		{
			// A 42-byte envelope is preceded by 2a 00 ... 00.
			name:   "42 bytes",
			bodies: [][]byte{bytes.Repeat([]byte{'x'}, 42)},
			wire:   append([]byte{0x2a, 0, 0, 0, 0, 0, 0, 0}, bytes.Repeat([]byte{'x'}, 42)...),
		},
		{
			name:   "length above 255 uses the second byte",
			bodies: [][]byte{bytes.Repeat([]byte{1}, 0x1234)},
			wire:   append([]byte{0x34, 0x12, 0, 0, 0, 0, 0, 0}, bytes.Repeat([]byte{1}, 0x1234)...),
		},
		{
			name:   "several frames, empty ones between",
			bodies: [][]byte{{1, 2, 3}, {}, {4}, {}, {}},
			wire: []byte{
				3, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3,
				0, 0, 0, 0, 0, 0, 0, 0,
				1, 0, 0, 0, 0, 0, 0, 0, 4,
				0, 0, 0, 0, 0, 0, 0, 0,
				0, 0, 0, 0, 0, 0, 0, 0,
			},
		},
		{
			name:   "large frame",
			bodies: [][]byte{big, {7}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var buf bytes.Buffer
			w := felix.NewWriter(&buf)
			for _, b := range tt.bodies {
				if err := w.WriteFrame(b); err != nil {
					t.Fatalf("WriteFrame: %v", err)
				}
			}
			if tt.wire != nil {
				if diff := cmp.Diff(tt.wire, buf.Bytes(), cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("wire bytes (-want +got):\n%s", diff)
				}
			}
			for _, rw := range readerWrappers {
				got, err := readAll(felix.NewReader(rw.wrap(bytes.NewReader(buf.Bytes()))))
				if err != io.EOF {
					t.Errorf("%s: final error = %v, want exactly io.EOF", rw.name, err)
				}
				want := tt.bodies
				if len(want) == 0 {
					want = nil
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("%s: bodies (-want +got):\n%s", rw.name, diff)
				}
				for i, b := range got {
					if b == nil {
						t.Errorf("%s: frame %d is nil, want a non-nil (possibly empty) slice", rw.name, i)
					}
				}
			}
		})
	}
}

func TestMessageRoundTrip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		msg  *felix.ToDataplane
	}{
		{"in sync", &felix.ToDataplane{SequenceNumber: 9, Payload: &felix.ToDataplane_InSync{InSync: &felix.InSync{}}}},
		{"empty envelope", &felix.ToDataplane{}},
		{"ip set", &felix.ToDataplane{SequenceNumber: 1, Payload: &felix.ToDataplane_IpsetUpdate{IpsetUpdate: &felix.IPSetUpdate{
			Id: "s:abc", Members: []string{"10.0.0.0/8", "fd00::/64"}, Type: felix.IPSetUpdate_NET,
		}}}},
		{"policy with every rule oneof", &felix.ToDataplane{SequenceNumber: 1 << 40, Payload: &felix.ToDataplane_ActivePolicyUpdate{ActivePolicyUpdate: &felix.ActivePolicyUpdate{
			Id: &felix.PolicyID{Name: "pol", Namespace: "ns", Kind: "NetworkPolicy"},
			Policy: &felix.Policy{
				InboundRules: []*felix.Rule{{
					Action:      "allow",
					IpVersion:   felix.IPVersion_IPV6,
					Protocol:    &felix.Protocol{NumberOrName: &felix.Protocol_Name{Name: "icmpv6"}},
					NotProtocol: &felix.Protocol{NumberOrName: &felix.Protocol_Number{Number: 17}},
					Icmp:        &felix.Rule_IcmpTypeCode{IcmpTypeCode: &felix.IcmpTypeAndCode{Type: 128, Code: 0}},
					NotIcmp:     &felix.Rule_NotIcmpType{NotIcmpType: 3},
					DstPorts:    []*felix.PortRange{{First: 80, Last: 80}, {First: 8000, Last: 9000}},
					HttpMatch: &felix.HTTPMatch{Methods: []string{"GET"}, Paths: []*felix.HTTPMatch_PathMatch{
						{PathMatch: &felix.HTTPMatch_PathMatch_Prefix{Prefix: "/api"}},
					}},
					Metadata: &felix.RuleMetadata{Annotations: map[string]string{"b": "2", "a": "1"}},
					RuleId:   "0123456789abcdef",
				}},
				Tier: "default",
			},
		}}}},
		{"config", &felix.ToDataplane{Payload: &felix.ToDataplane_ConfigUpdate{ConfigUpdate: &felix.ConfigUpdate{
			Config:            map[string]string{"FelixHostname": "node1", "InterfacePrefix": "cali"},
			SourceToRawConfig: map[uint32]*felix.RawConfig{5: {Source: "environment variable", Config: map[string]string{"felixhostname": "node1"}}},
		}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var buf bytes.Buffer
			if err := felix.NewWriter(&buf).WriteMessage(tt.msg); err != nil {
				t.Fatalf("WriteMessage: %v", err)
			}
			for _, rw := range readerWrappers {
				r := felix.NewReader(rw.wrap(bytes.NewReader(buf.Bytes())))
				got, err := r.ReadToDataplane()
				if err != nil {
					t.Fatalf("%s: ReadToDataplane: %v", rw.name, err)
				}
				if diff := cmp.Diff(tt.msg, got, protocmp.Transform()); diff != "" {
					t.Errorf("%s: message (-want +got):\n%s", rw.name, diff)
				}
				if _, err := r.ReadToDataplane(); err != io.EOF {
					t.Errorf("%s: after the last frame: error = %v, want io.EOF", rw.name, err)
				}
			}
		})
	}
}

func TestFromDataplaneRoundTrip(t *testing.T) {
	t.Parallel()
	msgs := []*felix.FromDataplane{
		{SequenceNumber: 1, Payload: &felix.FromDataplane_ProcessStatusUpdate{ProcessStatusUpdate: &felix.ProcessStatusUpdate{IsoTimestamp: "2026-08-01T00:00:00Z", Uptime: 10.5}}},
		{SequenceNumber: 2, Payload: &felix.FromDataplane_WorkloadEndpointStatusUpdate{WorkloadEndpointStatusUpdate: &felix.WorkloadEndpointStatusUpdate{
			Id:       &felix.WorkloadEndpointID{OrchestratorId: "k8s", WorkloadId: "default/p1", EndpointId: "eth0"},
			Status:   &felix.EndpointStatus{Status: "up"},
			Endpoint: &felix.WorkloadEndpoint{State: "active", Name: "cali1"},
		}}},
		{SequenceNumber: 3, Payload: &felix.FromDataplane_HostEndpointStatusRemove{HostEndpointStatusRemove: &felix.HostEndpointStatusRemove{Id: &felix.HostEndpointID{EndpointId: "hep"}}}},
		{SequenceNumber: 4, Payload: &felix.FromDataplane_DataplaneInSync{DataplaneInSync: &felix.DataplaneInSync{}}},
	}
	var buf bytes.Buffer
	w := felix.NewWriter(&buf)
	for _, m := range msgs {
		if err := w.WriteMessage(m); err != nil {
			t.Fatalf("WriteMessage: %v", err)
		}
	}
	r := felix.NewReader(iotest.HalfReader(&buf))
	for i, want := range msgs {
		got, err := r.ReadFromDataplane()
		if err != nil {
			t.Fatalf("frame %d: ReadFromDataplane: %v", i, err)
		}
		if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
			t.Errorf("frame %d (-want +got):\n%s", i, diff)
		}
	}
	if _, err := r.ReadFromDataplane(); err != io.EOF {
		t.Errorf("after the last frame: error = %v, want io.EOF", err)
	}
}

func TestReaderErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		input []byte
		opts  []felix.ReaderOption
		// frames is how many frames read cleanly before the error.
		frames int
		// unexpectedEOF says the error must wrap io.ErrUnexpectedEOF.
		unexpectedEOF bool
		// tooLarge is the *FrameTooLargeError expected, if any.
		tooLarge *felix.FrameTooLargeError
		// msg are substrings of the error text.
		msg []string
	}{
		{
			name:          "header cut after one byte",
			input:         []byte{5},
			unexpectedEOF: true,
			msg:           []string{"frame header", "1 of 8 bytes"},
		},
		{
			name:          "header cut after seven bytes",
			input:         []byte{5, 0, 0, 0, 0, 0, 0},
			unexpectedEOF: true,
			msg:           []string{"frame header", "7 of 8 bytes"},
		},
		{
			name:          "body missing",
			input:         []byte{5, 0, 0, 0, 0, 0, 0, 0},
			unexpectedEOF: true,
			msg:           []string{"frame body", "0 of 5 bytes"},
		},
		{
			name:          "body cut",
			input:         []byte{5, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3},
			unexpectedEOF: true,
			msg:           []string{"frame body", "3 of 5 bytes"},
		},
		{
			name:          "second frame cut in its header",
			input:         append(frame([]byte{9}), 1, 0),
			frames:        1,
			unexpectedEOF: true,
			msg:           []string{"frame header", "2 of 8 bytes"},
		},
		{
			name:     "length above the default cap",
			input:    header(felix.DefaultMaxFrameSize + 1),
			tooLarge: &felix.FrameTooLargeError{Length: felix.DefaultMaxFrameSize + 1, Max: felix.DefaultMaxFrameSize},
			msg:      []string{"frame length 67108865", "67108864 bytes"},
		},
		{
			name:     "length above a configured cap",
			input:    frame(make([]byte, 11)),
			opts:     []felix.ReaderOption{felix.WithMaxFrameSize(10)},
			tooLarge: &felix.FrameTooLargeError{Length: 11, Max: 10},
			msg:      []string{"frame length 11 exceeds the maximum frame size of 10 bytes"},
		},
		{
			name:     "length with the top bit set",
			input:    []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
			tooLarge: &felix.FrameTooLargeError{Length: 1<<64 - 1, Max: felix.DefaultMaxFrameSize},
			msg:      []string{"frame length 18446744073709551615"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for _, rw := range readerWrappers {
				r := felix.NewReader(rw.wrap(bytes.NewReader(tt.input)), tt.opts...)
				got, err := readAll(r)
				if len(got) != tt.frames {
					t.Errorf("%s: read %d frames before the error, want %d", rw.name, len(got), tt.frames)
				}
				if err == nil || err == io.EOF {
					t.Fatalf("%s: error = %v, want a framing error", rw.name, err)
				}
				if tt.unexpectedEOF != errors.Is(err, io.ErrUnexpectedEOF) {
					t.Errorf("%s: error %q: errors.Is(io.ErrUnexpectedEOF) = %t, want %t", rw.name, err, !tt.unexpectedEOF, tt.unexpectedEOF)
				}
				if tt.tooLarge != nil {
					var tl *felix.FrameTooLargeError
					if !errors.As(err, &tl) {
						t.Errorf("%s: error %q is not a *FrameTooLargeError", rw.name, err)
					} else if *tl != *tt.tooLarge {
						t.Errorf("%s: FrameTooLargeError = %+v, want %+v", rw.name, *tl, *tt.tooLarge)
					}
				}
				for _, m := range tt.msg {
					if !strings.Contains(err.Error(), m) {
						t.Errorf("%s: error %q does not contain %q", rw.name, err, m)
					}
				}
				// Framing errors are sticky.
				if _, err2 := r.ReadFrame(); err2 != err {
					t.Errorf("%s: next ReadFrame error = %v, want the same error %v", rw.name, err2, err)
				}
			}
		})
	}
}

// A body of several MiB grows through several buffer doublings.
func TestReaderLargeFrame(t *testing.T) {
	t.Parallel()
	body := make([]byte, 5<<20+3)
	for i := range body {
		body[i] = byte(i * 7)
	}
	input := append(frame(body), frame([]byte{1})...)
	got, err := readAll(felix.NewReader(iotest.HalfReader(bytes.NewReader(input))))
	if err != io.EOF {
		t.Fatalf("final error = %v, want io.EOF", err)
	}
	if len(got) != 2 || !bytes.Equal(got[0], body) || !bytes.Equal(got[1], []byte{1}) {
		t.Errorf("got %d frames, want the 5 MiB body and a 1-byte body back", len(got))
	}
}

func TestReaderAcceptsFrameAtTheCap(t *testing.T) {
	t.Parallel()
	body := bytes.Repeat([]byte{3}, 100)
	r := felix.NewReader(bytes.NewReader(frame(body)), felix.WithMaxFrameSize(100))
	got, err := r.ReadFrame()
	if err != nil {
		t.Fatalf("ReadFrame: %v", err)
	}
	if !bytes.Equal(got, body) {
		t.Errorf("ReadFrame = %x, want %x", got, body)
	}
	if r.MaxFrameSize() != 100 {
		t.Errorf("MaxFrameSize() = %d, want 100", r.MaxFrameSize())
	}
	if d := felix.NewReader(nil, felix.WithMaxFrameSize(0)).MaxFrameSize(); d != felix.DefaultMaxFrameSize {
		t.Errorf("WithMaxFrameSize(0): MaxFrameSize() = %d, want the default %d", d, felix.DefaultMaxFrameSize)
	}
}

// A header announcing a frame just under the cap, followed by a few bytes and
// EOF, must not make the Reader allocate the announced size.
func TestReaderTruncatedHugeFrameAllocatesLittle(t *testing.T) {
	input := append(header(felix.DefaultMaxFrameSize), make([]byte, 100)...)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := felix.NewReader(bytes.NewReader(input)).ReadFrame()
	runtime.ReadMemStats(&after)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("ReadFrame error = %v, want io.ErrUnexpectedEOF", err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 {
		t.Errorf("reading a truncated %d-byte frame allocated %d bytes, want under 1 MiB", felix.DefaultMaxFrameSize, alloc)
	}
}

func TestReaderDecodeErrorIsNotSticky(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	w := felix.NewWriter(&buf)
	// 0x0a 0x05 announces 5 bytes of field 1 and gives one: not a valid message.
	if err := w.WriteFrame([]byte{0x0a, 0x05, 0x00}); err != nil {
		t.Fatal(err)
	}
	want := &felix.ToDataplane{SequenceNumber: 7, Payload: &felix.ToDataplane_InSync{InSync: &felix.InSync{}}}
	if err := w.WriteMessage(want); err != nil {
		t.Fatal(err)
	}
	r := felix.NewReader(&buf)
	if _, err := r.ReadToDataplane(); err == nil || !strings.Contains(err.Error(), "felix.ToDataplane") {
		t.Errorf("first frame: error = %v, want a decode error naming felix.ToDataplane", err)
	}
	got, err := r.ReadToDataplane()
	if err != nil {
		t.Fatalf("second frame: %v", err)
	}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("second frame (-want +got):\n%s", diff)
	}
}

// countingWriter records each Write call.
type countingWriter struct {
	writes [][]byte
	n      int   // bytes to accept per Write; 0 means all
	err    error // error returned by every Write
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.writes = append(c.writes, bytes.Clone(p))
	if c.err != nil {
		return 0, c.err
	}
	if c.n > 0 && c.n < len(p) {
		return c.n, nil
	}
	return len(p), nil
}

func TestWriterOneWritePerFrame(t *testing.T) {
	t.Parallel()
	cw := &countingWriter{}
	w := felix.NewWriter(cw)
	if err := w.WriteFrame([]byte{1, 2}); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteMessage(&felix.FromDataplane{SequenceNumber: 1}); err != nil {
		t.Fatal(err)
	}
	want := [][]byte{
		{2, 0, 0, 0, 0, 0, 0, 0, 1, 2},
		// sequence_number (8, varint): tag 0x40, value 1.
		{2, 0, 0, 0, 0, 0, 0, 0, 0x40, 0x01},
	}
	if diff := cmp.Diff(want, cw.writes); diff != "" {
		t.Errorf("Write calls (-want +got):\n%s", diff)
	}
}

func TestWriterErrorsAreSticky(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cw   *countingWriter
		is   error
	}{
		{"write error", &countingWriter{err: errors.New("broken pipe")}, nil},
		{"short write", &countingWriter{n: 3}, io.ErrShortWrite},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := felix.NewWriter(tt.cw)
			err := w.WriteFrame([]byte{1, 2, 3})
			if err == nil || !strings.Contains(err.Error(), "write frame") {
				t.Fatalf("WriteFrame error = %v, want a write frame error", err)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("error %q does not wrap %v", err, tt.is)
			}
			if err2 := w.WriteMessage(&felix.FromDataplane{}); err2 != err {
				t.Errorf("next WriteMessage error = %v, want the same error", err2)
			}
			if len(tt.cw.writes) != 1 {
				t.Errorf("%d Write calls, want 1 (nothing after the error)", len(tt.cw.writes))
			}
		})
	}
}

func TestWriterConcurrentUse(t *testing.T) {
	t.Parallel()
	const writers, each = 4, 50
	var buf bytes.Buffer
	w := felix.NewWriter(&buf)
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			for i := range each {
				m := &felix.FromDataplane{SequenceNumber: uint64(g*each + i), Payload: &felix.FromDataplane_HostEndpointStatusUpdate{
					HostEndpointStatusUpdate: &felix.HostEndpointStatusUpdate{Id: &felix.HostEndpointID{EndpointId: "hep"}, Status: &felix.EndpointStatus{Status: "up"}},
				}}
				if err := w.WriteMessage(m); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	r := felix.NewReader(&buf)
	seen := map[uint64]bool{}
	for {
		m, err := r.ReadFromDataplane()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("after %d frames: %v", len(seen), err)
		}
		seen[m.GetSequenceNumber()] = true
	}
	if len(seen) != writers*each {
		t.Errorf("read %d distinct frames, want %d", len(seen), writers*each)
	}
}

// TestReaderFrameLength2To63: a header announcing 2^63 bytes is refused
// before anything is allocated for the body, with an error naming the
// length and the cap.
func TestReaderFrameLength2To63(t *testing.T) {
	input := append(header(1<<63), make([]byte, 100)...)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := felix.NewReader(bytes.NewReader(input)).ReadFrame()
	runtime.ReadMemStats(&after)
	var tl *felix.FrameTooLargeError
	if !errors.As(err, &tl) || tl.Length != 1<<63 {
		t.Fatalf("ReadFrame error = %v, want a FrameTooLargeError for 2^63 bytes", err)
	}
	t.Logf("error: %v", err)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<10 {
		t.Errorf("refusing a 2^63-byte frame allocated %d bytes", alloc)
	}
}
