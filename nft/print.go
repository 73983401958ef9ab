package nft

// nft-syntax printing. Model.String is exactly what `nft list table <family>
// <name>` (nft 1.0.6) prints after nftep created the table cold, byte for
// byte with nft's tabs; TestVocabKernel holds us to it.
//
// Ordering contract. nft lists a table's sets (and maps) first, then its
// chains, each group in the kernel's order, which is creation order. The
// printer orders them as Model.PrintOrder returns:
//
//   - sets and maps sorted by name;
//   - then base chains sorted by name, then regular chains sorted by name.
//
// So a cold apply must create the sets in that order and the chains in that
// order. Elements and rules do not affect it; elements go after the chains
// (a vmap element's jump needs its chain), rules last. Within a set, send
// the elements in encodeElements' order (it matters for concatenated
// interval sets, which nft lists in insertion order). Objects added later by incremental applies are listed by nft
// at the end; after a full recreate the orders agree again. Elements are
// ordered as nft orders them (see sortElements); rules keep their order.

import (
	"bufio"
	"fmt"
	"io"
	"net/netip"
	"sort"
	"strconv"
	"strings"
)

// PrintOrder returns the names of m's sets and chains in the order String
// prints them, which is the order a cold apply must create them in for `nft
// list table` to match String.
func (m *Model) PrintOrder() (sets, chains []string) {
	sets = m.SetNames()
	var base, regular []string
	for _, name := range m.ChainNames() {
		if m.chains[name].Base != nil {
			base = append(base, name)
		} else {
			regular = append(regular, name)
		}
	}
	return sets, append(base, regular...)
}

// String returns the table as `nft list table` prints it.
func (m *Model) String() string {
	sets, chains := m.PrintOrder()
	var b strings.Builder
	m.printInOrder(&b, sets, chains)
	return b.String()
}

// Print writes what String returns to w, a piece at a time: a table of
// 10,000 endpoints prints to about 85 MB, which need not be one string in
// memory on its way to a file.
func (m *Model) Print(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	sets, chains := m.PrintOrder()
	m.printInOrder(bw, sets, chains)
	return bw.Flush()
}

// stringInOrder prints the table with the named sets and chains, in the
// order given.
func (m *Model) stringInOrder(sets, chains []string) string {
	var b strings.Builder
	m.printInOrder(&b, sets, chains)
	return b.String()
}

// textWriter is where the printer writes: a strings.Builder or a
// bufio.Writer (whose errors it keeps until Flush).
type textWriter interface {
	io.Writer
	WriteString(s string) (int, error)
	WriteByte(c byte) error
}

func (m *Model) printInOrder(b textWriter, sets, chains []string) {
	b.WriteString("table ")
	b.WriteString(string(m.Family))
	b.WriteByte(' ')
	b.WriteString(m.Name)
	b.WriteString(" {\n")
	first := true
	sep := func() {
		if !first {
			b.WriteString("\n")
		}
		first = false
	}
	for _, name := range sets {
		sep()
		m.sets[name].write(b, "\t")
	}
	for _, name := range chains {
		sep()
		m.chains[name].write(b, "\t", m.Family)
	}
	b.WriteString("}\n")
}

// String returns the chain as `nft list chain` prints it inside its table,
// one indentation level less. Priorities print with the inet family's
// names; Model.String uses the table's family.
func (c *Chain) String() string {
	var b strings.Builder
	c.write(&b, "", FamilyINet)
	return b.String()
}

func (c *Chain) write(b textWriter, indent string, family Family) {
	// Plain writes, not fmt: a table of 10,000 endpoints has 240,000
	// rules.
	b.WriteString(indent)
	b.WriteString("chain ")
	b.WriteString(c.Name)
	b.WriteString(" {\n")
	if base := c.Base; base != nil {
		fmt.Fprintf(b, "%s\ttype %s hook %s priority %s; policy %s;\n",
			indent, base.Type, base.Hook, priorityString(family, base.Hook, base.Priority), basePolicy(base))
	}
	for _, r := range c.Rules {
		b.WriteString(indent)
		b.WriteByte('\t')
		b.WriteString(r.String())
		b.WriteByte('\n')
	}
	b.WriteString(indent)
	b.WriteString("}\n")
}

// stdPriorities are nft's named base-chain priorities (rule.c std_prios).
var stdPriorities = []struct {
	name string
	val  int
}{
	{"raw", -300},
	{"mangle", -150},
	{"dstnat", -100},
	{"filter", 0},
	{"security", 50},
	{"srcnat", 100},
}

// priorityString prints a base-chain priority as nft's prio2str does: the
// name of a standard priority valid for the family and hook, with an offset
// of at most 10 (`filter - 10`), else the number.
func priorityString(family Family, hook Hook, prio int) string {
	for _, p := range stdPriorities {
		if !priorityValid(p.name, family, hook) {
			continue
		}
		off := prio - p.val
		switch {
		case off == 0:
			return p.name
		case off > 0 && off <= 10:
			return fmt.Sprintf("%s + %d", p.name, off)
		case off < 0 && off >= -10:
			return fmt.Sprintf("%s - %d", p.name, -off)
		}
	}
	return strconv.Itoa(prio)
}

