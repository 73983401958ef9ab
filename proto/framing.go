package proto

import (
	"encoding/binary"
	"fmt"
	"io"
	"sync"

	"google.golang.org/protobuf/proto"
)

// HeaderSize is the size of a frame header: the body length as an unsigned
// 64-bit little-endian integer. The length excludes the header itself.
// Felix's RecvMessage/SendMessage in felix/dataplane/external/ext_dataplane.go;
// Felix documents the format in felix/proto/doc.go. A 42-byte envelope is
// preceded by 2a 00 00 00 00 00 00 00.
const HeaderSize = 8

// DefaultMaxFrameSize is the largest frame body a Reader accepts unless told
// otherwise. Felix itself has no limit (it allocates whatever the header says);
// its largest real messages, full IP sets of big clusters, stay well below this.
const DefaultMaxFrameSize = 64 << 20

// initialBodyBuffer is how much a Reader allocates for a body before any of it
// has arrived. Larger bodies grow as data comes in, so a corrupt or hostile
// header followed by a short stream cannot make the Reader allocate the whole
// claimed length.
const initialBodyBuffer = 64 << 10

// FrameTooLargeError is returned by a Reader when a frame header announces a
// body longer than the Reader's maximum frame size. The stream cannot be
// resynchronised after it.
type FrameTooLargeError struct {
	// Length is the body length the header announced.
	Length uint64
	// Max is the Reader's maximum frame size.
	Max int
}

// Error implements error.
func (e *FrameTooLargeError) Error() string {
	return fmt.Sprintf("frame length %d exceeds the maximum frame size of %d bytes", e.Length, e.Max)
}

// ReaderOption configures a Reader.
type ReaderOption func(*Reader)

// WithMaxFrameSize sets the largest frame body the Reader accepts, in bytes.
// A value of zero or less selects DefaultMaxFrameSize.
func WithMaxFrameSize(n int) ReaderOption {
	return func(r *Reader) {
		if n <= 0 {
			n = DefaultMaxFrameSize
		}
		r.max = n
	}
}

// Reader reads length-prefixed frames, such as the ToDataplane stream Felix
// writes to its driver on fd 3. It is not safe for concurrent use.
//
// A framing error (a truncated frame, an oversized length, a failed read) is
// sticky: the stream position is unknown afterwards, so every later call
// returns the same error. An envelope that fails to decode is not a framing
// error; the next call reads the next frame.
type Reader struct {
	r   io.Reader
	max int
	hdr [HeaderSize]byte
	err error
}

// NewReader returns a Reader reading frames from r, with a maximum frame size
// of DefaultMaxFrameSize unless an option says otherwise.
func NewReader(r io.Reader, opts ...ReaderOption) *Reader {
	fr := &Reader{r: r, max: DefaultMaxFrameSize}
	for _, o := range opts {
		o(fr)
	}
	return fr
}

// MaxFrameSize returns the largest frame body the Reader accepts.
func (r *Reader) MaxFrameSize() int {
	return r.max
}

// ReadFrame reads one frame and returns its body, a new slice owned by the
// caller (empty, not nil, for a zero-length frame).
//
// It returns exactly io.EOF when the stream ends cleanly between frames, an
// error wrapping io.ErrUnexpectedEOF when it ends inside a header or a body,
// and a *FrameTooLargeError when the header announces more than the maximum
// frame size.
func (r *Reader) ReadFrame() ([]byte, error) {
	if r.err != nil {
		return nil, r.err
	}
	body, err := r.readFrame()
	if err != nil {
		r.err = err
		return nil, err
	}
	return body, nil
}

