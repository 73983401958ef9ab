package takeover

// Reading an iptables-legacy table from x_tables, as iptables-legacy-save
// does but without running it (nftep runs no programs): IPT_SO_GET_INFO
// gives the table's size, IPT_SO_GET_ENTRIES its rule blob, in which every
// user chain starts with an ERROR target naming it
// (linux/netfilter_ipv4/ip_tables.h, linux/netfilter/x_tables.h).

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// x_tables' socket options (IPT_BASE_CTL 64; ip6tables' are the same
// numbers at SOL_IPV6).
const (
	xtSoGetInfo    = 64
	xtSoGetEntries = 65
	xtTableMaxName = 32 // XT_TABLE_MAXNAMELEN
	xtNumHooks     = 5  // NF_INET_NUMHOOKS
)

// xtFamily is where one family's entries keep their fields: the offset of
// target_offset and next_offset in struct ipt_entry / ip6t_entry (after
// struct ipt_ip, 84 bytes, or ip6t_ip6, 136, and nfcache).
type xtFamily struct {
	domain, level int
	targetOffset  int
}

var xtFamilies = map[string]xtFamily{
	"ipv4": {unix.AF_INET, unix.SOL_IP, 84 + 4},
	"ipv6": {unix.AF_INET6, unix.SOL_IPV6, 136 + 4},
}

// countXTables counts the rules and cali- chains of an x_tables table. It
// must run on a thread in the namespace (the socket is opened there).
func countXTables(family, table string) (rules, cali int, err error) {
	fam, ok := xtFamilies[family]
	if !ok || len(table) >= xtTableMaxName {
		return 0, 0, fmt.Errorf("no x_tables table %s %s", family, table)
	}
	fd, err := unix.Socket(fam.domain, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW)
	if err != nil {
		return 0, 0, fmt.Errorf("open raw socket: %w", err)
	}
	defer unix.Close(fd)

	// struct ipt_getinfo: name[32], valid_hooks, hook_entry[5],
	// underflow[5], num_entries, size.
	info := make([]byte, xtTableMaxName+4+4*xtNumHooks*2+4+4)
	copy(info, table)
	if err := getsockopt(fd, fam.level, xtSoGetInfo, info); err != nil {
		return 0, 0, fmt.Errorf("read the info of table %s: %w", table, err)
	}
	validHooks := binary.NativeEndian.Uint32(info[xtTableMaxName:])
	off := xtTableMaxName + 4 + 4*xtNumHooks*2
	numEntries := int(binary.NativeEndian.Uint32(info[off:]))
	size := int(binary.NativeEndian.Uint32(info[off+4:]))

	// struct ipt_get_entries: name[32], size, then the entries (8-byte
	// aligned).
	const hdr = xtTableMaxName + 8
	buf := make([]byte, hdr+size)
	copy(buf, table)
	binary.NativeEndian.PutUint32(buf[xtTableMaxName:], uint32(size))
	if err := getsockopt(fd, fam.level, xtSoGetEntries, buf); err != nil {
		return 0, 0, fmt.Errorf("read the entries of table %s: %w", table, err)
	}
	entries := buf[hdr:]
	// Every user chain is an ERROR entry naming it, its rules, and a
	// RETURN entry; the table ends with an ERROR entry named "ERROR";
	// each built-in chain ends with its policy entry.
	userChains := 0
	for p := 0; p+fam.targetOffset+4 <= len(entries); {
		tOff := int(binary.NativeEndian.Uint16(entries[p+fam.targetOffset:]))
		next := int(binary.NativeEndian.Uint16(entries[p+fam.targetOffset+2:]))
		if next <= 0 {
			break
		}
		// struct xt_entry_target: target_size, name[29], revision,
		// then the target's data (xt_error_target: errorname[32]).
		t := p + tOff
		if t+32+xtTableMaxName <= len(entries) && p+next <= len(entries) {
			name := cstring(entries[t+2 : t+2+29])
			if name == "ERROR" {
				chain := cstring(entries[t+32 : t+32+xtTableMaxName])
				if chain != "ERROR" {
					userChains++
					if len(chain) > len(chainPrefix) && chain[:len(chainPrefix)] == chainPrefix {
						cali++
					}
				}
			}
		}
		p += next
	}
	builtins := 0
	for h := 0; h < xtNumHooks; h++ {
		if validHooks&(1<<h) != 0 {
			builtins++
		}
	}
	rules = numEntries - builtins - 1 - 2*userChains
	if rules < 0 {
		rules = 0
	}
	return rules, cali, nil
}

func cstring(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// getsockopt reads a socket option into b (x/sys/unix has no raw form).
func getsockopt(fd, level, opt int, b []byte) error {
	l := uint32(len(b))
	_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), uintptr(level), uintptr(opt),
		uintptr(unsafe.Pointer(&b[0])), uintptr(unsafe.Pointer(&l)), 0)
	if errno != 0 {
		return errno
	}
	return nil
}
