package routes

import (
	"encoding/binary"
	"testing"

	"golang.org/x/sys/unix"
)

// linkMsg encodes one RTM_NEWLINK message of a dump (or, with typ, another
// type) with the given sequence number, flags and attributes.
func linkMsg(typ uint16, seq uint32, flags uint16, index int32, ifflags uint32, attrs ...[]byte) []byte {
	body := make([]byte, unix.SizeofIfInfomsg)
	binary.NativeEndian.PutUint32(body[4:8], uint32(index))
	binary.NativeEndian.PutUint32(body[8:12], ifflags)
	for _, a := range attrs {
		body = append(body, a...)
		for len(body)%4 != 0 {
			body = append(body, 0)
		}
	}
	h := make([]byte, unix.NLMSG_HDRLEN)
	binary.NativeEndian.PutUint32(h[0:4], uint32(unix.NLMSG_HDRLEN+len(body)))
	binary.NativeEndian.PutUint16(h[4:6], typ)
	binary.NativeEndian.PutUint16(h[6:8], flags)
	binary.NativeEndian.PutUint32(h[8:12], seq)
	return append(h, body...)
}

func rta(typ uint16, v []byte) []byte {
	a := make([]byte, unix.SizeofRtAttr)
	binary.NativeEndian.PutUint16(a[0:2], uint16(unix.SizeofRtAttr+len(v)))
	binary.NativeEndian.PutUint16(a[2:4], typ)
	return append(a, v...)
}

// TestParseLinkDump: the name is found among other attributes, messages of
// another request are skipped, DONE ends the dump, an interrupted dump is
// flagged, an error is returned (in an error message or at the end of the
// dump), and a link without a name and a message that claims more bytes
// than it has are refused.
func TestParseLinkDump(t *testing.T) {
	var b []byte
	b = append(b, linkMsg(unix.RTM_NEWLINK, 7, unix.NLM_F_MULTI, 3, unix.IFF_UP|unix.IFF_RUNNING,
		rta(unix.IFLA_MTU, []byte{0xdc, 5, 0, 0}), rta(unix.IFLA_IFNAME, []byte("cali1\x00")))...)
	b = append(b, linkMsg(unix.RTM_NEWLINK, 6, unix.NLM_F_MULTI, 9, 0, rta(unix.IFLA_IFNAME, []byte("stale\x00")))...)
	b = append(b, linkMsg(unix.RTM_NEWLINK, 7, unix.NLM_F_MULTI|unix.NLM_F_DUMP_INTR, 4, unix.IFF_UP, rta(unix.IFLA_IFNAME, []byte("eth0\x00")))...)
	var out []linkBrief
	var intr bool
	done, err := parseLinkDump(b, 7, &out, &intr)
	if err != nil || done {
		t.Fatalf("done %v, err %v; want more to come", done, err)
	}
	want := []linkBrief{{index: 3, name: "cali1", running: true}, {index: 4, name: "eth0"}}
	if len(out) != 2 || out[0] != want[0] || out[1] != want[1] || !intr {
		t.Errorf("links %+v (interrupted %v), want %+v interrupted", out, intr, want)
	}
	done, err = parseLinkDump(linkMsg(unix.NLMSG_DONE, 7, unix.NLM_F_MULTI, 0, 0), 7, &out, &intr)
	if err != nil || !done {
		t.Errorf("DONE: done %v, err %v", done, err)
	}

	errMsg := linkMsg(unix.NLMSG_ERROR, 7, 0, 0, 0)
	code := -int32(unix.EPERM)
	binary.NativeEndian.PutUint32(errMsg[unix.NLMSG_HDRLEN:], uint32(code))
	if _, err := parseLinkDump(errMsg, 7, &out, &intr); err != unix.EPERM {
		t.Errorf("error message: %v, want EPERM", err)
	}
	doneErr := linkMsg(unix.NLMSG_DONE, 7, unix.NLM_F_MULTI, 0, 0)
	tooBig := -int32(unix.EMSGSIZE)
	binary.NativeEndian.PutUint32(doneErr[unix.NLMSG_HDRLEN:], uint32(tooBig))
	if _, err := parseLinkDump(doneErr, 7, &out, &intr); err != unix.EMSGSIZE {
		t.Errorf("a dump that ended in an error: %v, want EMSGSIZE", err)
	}
	noName := linkMsg(unix.RTM_NEWLINK, 7, unix.NLM_F_MULTI, 5, 0, rta(unix.IFLA_MTU, []byte{0xdc, 5, 0, 0}))
	if _, err := parseLinkDump(noName, 7, &out, &intr); err == nil {
		t.Error("a link without a name was accepted (a resync would take it for gone)")
	}
	short := linkMsg(unix.RTM_NEWLINK, 7, 0, 1, 0, rta(unix.IFLA_IFNAME, []byte("x\x00")))
	if _, err := parseLinkDump(short[:len(short)-4], 7, &out, &intr); err == nil {
		t.Error("a truncated message was accepted")
	}
}