func (r *Reader) readFrame() ([]byte, error) {
	n, err := io.ReadFull(r.r, r.hdr[:])
	switch {
	case err == io.EOF:
		return nil, io.EOF
	case err == io.ErrUnexpectedEOF:
		return nil, fmt.Errorf("read frame header: stream ended after %d of %d bytes: %w", n, HeaderSize, err)
	case err != nil:
		return nil, fmt.Errorf("read frame header: %w", err)
	}
	length := binary.LittleEndian.Uint64(r.hdr[:])
	if length > uint64(r.max) {
		return nil, &FrameTooLargeError{Length: length, Max: r.max}
	}
	size := int(length)

	// Grow the body as it arrives rather than trusting the header with one
	// allocation of its full size.
	body := make([]byte, min(size, initialBodyBuffer))
	got := 0
	for {
		k, err := io.ReadFull(r.r, body[got:])
		got += k
		switch {
		case err == io.EOF || err == io.ErrUnexpectedEOF:
			return nil, fmt.Errorf("read frame body: stream ended after %d of %d bytes: %w", got, size, io.ErrUnexpectedEOF)
		case err != nil:
			return nil, fmt.Errorf("read frame body (%d of %d bytes read): %w", got, size, err)
		}
		if got == size {
			return body, nil
		}
		grown := make([]byte, min(size, 2*len(body)))
		copy(grown, body)
		body = grown
	}
}

// ReadMessage reads one frame and decodes its body into m, keeping fields it
// does not know as unknown fields. Framing errors are those of ReadFrame; a
// body that does not decode gives an error naming the message type, and the
// Reader stays usable.
func (r *Reader) ReadMessage(m proto.Message) error {
	body, err := r.ReadFrame()
	if err != nil {
		return err
	}
	if err := proto.Unmarshal(body, m); err != nil {
		return fmt.Errorf("decode %d-byte frame as %s: %w", len(body), m.ProtoReflect().Descriptor().FullName(), err)
	}
	return nil
}

// ReadToDataplane reads and decodes one frame from Felix. A payload nftep does
// not declare (routes, services, …) leaves GetPayload() nil.
func (r *Reader) ReadToDataplane() (*ToDataplane, error) {
	m := new(ToDataplane)
	if err := r.ReadMessage(m); err != nil {
		return nil, err
	}
	return m, nil
}

// ReadFromDataplane reads and decodes one frame written by a driver.
func (r *Reader) ReadFromDataplane() (*FromDataplane, error) {
	m := new(FromDataplane)
	if err := r.ReadMessage(m); err != nil {
		return nil, err
	}
	return m, nil
}

// Writer writes length-prefixed frames, such as the FromDataplane stream a
// driver writes to Felix on fd 4. Each frame, header and body, goes to the
// underlying writer in a single Write call. A Writer is safe for concurrent use.
//
// A failed write is sticky: the peer may have seen part of a frame, so every
// later call returns the same error.
type Writer struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte
	err error
}

// NewWriter returns a Writer writing frames to w.
func NewWriter(w io.Writer) *Writer {
	return &Writer{w: w}
}

// WriteFrame writes one frame with the given body.
func (w *Writer) WriteFrame(body []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf[:0], make([]byte, HeaderSize)...)
	w.buf = append(w.buf, body...)
	return w.flush()
}

// WriteMessage encodes m deterministically and writes it as one frame. Fields
// go out in field-number order with oneof fields last and map entries sorted
// by key, which is byte for byte what Felix's own encoder produces.
func (w *Writer) WriteMessage(m proto.Message) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	buf, err := proto.MarshalOptions{Deterministic: true}.MarshalAppend(append(w.buf[:0], make([]byte, HeaderSize)...), m)
	if err != nil {
		return fmt.Errorf("encode %s: %w", m.ProtoReflect().Descriptor().FullName(), err)
	}
	w.buf = buf
	return w.flush()
}

// flush writes w.buf, whose first HeaderSize bytes are reserved for the header.
func (w *Writer) flush() error {
	if w.err != nil {
		return w.err
	}
	binary.LittleEndian.PutUint64(w.buf[:HeaderSize], uint64(len(w.buf)-HeaderSize))
	n, err := w.w.Write(w.buf)
	if err == nil && n != len(w.buf) {
		err = io.ErrShortWrite
	}
	if err != nil {
		w.err = fmt.Errorf("write frame (%d of %d bytes written): %w", n, len(w.buf), err)
		return w.err
	}
	return nil
}
