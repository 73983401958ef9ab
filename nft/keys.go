package nft

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
)

// Set keys: the types of key fields, and their text (nft syntax) and
// kernel (bytes) forms.

// keyTypeInfo says how one key type is stored and printed.
type keyTypeInfo struct {
	dt nftables.SetDatatype
	// size is the number of bytes the kernel keeps (IFNAMSIZ for ifname).
	size int
	// hostOrder marks types nft keeps in host byte order (ifname is a
	// string, mark a host-endian u32); nft sorts their values as
	// little-endian numbers when it lists a set (mergesort.c).
	hostOrder bool
	// ranges says a field of this type may be a prefix or range in an
	// interval set. Marks and protocols may not: nft would have to
	// byte-swap host-endian marks for the rbtree, and nftep never needs
	// either.
	ranges bool
	// perLine is how many elements nft prints on one line of a set of
	// this type (expression.c calculate_delim); 1 means one per line.
	perLine int
}

var keyTypes = map[KeyType]keyTypeInfo{
	TypeIfName:      {dt: nftables.TypeIFName, size: 16, hostOrder: true, ranges: true, perLine: 1},
	TypeIPv4Addr:    {dt: nftables.TypeIPAddr, size: 4, ranges: true, perLine: 2},
	TypeIPv6Addr:    {dt: nftables.TypeIP6Addr, size: 16, ranges: true, perLine: 1},
	TypeMark:        {dt: nftables.TypeMark, size: 4, hostOrder: true, perLine: 5},
	TypeInetProto:   {dt: nftables.TypeInetProto, size: 1, perLine: 5},
	TypeInetService: {dt: nftables.TypeInetService, size: 2, ranges: true, perLine: 5},
}

// selectorTypes maps each selector to the key type of the field it loads.
var selectorTypes = map[Selector]KeyType{
	SelIIFName:  TypeIfName,
	SelOIFName:  TypeIfName,
	SelIPSaddr:  TypeIPv4Addr,
	SelIPDaddr:  TypeIPv4Addr,
	SelIP6Saddr: TypeIPv6Addr,
	SelIP6Daddr: TypeIPv6Addr,
	SelL4Proto:  TypeInetProto,
	SelTHSport:  TypeInetService,
	SelTHDport:  TypeInetService,
	SelMark:     TypeMark,

	SelARPSaddrIP: TypeIPv4Addr,
}

// keyField is one field of an element key: the closed interval [first,
// last] of raw kernel bytes (len == keyTypeInfo.size). first == last for a
// single value.
type keyField struct {
	first, last []byte
}

func (f keyField) single() bool { return bytes.Equal(f.first, f.last) }

// concatSep separates the fields of a concatenated key, as nft prints it.
const concatSep = " . "

// parseKey parses an element key of set s into its fields. It accepts the
// forms nft accepts (ranges, prefixes, numbers or names); validateElement
// additionally requires the canonical form.
func parseKey(s *Set, key string) ([]keyField, error) {
	parts := strings.Split(key, concatSep)
	if len(parts) != len(s.Key) {
		return nil, fmt.Errorf("key has %d fields, the set's type %s has %d", len(parts), keyTypeString(s.Key), len(s.Key))
	}
	fields := make([]keyField, len(parts))
	for i, p := range parts {
		f, err := parseField(s.Key[i], p)
		if err != nil {
			return nil, err
		}
		fields[i] = f
	}
	return fields, nil
}

func parseField(t KeyType, text string) (keyField, error) {
	switch t {
	case TypeIfName:
		name, wild := strings.CutSuffix(text, "*")
		if err := checkIfName(name, wild); err != nil {
			return keyField{}, err
		}
		first := ifnameBytes(name)
		if !wild {
			return keyField{first, first}, nil
		}
		last := slices.Clone(first)
		for i := len(name); i < len(last); i++ {
			last[i] = 0xff
		}
		return keyField{first, last}, nil
	case TypeIPv4Addr, TypeIPv6Addr:
		return parseAddrField(t, text)
	case TypeInetService:
		lo, hi, isRange := strings.Cut(text, "-")
		a, err := strconv.ParseUint(lo, 10, 16)
		if err != nil {
			return keyField{}, fmt.Errorf("bad port %q", lo)
		}
		b := a
		if isRange {
			if b, err = strconv.ParseUint(hi, 10, 16); err != nil {
				return keyField{}, fmt.Errorf("bad port %q", hi)
			}
			if b < a {
				return keyField{}, fmt.Errorf("port range %q runs backwards", text)
			}
		}
		return keyField{binaryutil.BigEndian.PutUint16(uint16(a)), binaryutil.BigEndian.PutUint16(uint16(b))}, nil
	case TypeInetProto:
		p, ok := protoByName(text)
		if !ok {
			return keyField{}, fmt.Errorf("unknown protocol %q", text)
		}
		return keyField{[]byte{p}, []byte{p}}, nil
	case TypeMark:
		v, err := strconv.ParseUint(text, 0, 32)
		if err != nil {
			return keyField{}, fmt.Errorf("bad mark %q", text)
		}
		b := binaryutil.NativeEndian.PutUint32(uint32(v))
		return keyField{b, b}, nil
	}
	return keyField{}, fmt.Errorf("unknown key type %q", t)
}

