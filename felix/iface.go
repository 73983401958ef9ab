package felix

import (
	"fmt"
	"net"
	"strconv"
	"unicode/utf8"
)

// MaxIfaceNameLen is IFNAMSIZ-1: the kernel refuses longer names, and the
// dispatch maps key on the name padded to IFNAMSIZ.
const MaxIfaceNameLen = 15

// CheckIfaceName reports whether name can be a workload's interface: 1 to
// 15 bytes of printable ASCII without whitespace, '/', ':', quotes,
// backslashes or '*'. The name keys the dispatch maps, and one nft cannot
// match would fail the whole transaction, every endpoint's changes with it
// (nft.ValidateIfName applies the same rule).
func CheckIfaceName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("missing (the host-side interface, e.g. cali12ab)")
	case len(name) > MaxIfaceNameLen:
		return fmt.Errorf("interface name %q is longer than %d bytes", name, MaxIfaceNameLen)
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !ifaceNameByte(c) {
			return fmt.Errorf("interface name %q has %s: nftables cannot match it", name, quoteByte(c))
		}
	}
	return nil
}

// ifaceNameByte reports whether c may appear in an interface name.
func ifaceNameByte(c byte) bool {
	switch c {
	case '/', ':', '"', '\\', '*':
		return false
	}
	return c > ' ' && c < 0x7f
}

// quoteByte names the byte c for an error message: an ASCII byte as a
// quoted character, any other as the hex byte it is (%q of a byte would
// print the Latin-1 letter of that code point, which the name does not
// have).
func quoteByte(c byte) string {
	if c < utf8.RuneSelf {
		return "character " + strconv.QuoteRune(rune(c))
	}
	return fmt.Sprintf(`byte '\x%02x'`, c)
}

// ParseMAC parses a MAC address as Go's net.ParseMAC does (and Felix's
// endpoint manager).
func ParseMAC(s string) (net.HardwareAddr, error) {
	mac, err := net.ParseMAC(s)
	if err != nil {
		return nil, fmt.Errorf("%q is not a MAC address", s)
	}
	return mac, nil
}
