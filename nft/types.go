// Package nft owns one nftables table and keeps the kernel in step with a
// desired-state model of it.
//
// The model (Model, Chain, Rule, Set, Element) is a plain Go value that the
// managers fill in. Table remembers what was last programmed and turns the
// difference into one atomic nf_tables transaction: a netlink batch the
// engine frames and sends itself (conn.go, table.go), not through a
// google/nftables Conn, whose expression marshalling it reuses. A very
// large transaction, such as a cold start of thousands of endpoints, is
// prepared in several batches, of which only the last makes anything live
// (see Table.Apply).
// The vocabulary of matches and actions is exactly what nftep renders; each
// type knows how to validate itself, print itself in nft syntax (the text
// `nft list table` shows) and encode itself as kernel expressions.
//
// Objects put into a Model are treated as immutable: to change a chain, build
// a new *Chain and SetChain it. That lets Table compare chains by pointer and
// by a cached content hash instead of rule by rule.
package nft

import (
	"net/netip"
)

// Family is an nftables address family, spelled as nft spells it.
type Family string

const (
	// FamilyINet is the dual-stack family of nftep's main table.
	FamilyINet Family = "inet"
	// FamilyARP is the family of the small ARP-suppression table: the inet
	// family cannot see ARP packets.
	FamilyARP Family = "arp"
)

// Hook is the netfilter hook of a base chain, spelled as nft spells it.
type Hook string

const (
	HookPrerouting  Hook = "prerouting"
	HookInput       Hook = "input"
	HookForward     Hook = "forward"
	HookOutput      Hook = "output"
	HookPostrouting Hook = "postrouting"
)

// Standard base-chain priorities (nft's named priorities for the inet family).
const (
	PriorityRaw    = -300
	PriorityMangle = -150
	PriorityFilter = 0
)

// ChainType is the type of a base chain.
type ChainType string

const (
	// ChainTypeFilter is the only chain type nftep uses.
	ChainTypeFilter ChainType = "filter"
)

// Policy is a base chain's default verdict.
type Policy string

const (
	PolicyAccept Policy = "accept"
	PolicyDrop   Policy = "drop"
)

// BaseChain holds the hook fields that make a chain a base chain.
type BaseChain struct {
	Type     ChainType
	Hook     Hook
	Priority int
	Policy   Policy
}

// Chain is a chain and its rules, in order.
type Chain struct {
	// Name is unique within the table: at most 255 bytes, characters nft
	// prints unquoted (letters, digits, '-', '_', '.', '/').
	Name string
	// Base is set only for base chains; regular chains leave it nil.
	Base *BaseChain
	// Rules run in order.
	Rules []*Rule
	// Comment is kept in our model only (chain comments need a newer
	// google/nftables); the printer does not emit it.
	Comment string

	hash string // cached content hash, see Chain.Hash
}

// Rule is a list of matches, all of which must hold, followed by an optional
// counter and one action.
type Rule struct {
	Match   []Match
	Counter bool
	Action  Action
	// Comment says why the rule exists; it is stored in the rule's userdata
	// and shown by `nft list` as `comment "..."`. At most 128 bytes.
	Comment string
}

// Direction selects the input or the output interface, or the source or the
// destination address or port.
type Direction uint8

const (
	In  Direction = iota // iifname / saddr / sport
	Out                  // oifname / daddr / dport
)

// IPFamily is the address family of an address match.
type IPFamily uint8

const (
	IPv4 IPFamily = 4
	IPv6 IPFamily = 6
)

// Match is one condition of a rule. The concrete types below are the whole
// vocabulary.
type Match interface{ isMatch() }

// IfName matches the input (In) or output (Out) interface name: `iifname
// "cali12ab"`, or with Wildcard `iifname "cali*"` (a prefix match).
type IfName struct {
	Dir      Direction
	Name     string // at most 15 bytes (IFNAMSIZ-1), without the '*'
	Wildcard bool
	Negate   bool
}