// priorityValid mirrors nft's std_prio_family_hook_compat.
func priorityValid(name string, family Family, hook Hook) bool {
	switch name {
	case "filter":
		return true
	case "raw", "mangle", "security":
		return family == FamilyINet
	case "dstnat":
		return family == FamilyINet && hook == HookPrerouting
	case "srcnat":
		return family == FamilyINet && hook == HookPostrouting
	}
	return false
}

// String returns the set or map as `nft list set` prints it inside its
// table, one indentation level less.
func (s *Set) String() string {
	var b strings.Builder
	s.write(&b, "")
	return b.String()
}

func (s *Set) write(b textWriter, indent string) {
	kind := "set"
	typ := keyTypeString(s.Key)
	if s.Data != DataNone {
		kind = "map"
		typ += " : " + string(s.Data)
	}
	w := b
	fmt.Fprintf(w, "%s%s %s {\n", indent, kind, s.Name)
	fmt.Fprintf(w, "%s\ttype %s\n", indent, typ)
	if s.Interval {
		fmt.Fprintf(w, "%s\tflags interval\n", indent)
	}
	if s.Comment != "" {
		fmt.Fprintf(w, "%s\tcomment %s\n", indent, quote(s.Comment))
	}
	if len(s.Elements) > 0 {
		fmt.Fprintf(w, "%s\telements = %s\n", indent, s.elementsString(indent))
	}
	fmt.Fprintf(w, "%s}\n", indent)
}

// SortedElements returns the set's elements in the order `nft list` prints
// them (an element whose key does not parse sorts by its key text, as the
// printer shows it).
func (s *Set) SortedElements() []Element {
	es := make([]Element, 0, len(s.Elements))
	for _, e := range s.Elements {
		es = append(es, e)
	}
	sorted, err := sortElements(s, es)
	if err != nil {
		sortElementsByKey(es)
		return es
	}
	for i, e := range sorted {
		es[i] = e.Element
	}
	return es
}

// elementsString prints the elements as nft does: sorted (sortElements),
// and wrapped as expression.c calculate_delim wraps them, a fixed number per
// line by key type.
func (s *Set) elementsString(indent string) string {
	es := make([]Element, 0, len(s.Elements))
	for _, e := range s.Elements {
		es = append(es, e)
	}
	sorted, err := sortElements(s, es)
	if err != nil {
		// An invalid key: print the keys as they are, sorted, so that the
		// output still shows what the model holds.
		sort.Slice(es, func(i, j int) bool { return es[i].Key < es[j].Key })
		sorted = make([]parsedElement, len(es))
		for i, e := range es {
			sorted[i] = parsedElement{Element: e}
		}
	}
	perLine := 1
	if len(s.Key) == 1 {
		perLine = keyTypes[s.Key[0]].perLine
	}
	newline := ",\n" + indent + "\t\t     "
	var b strings.Builder
	b.WriteString("{ ")
	for i, e := range sorted {
		if i > 0 {
			if perLine > 1 && i%perLine != 0 {
				b.WriteString(", ")
			} else {
				b.WriteString(newline)
			}
		}
		b.WriteString(s.elementString(e))
	}
	b.WriteString(" }")
	return b.String()
}

func (s *Set) elementString(e parsedElement) string {
	var b strings.Builder
	b.WriteString(s.keyString(e))
	if e.Comment != "" {
		b.WriteString(" comment " + quote(e.Comment))
	}
	switch s.Data {
	case DataVerdict:
		if e.Verdict != nil {
			b.WriteString(" : " + e.Verdict.String())
		}
	case DataMark:
		fmt.Fprintf(&b, " : 0x%08x", e.Mark)
	}
	return b.String()
}

// keyString prints a key as nft does: interface names quoted.
func (s *Set) keyString(e parsedElement) string {
	parts := strings.Split(e.Key, concatSep)
	for i, p := range parts {
		if i < len(s.Key) && s.Key[i] == TypeIfName {
			parts[i] = quote(p)
		}
	}
	return strings.Join(parts, concatSep)
}

// ruleContext follows a rule the way nft's delinearizer does (rule
// postprocessing in netlink_delinearize.c): it remembers the protocol
// context established so far and the dependency statements it may still
// remove. nft drops `meta nfproto ipv4` once an `ip ...` match (or an
// icmp match) relies on it, and drops `meta l4proto tcp` once a port match
// relies on it, printing that as `tcp dport` instead of `th dport`.
type ruleContext struct {
	parts   []string
	nfDep   int // index in parts of a removable `meta nfproto`, or -1
	nfDepF  IPFamily
	l4Dep   int // index in parts of a removable `meta l4proto P`, or -1
	l4proto int // protocol established by `meta l4proto P`, or -1
	// family is the family the encoder's context holds (encoder.nfproto):
	// set by an NFProto, address or ICMP match or an address selector.
	family IPFamily
}

func (c *ruleContext) killFamily(f IPFamily) {
	if c.nfDep >= 0 && c.nfDepF == f {
		c.parts[c.nfDep] = ""
	}
	c.nfDep = -1
}

