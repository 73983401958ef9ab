// Package felix validates Felix's input once and turns its strings into
// typed values: CIDRs and addresses by family, IP-set members, MAC
// addresses, interface names, and whole workload and host endpoints. The
// state-file checker (package dataplane), the endpoint manager, the policy
// manager and render all parse through it, so a string one of them accepts
// is accepted, with the same meaning, by every other.
//
// It imports nothing of nftep's but proto, and nothing below it may import
// it: nft checks what it is given, it does not know Felix.
//
// # The rules, decided once
//
//   - A CIDR is "<address>/<bits>" or a bare address, which is a host
//     prefix (/32 or /128), as Felix's ip.ParseCIDROrIP reads it
//     (libcalico-go/lib/net/ipnet.go). Nothing is trimmed: " 10.0.0.1" is
//     not an address, as for Go's and Felix's parsers.
//   - An IPv4-mapped IPv6 address is IPv4: ::ffff:10.0.0.1 is 10.0.0.1, and
//     a mapped prefix of /96 or longer is the IPv4 prefix it maps
//     (::ffff:10.0.0.0/104 is 10.0.0.0/8). A mapped prefix shorter than /96
//     reaches outside the mapped range and stays IPv6. The kernel never
//     sees a mapped address on an IPv4 packet, so a mapped IPv6 match would
//     never match what the author meant.
//   - Zones ("fe80::1%eth0") are refused: a set, route or rule has nowhere
//     to put one.
//   - Host bits: ParseCIDR keeps them (10.0.0.1/24 stays 10.0.0.1/24: a
//     workload's ARP rules need the address); ParseNet masks them
//     (10.0.0.0/24: routes, set elements and rule matches are networks).
//     Each consumer picks the one it needs; the verdict is the same.
//   - IP-set members (ParseMember): NET members are CIDRs, masked; IP
//     members are addresses (a host prefix like 10.0.0.1/32 is one); an
//     IP_AND_PORT member is "<address>,<tcp|udp|sctp>:<port>" with the same
//     address rule ("10.0.0.1,tcp:80", "10.0.0.1/32,tcp:80",
//     "fd00::1,udp:53"); the protocol is matched case-insensitively.
//   - Interface names (CheckIfaceName): 1 to 15 bytes (IFNAMSIZ-1) of
//     printable ASCII without whitespace, '/', ':', quotes, backslashes or
//     '*': the names Linux allows that nft can match without quoting.
//     nft.ValidateIfName applies the same rule to what reaches the table;
//     a test keeps the two in step.
//   - MAC addresses are what Go's net.ParseMAC accepts, as in Felix's
//     endpoint manager (felix/dataplane/linux/endpoint_mgr.go).
//
// Comments are not parsed here: nft.SanitizeComment is the one sanitiser,
// and nft's validator only refuses what it cannot print back.
//
// It also holds the interface monitor's vocabulary (IfaceState,
// InterfaceStateUpdate, InterfaceAddrsUpdate: Felix's ifacemonitor
// updates), so that package routes, which emits them, and package
// endpoints, which takes them, share one type.
//
// Errors are *FieldError values naming the field as protojson spells it
// (the state file's words: "ipv4Nets[1]", "mac"); callers prefix the
// object ("endpoint.", or the endpoint's ID).
package felix