// Addr matches the source (In) or destination (Out) address of the given
// family. Exactly one of Prefixes or Set is used: a single prefix is a plain
// compare (`ip saddr 10.0.0.0/24`), several form an anonymous set (`ip saddr
// { 10.0.0.0/24, 10.1.0.1 }`), and Set names a set of the table (`ip saddr
// @filter-ipset-x`). The match implies the family (`meta nfproto`).
type Addr struct {
	Family   IPFamily
	Dir      Direction
	Prefixes []netip.Prefix
	Set      string
	Negate   bool
}

// NFProto matches the packet's layer-3 family: `meta nfproto ipv4`.
type NFProto struct {
	Family IPFamily
}

// L4Proto matches the layer-4 protocol: `meta l4proto tcp`, or with several
// protocols `meta l4proto { tcp, udp }`.
type L4Proto struct {
	Protos []uint8
	Negate bool
}

// PortRange is an inclusive range of ports; First == Last for one port.
type PortRange struct {
	First, Last uint16
}

// Port matches the transport source (In) or destination (Out) port: `th
// dport 22`, `th dport 1000-2000`, `th dport { 22, 80-90 }` or a named set
// `th dport @set`. The rule must also match an L4Proto with ports.
type Port struct {
	Dir    Direction
	Ranges []PortRange
	Set    string
	Negate bool
}

// ICMP matches an ICMP (Family IPv4) or ICMPv6 (IPv6) type and optionally its
// code: `icmp type echo-request`, `icmpv6 type 135 code 0`.
type ICMP struct {
	Family IPFamily
	Type   uint8
	Code   *uint8
	Negate bool
}

// CtState is a set of conntrack states.
type CtState uint32

// Conntrack state bits as the kernel defines them (NF_CT_STATE_*_BIT).
const (
	CtStateInvalid     CtState = 1 << 0
	CtStateEstablished CtState = 1 << 1
	CtStateRelated     CtState = 1 << 2
	CtStateNew         CtState = 1 << 3
	CtStateUntracked   CtState = 1 << 6
)

// CtStateMatch matches when the packet's conntrack state is any of States:
// `ct state established,related`. Negate matches when it is none of them.
type CtStateMatch struct {
	States CtState
	Negate bool
}

// CtStatus is a set of conntrack status bits.
type CtStatus uint32

// Conntrack status bits (IPS_*).
const (
	CtStatusSNAT CtStatus = 1 << 4
	CtStatusDNAT CtStatus = 1 << 5
)

// CtStatusMatch matches when any of Status is set: `ct status dnat`; Negate
// when none is.
type CtStatusMatch struct {
	Status CtStatus
	Negate bool
}

// CtCount matches when the number of connections tracked for this rule's
// flows is over Over: `ct count over 10`.
type CtCount struct {
	Over uint32
}

// Mark matches the packet mark under a mask: `meta mark & 0x00010000 ==
// 0x00010000`. A zero Mask means the whole mark. Negate turns == into !=.
type Mark struct {
	Mask   uint32
	Value  uint32
	Negate bool
}

// RPF matches packets that fail a strict reverse-path check: `fib saddr .
// mark . iif oif 0` — no route back to the source through the input
// interface (taking the mark into account).
type RPF struct{}

// Limit matches while the packet rate is over Rate per second (with Burst
// packets of slack): `limit rate over 100/second burst 5 packets`.
type Limit struct {
	Rate  uint64
	Burst uint32
}

// Selector is a packet field that can be looked up in a set or map.
type Selector string

// The selectors nftep uses, spelled as nft spells them.
const (
	SelIIFName  Selector = "iifname"
	SelOIFName  Selector = "oifname"
	SelIPSaddr  Selector = "ip saddr"
	SelIPDaddr  Selector = "ip daddr"
	SelIP6Saddr Selector = "ip6 saddr"
	SelIP6Daddr Selector = "ip6 daddr"
	SelL4Proto  Selector = "meta l4proto"
	SelTHSport  Selector = "th sport"
	SelTHDport  Selector = "th dport"
	SelMark     Selector = "meta mark"
)