func (c *ruleContext) killL4() {
	if c.l4Dep >= 0 {
		c.parts[c.l4Dep] = ""
	}
	c.l4Dep = -1
}

// String returns the rule on one line as nft prints it, comment included.
func (r *Rule) String() string {
	c := &ruleContext{nfDep: -1, l4Dep: -1, l4proto: -1}
	for _, m := range r.Match {
		if m == nil {
			c.parts = append(c.parts, "<nil match>")
			continue
		}
		c.parts = append(c.parts, m.printMatch(c))
	}
	if r.Counter {
		// nft lists the live counter; a freshly created table has zeros.
		c.parts = append(c.parts, "counter packets 0 bytes 0")
	}
	if r.Action != nil {
		c.parts = append(c.parts, r.Action.printAction(c))
	}
	if r.Comment != "" {
		c.parts = append(c.parts, "comment "+quote(r.Comment))
	}
	out := c.parts[:0]
	for _, p := range c.parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, " ")
}

func neq(negate bool) string {
	if negate {
		return "!= "
	}
	return ""
}

func familyWord(f IPFamily) string {
	if f == IPv6 {
		return "ip6"
	}
	return "ip"
}

func dirWord(d Direction, in, out string) string {
	if d == Out {
		return out
	}
	return in
}

// portProtos are the layer-4 protocols nft names in `P dport` once a `meta
// l4proto P` established them (proto.c: tcp, udp, udplite, sctp, dccp).
var portProtos = map[int]string{6: "tcp", 17: "udp", 33: "dccp", 132: "sctp", 136: "udplite"}

// transport names the transport header of a port match and drops the `meta
// l4proto` it relies on.
func (c *ruleContext) transport() string {
	name, ok := portProtos[c.l4proto]
	if !ok {
		return "th"
	}
	c.killL4()
	return name
}

// selector prints a selector inside a lookup or map key, with the same
// dependency handling as a match on the field.
func (c *ruleContext) selector(k Selector) string {
	switch k {
	case SelIPSaddr, SelIPDaddr:
		c.killFamily(IPv4)
		c.family = IPv4
	case SelIP6Saddr, SelIP6Daddr:
		c.killFamily(IPv6)
		c.family = IPv6
	case SelTHSport:
		return c.transport() + " sport"
	case SelTHDport:
		return c.transport() + " dport"
	}
	return string(k)
}

// prefixString prints a prefix as nft does: a whole address without /32 or
// /128.
func prefixString(p netip.Prefix) string {
	p = p.Masked()
	if p.Bits() == p.Addr().BitLen() {
		return p.Addr().String()
	}
	return p.String()
}

// anonSetString prints an anonymous set: always on one line.
func anonSetString(items []string) string {
	return "{ " + strings.Join(items, ", ") + " }"
}

// protoNames are the names getprotobynumber(3) returns with Debian's
// netbase /etc/protocols, which nft uses to print layer-4 protocols. A host
// without the file (or with another one) makes nft print other names or
// numbers; nftep prints these.
var protoNames = map[uint8]string{
	0: "hopopt", 1: "icmp", 2: "igmp", 3: "ggp", 4: "ipencap", 5: "st", 6: "tcp", 8: "egp",
	9: "igp", 12: "pup", 17: "udp", 20: "hmp", 22: "xns-idp", 27: "rdp", 29: "iso-tp4",
	33: "dccp", 36: "xtp", 37: "ddp", 38: "idpr-cmtp", 41: "ipv6", 43: "ipv6-route",
	44: "ipv6-frag", 45: "idrp", 46: "rsvp", 47: "gre", 50: "esp", 51: "ah", 57: "skip",
	58: "ipv6-icmp", 59: "ipv6-nonxt", 60: "ipv6-opts", 73: "rspf", 81: "vmtp", 88: "eigrp",
	89: "ospf", 93: "ax.25", 94: "ipip", 97: "etherip", 98: "encap", 103: "pim", 108: "ipcomp",
	112: "vrrp", 115: "l2tp", 124: "isis", 132: "sctp", 133: "fc", 135: "mobility-header",
	136: "udplite", 137: "mpls-in-ip", 138: "manet", 139: "hip", 140: "shim6", 141: "wesp",
	142: "rohc", 143: "ethernet",
}

func protoName(p uint8) string {
	if n, ok := protoNames[p]; ok {
		return n
	}
	return strconv.Itoa(int(p))
}

// protoByName accepts a protocol name or number.
func protoByName(s string) (uint8, bool) {
	for p, n := range protoNames {
		if n == s {
			return p, true
		}
	}
	v, err := strconv.ParseUint(s, 10, 8)
	return uint8(v), err == nil
}

func symbolOr(names map[uint8]string, v uint8) string {
	if n, ok := names[v]; ok {
		return n
	}
	return strconv.Itoa(int(v))
}

// quote puts s between double quotes as nft does: verbatim, with no
// escaping (validation keeps quotes and backslashes out of such strings).
func quote(s string) string { return `"` + s + `"` }
