package binrec

import (
	"bytes"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	var w Writer
	w.Uint(300)
	w.Int(-7)
	w.Bool(true)
	w.String("calie00001")
	w.Bytes([]byte{1, 2, 3})
	w.Fixed([]byte{9, 9})
	w.Small([]byte{7, 7, 7})
	w.Seal()

	r := Open(w.Buf)
	var fixed [2]byte
	var small [3]byte
	u, i, b, s, bs := r.Uint(), r.Int(), r.Bool(), r.String(), r.Bytes()
	r.Fixed(fixed[:])
	r.Fixed(small[:])
	if err := r.Done(); err != nil {
		t.Fatal(err)
	}
	if u != 300 || i != -7 || !b || s != "calie00001" || !bytes.Equal(bs, []byte{1, 2, 3}) || fixed != [2]byte{9, 9} || small != [3]byte{7, 7, 7} {
		t.Errorf("read back %v %v %v %q %v %v %v", u, i, b, s, bs, fixed, small)
	}
}

func TestCorrupt(t *testing.T) {
	var w Writer
	w.String("abc")
	w.Seal()
	for i := range w.Buf {
		bad := bytes.Clone(w.Buf)
		bad[i] ^= 0x40
		if r := Open(bad); r.String() == "abc" && r.Done() == nil {
			t.Errorf("flipping byte %d went unnoticed", i)
		}
	}
	if r := Open(w.Buf[:len(w.Buf)-1]); r.Done() == nil {
		t.Error("a torn record read")
	}
	// A count larger than the record does not allocate.
	var big Writer
	big.Uint(1 << 40)
	big.Seal()
	r := Open(big.Buf)
	if r.Len() != 0 || r.Done() == nil {
		t.Error("a count past the end was taken")
	}
}

// TestStream: a streaming Writer writes what an in-memory one holds,
// whatever the sizes of the pieces.
func TestStream(t *testing.T) {
	big := bytes.Repeat([]byte("x"), 3*chunk+17)
	fill := func(w *Writer) {
		for i := range 20000 {
			w.Uint(uint64(i))
			w.String("calie00001")
		}
		w.Bytes(big)
		w.Bool(true)
		w.Fixed(big[:chunk-1])
		w.Seal()
	}
	var mem Writer
	fill(&mem)
	var out bytes.Buffer
	s := NewStream(&out)
	fill(s)
	if s.Err() != nil || !bytes.Equal(mem.Buf, out.Bytes()) {
		t.Fatalf("streamed %d bytes, in memory %d, err %v", out.Len(), len(mem.Buf), s.Err())
	}
	if Open(out.Bytes()).Err != nil {
		t.Error("the streamed record does not open")
	}
}
