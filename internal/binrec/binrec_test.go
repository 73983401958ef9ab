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
	w.Seal()

	r := Open(w.Buf)
	var fixed [2]byte
	u, i, b, s, bs := r.Uint(), r.Int(), r.Bool(), r.String(), r.Bytes()
	r.Fixed(fixed[:])
	if err := r.Done(); err != nil {
		t.Fatal(err)
	}
	if u != 300 || i != -7 || !b || s != "calie00001" || !bytes.Equal(bs, []byte{1, 2, 3}) || fixed != [2]byte{9, 9} {
		t.Errorf("read back %v %v %v %q %v %v", u, i, b, s, bs, fixed)
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