// Lookup matches when the concatenation of Keys is (or with Negate, is not) in
// the named set: `iifname . ip saddr @raw-rpf-skip-v4`. The set's key type
// must be the concatenation of the selectors' types. The set may be a map of
// any data type; the lookup then tests only whether the key is in the map
// (`iifname != @filter-from-wl`) and ignores its value.
type Lookup struct {
	Keys   []Selector
	Set    string
	Negate bool
}

// ARP operations (the oper field of an ARP packet) that nft names: `arp
// operation request`. Other values print as decimal numbers.
const (
	ARPOpRequest   uint16 = 1
	ARPOpReply     uint16 = 2
	ARPOpRRequest  uint16 = 3 // RARP
	ARPOpRReply    uint16 = 4
	ARPOpInRequest uint16 = 8 // InARP
	ARPOpInReply   uint16 = 9
	ARPOpNAK       uint16 = 10
)

// ARPOperation matches an ARP packet's operation: `arp operation reply`,
// with Negate `arp operation != reply`. Only in arp-family tables.
type ARPOperation struct {
	Op     uint16
	Negate bool
}

// ARPSenderIP matches an ARP packet's sender protocol address: `arp saddr
// ip 10.0.0.1`, with Negate `arp saddr ip != 10.0.0.1`. IPv4 only, and only
// in arp-family tables. Like nft, it reads the address at the offset of an
// Ethernet/IPv4 ARP packet (hardware address length 6) without checking the
// header's hardware type or lengths.
type ARPSenderIP struct {
	Addr   netip.Addr
	Negate bool
}

func (IfName) isMatch()        {}
func (Addr) isMatch()          {}
func (NFProto) isMatch()       {}
func (L4Proto) isMatch()       {}
func (Port) isMatch()          {}
func (ICMP) isMatch()          {}
func (CtStateMatch) isMatch()  {}
func (CtStatusMatch) isMatch() {}
func (CtCount) isMatch()       {}
func (Mark) isMatch()          {}
func (RPF) isMatch()           {}
func (Limit) isMatch()         {}
func (Lookup) isMatch()        {}
func (ARPOperation) isMatch()  {}
func (ARPSenderIP) isMatch()   {}

// Action is what a rule does once its matches hold. Verdicts end the chain
// (or jump); the statements SetMark, Notrack, Log and NFLog let the packet go
// on to the next rule.
type Action interface{ isAction() }

// VerdictKind is an nftables verdict.
type VerdictKind string

const (
	Accept VerdictKind = "accept"
	Drop   VerdictKind = "drop"
	Return VerdictKind = "return"
	Jump   VerdictKind = "jump"
	Goto   VerdictKind = "goto"
)

// Verdict ends rule evaluation: accept, drop, return, or jump/goto Chain.
type Verdict struct {
	Kind  VerdictKind
	Chain string // for Jump and Goto only
}

// RejectWith selects what a reject sends back.
type RejectWith string

const (
	// RejectTCPReset answers with a TCP RST (`reject with tcp reset`); the
	// rule must match TCP.
	RejectTCPReset RejectWith = "tcp reset"
	// RejectICMPPortUnreachable answers with the family's port-unreachable
	// (`reject`, nft's default).
	RejectICMPPortUnreachable RejectWith = ""
	// RejectICMPAdminProhibited answers with the family's
	// administratively-prohibited code (`reject with icmpx admin-prohibited`).
	RejectICMPAdminProhibited RejectWith = "icmpx admin-prohibited"
)

// Reject drops the packet and tells the sender.
type Reject struct {
	With RejectWith
}

