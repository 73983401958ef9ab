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
	// PrioritySrcNAT is nft's srcnat (100), where source NAT runs at
	// postrouting; nftep's nat chain runs at srcnat + 10, after
	// kube-proxy's.
	PrioritySrcNAT = 100
)

// ChainType is the type of a base chain.
type ChainType string

const (
	// ChainTypeFilter is the type of every base chain but the nat one.
	ChainTypeFilter ChainType = "filter"
	// ChainTypeNAT sees the first packet of each connection only; its
	// rules may masquerade or snat. In the inet family it needs kernel
	// 5.2 or later.
	ChainTypeNAT ChainType = "nat"
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
	// SelARPSaddrIP is an ARP packet's sender IPv4 address (arp tables
	// only; read as ARPSenderIP reads it).
	SelARPSaddrIP Selector = "arp saddr ip"
)

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
