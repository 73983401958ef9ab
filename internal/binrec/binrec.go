// Package binrec writes and reads the compact binary records nftep keeps in
// its run directory between one-shot processes (the record of the last
// apply): unsigned varints, strings and fixed-size digests, appended to one
// byte slice and read back in the same order. It is what gob would do for
// these records, at a fraction of the time: the record of a 10,000-workload
// node is read and written on every `nftep apply`, and gob's reflection
// over maps of tens of thousands of entries cost more than the apply.
//
// A record carries no field names and no types: writer and reader agree on
// the order, and a format number written first by the caller tells
// versions apart. A Reader never panics on bad input: the first problem
// sticks (Err), and every read after it returns zero values.
package binrec

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"slices"
	"unsafe"
)

// Writer appends values to Buf. A Writer made by NewStream passes what it
// wrote on to an io.Writer in chunks instead of holding the whole record:
// a record of megabytes then costs 64 KiB of memory, not megabytes of
// fresh pages.
type Writer struct {
	Buf []byte

	sink io.Writer
	crc  uint32 // of what went to sink
	err  error
}

// chunk is how much a streaming Writer holds before it writes.
const chunk = 64 << 10

// NewStream returns a Writer that writes to w as it goes. Flush (or Seal)
// writes the rest; Err says whether any write failed.
func NewStream(w io.Writer) *Writer {
	return &Writer{Buf: make([]byte, 0, chunk+1024), sink: w}
}

// Grow makes room for n more bytes: a record of megabytes appended in
// small pieces would otherwise be copied each time the buffer doubles. A
// streaming Writer needs no room.
func (w *Writer) Grow(n int) {
	if w.sink == nil {
		w.Buf = slices.Grow(w.Buf, n)
	}
}

// spill writes the buffer out once a streaming Writer holds a chunk.
func (w *Writer) spill() {
	if w.sink != nil && len(w.Buf) >= chunk {
		w.Flush()
	}
}

// Flush writes what a streaming Writer holds.
func (w *Writer) Flush() {
	if w.sink == nil || len(w.Buf) == 0 {
		return
	}
	w.write(w.Buf)
	w.Buf = w.Buf[:0]
}

func (w *Writer) write(b []byte) {
	w.crc = crc32.Update(w.crc, castagnoli, b)
	if _, err := w.sink.Write(b); err != nil && w.err == nil {
		w.err = err
	}
}

// Err is the first error of a streaming Writer's writes.
func (w *Writer) Err() error { return w.err }

// Uint appends v as an unsigned varint.
func (w *Writer) Uint(v uint64) { w.Buf = binary.AppendUvarint(w.Buf, v); w.spill() }

// Int appends v as a signed varint.
func (w *Writer) Int(v int64) { w.Buf = binary.AppendVarint(w.Buf, v); w.spill() }

// Bool appends v as one byte.
func (w *Writer) Bool(v bool) {
	b := byte(0)
	if v {
		b = 1
	}
	w.Buf = append(w.Buf, b)
	w.spill()
}

// String appends s, length first.
func (w *Writer) String(s string) {
	w.Buf = binary.AppendUvarint(w.Buf, uint64(len(s)))
	w.Buf = append(w.Buf, s...)
	w.spill()
}

// Bytes appends b, length first.
func (w *Writer) Bytes(b []byte) {
	w.Buf = binary.AppendUvarint(w.Buf, uint64(len(b)))
	w.Fixed(b)
}

// Fixed appends b as it is: the reader knows its length (a digest).
func (w *Writer) Fixed(b []byte) {
	if w.sink != nil && len(b) >= chunk {
		// Straight through, not through the buffer.
		w.Flush()
		w.write(b)
		return
	}
	w.Buf = append(w.Buf, b...)
	w.spill()
}

// Small appends b as it is, as Fixed does, for a few bytes (a digest):
// it copies them into the buffer and never hands b itself to the sink, so
// that b, an array of the caller's, can stay on its stack.
func (w *Writer) Small(b []byte) {
	w.Buf = append(w.Buf, b...)
	w.spill()
}

// Seal appends a CRC-32C of everything written: Open checks it, so that a
// record torn by a crash while it was written reads as no record.
func (w *Writer) Seal() {
	w.Buf = binary.LittleEndian.AppendUint32(w.Buf, crc32.Update(w.crc, castagnoli, w.Buf))
	if w.sink != nil {
		// The checksum is not part of what it sums.
		_, err := w.sink.Write(w.Buf)
		if err != nil && w.err == nil {
			w.err = err
		}
		w.Buf = w.Buf[:0]
	}
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt is a Reader's error for a record that does not read.
var ErrCorrupt = errors.New("corrupt record")

// Reader reads values from Buf in the order they were written.
type Reader struct {
	Buf []byte
	Err error
	// Alias makes String return strings that share Buf instead of
	// copies: no allocation per string, for a buffer that is never
	// changed or unmapped while any string read from it is in use. A
	// record of 10,000 workloads holds some 100,000 strings; in a
	// one-shot process each copy is fresh memory, and fresh pages cost a
	// fault each.
	Alias bool
}

// Open returns a Reader of data, a sealed record (see Seal), after
// checking its checksum.
func Open(data []byte) *Reader {
	if len(data) < 4 {
		return &Reader{Err: ErrCorrupt}
	}
	body := data[:len(data)-4]
	if binary.LittleEndian.Uint32(data[len(data)-4:]) != crc32.Checksum(body, castagnoli) {
		return &Reader{Err: ErrCorrupt}
	}
	return &Reader{Buf: body}
}

func (r *Reader) fail() {
	if r.Err == nil {
		r.Err = ErrCorrupt
	}
	r.Buf = nil
}

// Uint reads an unsigned varint.
func (r *Reader) Uint() uint64 {
	v, n := binary.Uvarint(r.Buf)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.Buf = r.Buf[n:]
	return v
}

// Len reads a length or count: an unsigned varint no larger than what is
// left to read (each counted item takes at least one byte), so that a
// corrupt count cannot make the caller allocate without bound.
func (r *Reader) Len() int {
	v := r.Uint()
	if v > uint64(len(r.Buf)) {
		r.fail()
		return 0
	}
	return int(v)
}

// Int reads a signed varint.
func (r *Reader) Int() int64 {
	v, n := binary.Varint(r.Buf)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.Buf = r.Buf[n:]
	return v
}

// Bool reads one byte written by Bool.
func (r *Reader) Bool() bool {
	if len(r.Buf) < 1 || r.Buf[0] > 1 {
		r.fail()
		return false
	}
	v := r.Buf[0] == 1
	r.Buf = r.Buf[1:]
	return v
}

// String reads a string.
func (r *Reader) String() string {
	b := r.Bytes()
	if r.Alias && len(b) > 0 {
		return unsafe.String(&b[0], len(b))
	}
	return string(b)
}

// Bytes reads a byte slice. It aliases the record's buffer.
func (r *Reader) Bytes() []byte {
	n := r.Len()
	if r.Err != nil {
		return nil
	}
	b := r.Buf[:n:n]
	r.Buf = r.Buf[n:]
	return b
}

// Fixed reads into b exactly len(b) bytes.
func (r *Reader) Fixed(b []byte) {
	if len(r.Buf) < len(b) {
		r.fail()
		return
	}
	copy(b, r.Buf)
	r.Buf = r.Buf[len(b):]
}

// Done checks that the whole record was read, and returns Err.
func (r *Reader) Done() error {
	if r.Err == nil && len(r.Buf) != 0 {
		r.Err = ErrCorrupt
	}
	return r.Err
}