// VMap looks the selector up in a verdict map and applies the verdict it
// finds: `iifname vmap @filter-from-wl`. With no element for the key the
// rule does nothing and evaluation goes on.
//
// Mask, for the SelMark key only, looks up the mark's bits under the mask
// instead of the whole mark: `meta mark & 0xffe00000 vmap @m`, so bits
// other users set outside the mask do not make the lookup miss. 0 (and
// 0xffffffff, which nft prints the same way) means the whole mark.
type VMap struct {
	Key  Selector
	Map  string
	Mask uint32
}

// SetMark rewrites the packet mark as mark = (mark & And) ^ Xor. Setting a
// field under a mask is And = ^mask, Xor = value; clearing bits is And =
// ^bits, Xor = 0; setting bits is And = ^bits, Xor = bits.
type SetMark struct {
	And uint32
	Xor uint32
}

// SetMarkFromMap sets the whole mark to the value a data map holds for the
// selector: `meta mark set iifname map @filter-endpoint-mark`.
//
// There is no masked form (`meta mark set meta mark & ~mask | iifname map
// @m`): nft 1.0.6 refuses it ("Right hand side of binary operation (|) must
// be constant"). Kernels from 6.13 could run it as a bitwise with a second
// source register (NFTA_BITWISE_SREG2), but nft 1.0.6 could not list such
// a rule, so nftep does not program it.
type SetMarkFromMap struct {
	Key Selector
	Map string
}

// Notrack exempts the packet from connection tracking (raw layer only).
type Notrack struct{}

// Log logs the packet to the kernel log with Prefix.
type Log struct {
	Prefix string
}

// NFLog sends the packet to nflog Group with Prefix (at most 63 bytes).
type NFLog struct {
	Group  uint16
	Prefix string
}

func (Verdict) isAction()        {}
func (Reject) isAction()         {}
func (VMap) isAction()           {}
func (SetMark) isAction()        {}
func (SetMarkFromMap) isAction() {}
func (Notrack) isAction()        {}
func (Log) isAction()            {}
func (NFLog) isAction()          {}

// KeyType is the type of one field of a set key, spelled as nft spells it.
type KeyType string

const (
	TypeIfName      KeyType = "ifname"
	TypeIPv4Addr    KeyType = "ipv4_addr"
	TypeIPv6Addr    KeyType = "ipv6_addr"
	TypeMark        KeyType = "mark"
	TypeInetProto   KeyType = "inet_proto"
	TypeInetService KeyType = "inet_service"
)

// DataType is the type of a map's values.
type DataType string

const (
	// DataNone marks a plain set.
	DataNone DataType = ""
	// DataVerdict makes a verdict map (vmap).
	DataVerdict DataType = "verdict"
	// DataMark makes a map whose values are packet marks.
	DataMark DataType = "mark"
)

// Set is a named set or map of the table.
type Set struct {
	// Name follows the same rules as chain names; sets and chains have
	// separate namespaces in nftables, but nftep never reuses a name.
	Name string
	// Key is the key's type; several fields make a concatenation
	// (`ifname . ipv4_addr`).
	Key []KeyType
	// Data is DataNone for a set, otherwise the map's value type.
	Data DataType
	// Interval allows prefix and range keys (`flags interval`).
	Interval bool
	// Comment is shown by `nft list` on the set.
	Comment string
	// Elements are keyed by Element.Key.
	Elements map[string]Element
}

// Element is one member of a set or map.
//
// Key is written in nft syntax without quotes, fields of a concatenation
// separated by " . ": `cali12ab`, `10.65.0.0/24`, `cali1 . 10.65.0.7/32`,
// `10.0.0.1 . tcp . 8080`, `0x00010000`. For an interval set a field may be a
// prefix or a range (`1000-2000`).
type Element struct {
	Key string
	// Verdict is the value of a verdict-map element.
	Verdict *Verdict
	// Mark is the value of a mark-map element.
	Mark uint32
	// Comment is shown by `nft list` after the element (at most 128 bytes).
	Comment string
}