func parseAddrField(t KeyType, text string) (keyField, error) {
	want4 := t == TypeIPv4Addr
	check := func(a netip.Addr) error {
		if a.Zone() != "" || a.Is4() != want4 {
			return fmt.Errorf("address %s is not of type %s", a, t)
		}
		return nil
	}
	if lo, hi, ok := strings.Cut(text, "-"); ok {
		a, err := netip.ParseAddr(lo)
		if err != nil {
			return keyField{}, fmt.Errorf("bad address %q", lo)
		}
		b, err := netip.ParseAddr(hi)
		if err != nil {
			return keyField{}, fmt.Errorf("bad address %q", hi)
		}
		if err := errors.Join(check(a), check(b)); err != nil {
			return keyField{}, err
		}
		if b.Less(a) {
			return keyField{}, fmt.Errorf("address range %q runs backwards", text)
		}
		return keyField{a.AsSlice(), b.AsSlice()}, nil
	}
	if strings.Contains(text, "/") {
		p, err := netip.ParsePrefix(text)
		if err != nil {
			return keyField{}, fmt.Errorf("bad prefix %q", text)
		}
		if err := check(p.Addr()); err != nil {
			return keyField{}, err
		}
		if p.Masked() != p {
			return keyField{}, fmt.Errorf("prefix %s has host bits set (want %s)", p, p.Masked())
		}
		first, last := prefixRange(p)
		return keyField{first, last}, nil
	}
	a, err := netip.ParseAddr(text)
	if err != nil {
		return keyField{}, fmt.Errorf("bad address %q", text)
	}
	if err := check(a); err != nil {
		return keyField{}, err
	}
	return keyField{a.AsSlice(), a.AsSlice()}, nil
}

// prefixRange returns the first and last address of p as raw bytes.
func prefixRange(p netip.Prefix) (first, last []byte) {
	first = p.Masked().Addr().AsSlice()
	last = slices.Clone(first)
	for i := p.Bits(); i < len(last)*8; i++ {
		last[i/8] |= 0x80 >> (i % 8)
	}
	return first, last
}

// formatField prints f as nft prints a field of type t (without the quotes
// nft puts around interface names).
func formatField(t KeyType, f keyField) (string, error) {
	switch t {
	case TypeIfName:
		name := string(bytes.TrimRight(f.first, "\x00"))
		if bytes.IndexByte([]byte(name), 0) >= 0 {
			return "", fmt.Errorf("interface name %q has an embedded NUL", name)
		}
		if f.single() {
			return name, nil
		}
		want := slices.Clone(f.first)
		for i := len(name); i < len(want); i++ {
			want[i] = 0xff
		}
		if !bytes.Equal(want, f.last) {
			return "", fmt.Errorf("interface name range %x-%x is neither a name nor a wildcard", f.first, f.last)
		}
		return name + "*", nil
	case TypeIPv4Addr, TypeIPv6Addr:
		a, ok1 := netip.AddrFromSlice(f.first)
		b, ok2 := netip.AddrFromSlice(f.last)
		if !ok1 || !ok2 {
			return "", fmt.Errorf("bad address bytes %x-%x", f.first, f.last)
		}
		if f.single() {
			return a.String(), nil
		}
		if bits, ok := rangePrefixLen(f.first, f.last); ok {
			return netip.PrefixFrom(a, bits).String(), nil
		}
		return a.String() + "-" + b.String(), nil
	case TypeInetService:
		a, b := binary.BigEndian.Uint16(f.first), binary.BigEndian.Uint16(f.last)
		if a == b {
			return strconv.Itoa(int(a)), nil
		}
		return fmt.Sprintf("%d-%d", a, b), nil
	case TypeInetProto:
		if !f.single() {
			return "", fmt.Errorf("protocol ranges are not supported")
		}
		return protoName(f.first[0]), nil
	case TypeMark:
		if !f.single() {
			return "", fmt.Errorf("mark ranges are not supported")
		}
		return fmt.Sprintf("0x%08x", binaryutil.NativeEndian.Uint32(f.first)), nil
	}
	return "", fmt.Errorf("unknown key type %q", t)
}

// rangePrefixLen reports whether [first, last] is exactly one prefix, and
// its length; nft prints such ranges of addresses as prefixes.
func rangePrefixLen(first, last []byte) (int, bool) {
	n := len(first) * 8
	bits := n
	// Find the trailing run where first has 0s and last has 1s.
	for bits > 0 {
		i := bits - 1
		fb := first[i/8] & (0x80 >> (i % 8))
		lb := last[i/8] & (0x80 >> (i % 8))
		if fb != 0 || lb == 0 {
			break
		}
		bits--
	}
	// The remaining leading bits must be equal.
	for i := 0; i < bits; i++ {
		if first[i/8]&(0x80>>(i%8)) != last[i/8]&(0x80>>(i%8)) {
			return 0, false
		}
	}
	return bits, true
}

// canonicalKey returns key as nft prints it.
func canonicalKey(s *Set, fields []keyField) (string, error) {
	if len(fields) == 1 && len(s.Key) == 1 {
		return formatField(s.Key[0], fields[0])
	}
	parts := make([]string, len(fields))
	for i, f := range fields {
		p, err := formatField(s.Key[i], f)
		if err != nil {
			return "", err
		}
		parts[i] = p
	}
	return strings.Join(parts, concatSep), nil
}

func keyTypeString(ts []KeyType) string {
	parts := make([]string, len(ts))
	for i, t := range ts {
		parts[i] = string(t)
	}
	return strings.Join(parts, concatSep)
}

// ifnameBytes pads name with NULs to IFNAMSIZ (16) bytes: the kernel
// compares whole 16-byte names, and an unpadded name would be a prefix
// match (`iifname "cali*"`).
func ifnameBytes(name string) []byte {
	b := make([]byte, 16)
	copy(b, name)
	return b
}
