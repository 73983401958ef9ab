package nft

// Validation, knftables-style: the engine checks every object when it is
// queued, so a bad object is reported with its name before anything reaches
// the kernel (whose errors name no object: nfnetlink_rcv_batch answers a
// failing message with an errno and that message's sequence number).
//
// The entry points, for the engine and for tests:
//
//   - validateChain(m, c): the chain and each of its rules; references to
//     chains and sets are checked against m (skipped when m is nil);
//   - validateSet(m, s): the set's definition and all its elements;
//   - validateElement(m, s, e): one element, as queued alone;
//   - Model.Validate: everything in the model.
//
// Errors name the object: `chain "filter-tw-cali12ab": rule 3: jump to
// unknown chain "filter-pi-default.deny"`, `set "x": element "cali1": ...`.

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Limits from nf_tables.h and nft.
const (
	maxNameLen      = 255 // NFT_NAME_MAXLEN - 1
	maxIfNameLen    = 15  // IFNAMSIZ - 1
	maxCommentLen   = 128 // NFT_USERDATA_MAXLEN leaves room; nft refuses longer comments
	maxLogPrefixLen = 127 // NF_LOG_PREFIXLEN - 1
	maxNFLogPrefix  = 63  // nfnetlink_log copies at most 64 bytes with the NUL
	maxConcatFields = 5   // google/nftables ConcatSetType: 6 bits per type in 32
)

// ErrInvalid matches (with errors.Is) every validation error, so callers
// can tell a bad model from a kernel failure. It does not show in the
// messages.
var ErrInvalid = errors.New("invalid nftables object")

// validationError is a validation error: its text is the message alone.
type validationError struct{ err error }

func (e *validationError) Error() string        { return e.err.Error() }
func (e *validationError) Unwrap() error        { return e.err }
func (e *validationError) Is(target error) bool { return target == ErrInvalid }

func invalidf(format string, args ...any) error {
	return &validationError{fmt.Errorf(format, args...)}
}

// asInvalid marks err as a validation error unless it already is one.
func asInvalid(err error) error {
	if errors.Is(err, ErrInvalid) {
		return err
	}
	return &validationError{err}
}

// Validate checks every set and chain of m, in print order, and returns the
// first error.
func (m *Model) Validate() error {
	sets, chains := m.PrintOrder()
	for _, name := range sets {
		if err := validateSet(m, m.sets[name]); err != nil {
			return err
		}
	}
	for _, name := range chains {
		if err := validateChain(m, m.chains[name]); err != nil {
			return err
		}
	}
	return nil
}

// checkName accepts the names nft prints without quotes: a letter, then
// letters, digits and "_./-", at most 255 bytes.
func checkName(name string) error {
	if name == "" {
		return invalidf("empty name")
	}
	if len(name) > maxNameLen {
		return invalidf("name is %d bytes, more than %d", len(name), maxNameLen)
	}
	for i, c := range []byte(name) {
		letter := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
		if i == 0 && !letter {
			return invalidf("name %q does not start with a letter", name)
		}
		if !letter && !('0' <= c && c <= '9') && !bytes.ContainsRune([]byte("_./-"), rune(c)) {
			return invalidf("name %q has %s, which nft would quote", name, quoteByte(c))
		}
	}
	return nil
}

// quoteByte names the byte c of a name for an error message: an ASCII byte
// as a quoted character ("character '*'"), any other as the hex byte it is
// ("byte '\xc3'"), since %q of a byte would print it as the Latin-1 letter
// of that code point ('Ã'), a character the name does not have.
func quoteByte(c byte) string {
	if c < utf8.RuneSelf {
		return "character " + strconv.QuoteRune(rune(c))
	}
	return fmt.Sprintf(`byte '\x%02x'`, c)
}

// checkText accepts comments and log prefixes that nft prints back as they
// are between double quotes: printable, without quotes or backslashes.
func checkText(what, s string, max int) error {
	if len(s) > max {
		return invalidf("%s is %d bytes, more than %d", what, len(s), max)
	}
	for _, c := range s {
		if c < 0x20 || c == 0x7f || c == '"' || c == '\\' {
			return invalidf("%s %q has character %q, which nft cannot print back", what, s, c)
		}
	}
	return nil
}

// checkIfName accepts an interface name (wild: a prefix of one) that Linux
// allows and nft prints as is: at most 15 bytes, printable, no whitespace,
// '/', ':', quotes, backslashes or '*'.
func checkIfName(name string, wild bool) error {
	if name == "" {
		if wild {
			return invalidf("empty interface name prefix (a wildcard needs at least one character)")
		}
		return invalidf("empty interface name")
	}
	if len(name) > maxIfNameLen {
		return invalidf("interface name %q is %d bytes, more than %d", name, len(name), maxIfNameLen)
	}
	for _, c := range []byte(name) {
		if c <= 0x20 || c >= 0x7f || bytes.IndexByte([]byte(`/:"\*`), c) >= 0 {
			return invalidf("interface name %q has %s", name, quoteByte(c))
		}
	}
	return nil
}

// validateChain checks c and its rules; m (which may be nil) resolves jumps,
// gotos and set references.
func validateChain(m *Model, c *Chain) error {
	wrap := func(err error) error { return fmt.Errorf("chain %q: %w", c.Name, err) }
	if err := checkName(c.Name); err != nil {
		return wrap(err)
	}
	if err := checkText("comment", c.Comment, maxCommentLen); err != nil {
		return wrap(err)
	}
	if b := c.Base; b != nil {
		family := FamilyINet
		if m != nil {
			family = m.Family
		}
		if err := checkBase(family, b); err != nil {
			return wrap(err)
		}
	}
	for i, r := range c.Rules {
		if r == nil {
			return wrap(invalidf("rule %d is nil", i+1))
		}
		if err := validateRule(m, r); err != nil {
			return wrap(fmt.Errorf("rule %d: %w", i+1, err))
		}
	}
	return nil
}

func checkBase(family Family, b *BaseChain) error {
	if b.Type != ChainTypeFilter {
		return invalidf("base chain type %q (nftep uses only %q)", b.Type, ChainTypeFilter)
	}
	hooks := []Hook{HookPrerouting, HookInput, HookForward, HookOutput, HookPostrouting}
	if family == FamilyARP {
		hooks = []Hook{HookInput, HookOutput}
	}
	if !slices.Contains(hooks, b.Hook) {
		return invalidf("hook %q is not valid in family %s", b.Hook, family)
	}
	switch b.Policy {
	case "", PolicyAccept, PolicyDrop:
	default:
		return invalidf("policy %q", b.Policy)
	}
	return nil
}

// ruleCheck tracks what earlier matches of a rule established.
type ruleCheck struct {
	m      *Model
	family IPFamily // 0 until a match pins it
	// l4 holds the protocols an earlier non-negated L4Proto (or ICMP)
	// allows; nil when unknown.
	l4 []uint8
}

func validateRule(m *Model, r *Rule) error {
	if len(r.Match) == 0 && !r.Counter && r.Action == nil {
		return invalidf("empty rule")
	}
	if err := checkText("comment", r.Comment, maxCommentLen); err != nil {
		return err
	}
	rc := &ruleCheck{m: m}
	arp := m != nil && m.Family == FamilyARP
	for i, x := range r.Match {
		if arp && !arpMatch(x) {
			return invalidf("match %d: %T does not apply to the arp family", i+1, x)
		}
		if m != nil && !arp && arpOnly(x) {
			return invalidf("match %d: %T applies only to the arp family, not %s", i+1, x, m.Family)
		}
		if err := rc.match(x); err != nil {
			return fmt.Errorf("match %d: %w", i+1, err)
		}
	}
	if r.Action != nil {
		if arp && !arpAction(r.Action) {
			return invalidf("%T does not apply to the arp family", r.Action)
		}
		if err := rc.action(r.Action); err != nil {
			return err
		}
	}
	return nil
}

// arpMatch reports whether x makes sense in an arp-family table, which sees
// ARP packets only: no layer-3/4 headers, no conntrack.
func arpMatch(x Match) bool {
	switch x := x.(type) {
	case IfName, Mark, Limit, ARPOperation, ARPSenderIP:
		return true
	case Lookup:
		return arpSelectors(x.Keys...)
	}
	return false
}

// arpOnly reports whether x reads the ARP header, which only an arp-family
// table sees. (Without a model the family is unknown and x is accepted.)
func arpOnly(x Match) bool {
	switch x.(type) {
	case ARPOperation, ARPSenderIP:
		return true
	}
	return false
}

func arpAction(a Action) bool {
	switch a := a.(type) {
	case Verdict, SetMark, Log, NFLog:
		return true
	case VMap:
		return arpSelectors(a.Key)
	case SetMarkFromMap:
		return arpSelectors(a.Key)
	}
	return false
}

func arpSelectors(keys ...Selector) bool {
	for _, k := range keys {
		if k != SelIIFName && k != SelOIFName && k != SelMark {
			return false
		}
	}
	return true
}

func (rc *ruleCheck) pinFamily(f IPFamily) error {
	if f != IPv4 && f != IPv6 {
		return invalidf("address family %d (want 4 or 6)", f)
	}
	if rc.family != 0 && rc.family != f {
		return invalidf("IPv%d match in a rule that already matches IPv%d", f, rc.family)
	}
	rc.family = f
	return nil
}

func checkDir(d Direction) error {
	if d != In && d != Out {
		return invalidf("direction %d", d)
	}
	return nil
}

// anyData, as the data type a reference needs, accepts a set or a map of
// any data type: a Lookup only tests whether its key is in the set, so it
// may name a map (`iifname != @filter-from-wl`), a lookup without a
// destination register that the kernel and nft accept.
const anyData DataType = "\x00any"

// set checks the reference to the set called name: its key and data types
// (when the model is known).
func (rc *ruleCheck) set(name string, key []KeyType, data DataType) error {
	if err := checkName(name); err != nil {
		return err
	}
	if rc.m == nil {
		return nil
	}
	s := rc.m.Set(name)
	if s == nil {
		kind := "set"
		if data != DataNone && data != anyData {
			kind = "map"
		}
		return invalidf("reference to unknown %s %q", kind, name)
	}
	if !slices.Equal(s.Key, key) {
		return invalidf("set %q has key type %s, the match needs %s", name, keyTypeString(s.Key), keyTypeString(key))
	}
	if data != anyData && s.Data != data {
		want := string(data)
		if data == DataNone {
			want = "none (a set)"
		}
		return invalidf("set %q has data type %q, the match needs %s", name, s.Data, want)
	}
	return nil
}

// portL4 reports whether every protocol can carry ports.
func portL4(ps []uint8) bool {
	for _, p := range ps {
		if _, ok := portProtos[int(p)]; !ok {
			return false
		}
	}
	return len(ps) > 0
}

func (rc *ruleCheck) match(x Match) error {
	switch x := x.(type) {
	case IfName:
		if err := checkDir(x.Dir); err != nil {
			return err
		}
		return checkIfName(x.Name, x.Wildcard)
	case Addr:
		if err := checkDir(x.Dir); err != nil {
			return err
		}
		if err := rc.pinFamily(x.Family); err != nil {
			return err
		}
		if (x.Set == "") == (len(x.Prefixes) == 0) {
			return invalidf("address match needs exactly one of Prefixes and Set")
		}
		if x.Set != "" {
			t := TypeIPv4Addr
			if x.Family == IPv6 {
				t = TypeIPv6Addr
			}
			return rc.set(x.Set, []KeyType{t}, DataNone)
		}
		return checkPrefixes(x.Family, x.Prefixes)
	case NFProto:
		return rc.pinFamily(x.Family)
	case L4Proto:
		if len(x.Protos) == 0 {
			return invalidf("protocol match without protocols")
		}
		seen := map[uint8]bool{}
		for _, p := range x.Protos {
			if seen[p] {
				return invalidf("protocol %s listed twice", protoName(p))
			}
			seen[p] = true
		}
		if !x.Negate {
			rc.l4 = slices.Clone(x.Protos)
		}
	case Port:
		if err := checkDir(x.Dir); err != nil {
			return err
		}
		if !portL4(rc.l4) {
			return invalidf("port match needs an earlier protocol match of tcp, udp, sctp, dccp or udplite")
		}
		if (x.Set == "") == (len(x.Ranges) == 0) {
			return invalidf("port match needs exactly one of Ranges and Set")
		}
		if x.Set != "" {
			return rc.set(x.Set, []KeyType{TypeInetService}, DataNone)
		}
		return checkPortRanges(x.Ranges)
	case ICMP:
		if err := rc.pinFamily(x.Family); err != nil {
			return err
		}
		p := icmpProto(x.Family)
		if rc.l4 != nil && !slices.Equal(rc.l4, []uint8{p}) {
			return invalidf("icmp match in a rule that matches protocol %v", rc.l4)
		}
		if x.Negate && x.Code != nil {
			return invalidf("a negated icmp match with a code: nft cannot express it")
		}
		rc.l4 = []uint8{p}
	case CtStateMatch:
		return checkFlags("ct state", uint32(x.States), ctStateNames)
	case CtStatusMatch:
		return checkFlags("ct status", uint32(x.Status), ctStatusNames)
	case CtCount:
	case Mark:
		if x.Mask != 0 && x.Value&^x.Mask != 0 {
			return invalidf("mark value 0x%08x has bits outside mask 0x%08x: it never matches", x.Value, x.Mask)
		}
	case RPF:
	case Limit:
		if x.Rate == 0 {
			return invalidf("limit rate 0")
		}
	case Lookup:
		types, err := rc.selectors(x.Keys)
		if err != nil {
			return err
		}
		return rc.set(x.Set, types, anyData)
	case ARPOperation:
	case ARPSenderIP:
		if !x.Addr.Is4() {
			return invalidf("arp sender address %v is not an IPv4 address", x.Addr)
		}
	case nil:
		return invalidf("nil match")
	default:
		return invalidf("unknown match type %T", x)
	}
	return nil
}

// selectors checks a lookup or map key and returns its key types.
func (rc *ruleCheck) selectors(keys []Selector) ([]KeyType, error) {
	if len(keys) == 0 {
		return nil, invalidf("lookup without keys")
	}
	if len(keys) > maxConcatFields {
		return nil, invalidf("key of %d fields, more than %d", len(keys), maxConcatFields)
	}
	var types []KeyType
	size := 0
	for _, k := range keys {
		t, ok := selectorTypes[k]
		if !ok {
			return nil, invalidf("unknown selector %q", k)
		}
		switch k {
		case SelIPSaddr, SelIPDaddr:
			if err := rc.pinFamily(IPv4); err != nil {
				return nil, err
			}
		case SelIP6Saddr, SelIP6Daddr:
			if err := rc.pinFamily(IPv6); err != nil {
				return nil, err
			}
		}
		types = append(types, t)
		size += pad4(keyTypes[t].size)
	}
	if size > maxConcatBytes {
		return nil, invalidf("key %v is %d bytes, more than %d", keys, size, maxConcatBytes)
	}
	return types, nil
}

func checkFlags(what string, v uint32, names []flagName) error {
	if v == 0 {
		return invalidf("%s match without any bit", what)
	}
	for _, n := range names {
		v &^= n.bit
	}
	if v != 0 {
		return invalidf("%s bits 0x%x have no name in nft", what, v)
	}
	return nil
}

func checkPrefixes(f IPFamily, ps []netip.Prefix) error {
	for _, p := range ps {
		if !p.IsValid() {
			return invalidf("invalid prefix")
		}
		if p.Addr().Is4() != (f == IPv4) || p.Addr().Zone() != "" {
			return invalidf("prefix %s is not an IPv%d prefix", p, f)
		}
		if p.Masked() != p {
			return invalidf("prefix %s has host bits set (want %s)", p, p.Masked())
		}
	}
	sorted := slices.Clone(ps)
	slices.SortFunc(sorted, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
	for i := 1; i < len(sorted); i++ {
		if sorted[i-1].Overlaps(sorted[i]) {
			return invalidf("prefixes %s and %s overlap", sorted[i-1], sorted[i])
		}
	}
	return nil
}

func checkPortRanges(rs []PortRange) error {
	for _, r := range rs {
		if r.First > r.Last {
			return invalidf("port range %d-%d runs backwards", r.First, r.Last)
		}
	}
	sorted := slices.Clone(rs)
	slices.SortFunc(sorted, func(a, b PortRange) int { return int(a.First) - int(b.First) })
	for i := 1; i < len(sorted); i++ {
		if sorted[i].First <= sorted[i-1].Last {
			return invalidf("port ranges %s and %s overlap", portRangeString(sorted[i-1]), portRangeString(sorted[i]))
		}
	}
	return nil
}

// checkVerdict checks v and, when m is known, that a jump or goto target is
// a regular chain of m (the kernel refuses jumps to base chains with
// EOPNOTSUPP and to missing chains with ENOENT).
func checkVerdict(m *Model, v Verdict) error {
	switch v.Kind {
	case Accept, Drop, Return:
		if v.Chain != "" {
			return invalidf("%s verdict with a chain (%q)", v.Kind, v.Chain)
		}
		return nil
	case Jump, Goto:
		if err := checkName(v.Chain); err != nil {
			return fmt.Errorf("%s target: %w", v.Kind, err)
		}
		if m == nil {
			return nil
		}
		c := m.Chain(v.Chain)
		if c == nil {
			return invalidf("%s to unknown chain %q", v.Kind, v.Chain)
		}
		if c.Base != nil {
			return invalidf("%s to base chain %q", v.Kind, v.Chain)
		}
		return nil
	}
	return invalidf("unknown verdict %q", v.Kind)
}

func (rc *ruleCheck) action(a Action) error {
	switch a := a.(type) {
	case Verdict:
		return checkVerdict(rc.m, a)
	case Reject:
		switch a.With {
		case RejectTCPReset:
			if !slices.Equal(rc.l4, []uint8{6}) {
				return invalidf("reject with tcp reset needs an earlier `meta l4proto tcp` match")
			}
		case RejectICMPPortUnreachable, RejectICMPAdminProhibited:
		default:
			return invalidf("unknown reject type %q", a.With)
		}
	case VMap:
		types, err := rc.selectors([]Selector{a.Key})
		if err != nil {
			return err
		}
		if a.Mask != 0 && a.Key != SelMark {
			return invalidf("vmap mask 0x%08x on key %q: only %q takes a mask", a.Mask, a.Key, SelMark)
		}
		return rc.set(a.Map, types, DataVerdict)
	case SetMark:
		if a.And == markAllOnes && a.Xor == 0 {
			return invalidf("mark set that changes nothing (And 0xffffffff, Xor 0)")
		}
	case SetMarkFromMap:
		types, err := rc.selectors([]Selector{a.Key})
		if err != nil {
			return err
		}
		return rc.set(a.Map, types, DataMark)
	case Notrack:
	case Log:
		return checkText("log prefix", a.Prefix, maxLogPrefixLen)
	case NFLog:
		return checkText("nflog prefix", a.Prefix, maxNFLogPrefix)
	default:
		return invalidf("unknown action type %T", a)
	}
	return nil
}

// validateSet checks the definition of s and all its elements; m (which may
// be nil) resolves the chains of verdict-map elements.
func validateSet(m *Model, s *Set) error {
	wrap := func(err error) error { return fmt.Errorf("set %q: %w", s.Name, err) }
	if err := validateSetDef(s); err != nil {
		return wrap(err)
	}
	for k, e := range s.Elements {
		if k != e.Key {
			return wrap(invalidf("element %q is stored under key %q", e.Key, k))
		}
		if err := validateElement(m, s, e); err != nil {
			return err
		}
	}
	if s.Interval {
		if err := checkOverlaps(s); err != nil {
			return wrap(err)
		}
	}
	return nil
}

func validateSetDef(s *Set) error {
	if err := checkName(s.Name); err != nil {
		return err
	}
	if len(s.Key) == 0 {
		return invalidf("no key type")
	}
	if len(s.Key) > maxConcatFields {
		return invalidf("key of %d fields, more than %d", len(s.Key), maxConcatFields)
	}
	size := 0
	for _, t := range s.Key {
		info, ok := keyTypes[t]
		if !ok {
			return invalidf("unknown key type %q", t)
		}
		size += pad4(info.size)
	}
	if size > maxConcatBytes {
		return invalidf("key type %s is %d bytes, more than %d", keyTypeString(s.Key), size, maxConcatBytes)
	}
	if s.Interval && len(s.Key) == 1 && !keyTypes[s.Key[0]].ranges {
		return invalidf("flags interval on a set of %s", s.Key[0])
	}
	switch s.Data {
	case DataNone, DataVerdict, DataMark:
	default:
		return invalidf("unknown data type %q", s.Data)
	}
	return checkText("comment", s.Comment, maxCommentLen)
}

// validateElement checks one element of s: its key must be canonical (as
// nft prints it, so that a read-back compares equal), fit the set's type and
// flags, and carry the value the set's data type needs. m (which may be nil)
// resolves jump and goto targets.
func validateElement(m *Model, s *Set, e Element) error {
	wrap := func(err error) error { return fmt.Errorf("set %q: element %q: %w", s.Name, e.Key, err) }
	fields, err := parseKey(s, e.Key)
	if err != nil {
		return wrap(asInvalid(err))
	}
	canon, err := canonicalKey(s, fields)
	if err != nil {
		return wrap(asInvalid(err))
	}
	if canon != e.Key {
		return wrap(invalidf("key is not canonical: nft prints it as %q", canon))
	}
	if !s.Interval {
		for i, f := range fields {
			if !f.single() {
				return wrap(invalidf("field %d is a range, prefix or wildcard, but the set has no interval flag", i+1))
			}
		}
	}
	if err := checkText("comment", e.Comment, maxCommentLen); err != nil {
		return wrap(err)
	}
	switch s.Data {
	case DataVerdict:
		if e.Verdict == nil {
			return wrap(invalidf("verdict map element without a verdict"))
		}
		if e.Mark != 0 {
			return wrap(invalidf("verdict map element with a mark"))
		}
		if err := checkVerdict(m, *e.Verdict); err != nil {
			return wrap(err)
		}
	case DataMark:
		if e.Verdict != nil {
			return wrap(invalidf("mark map element with a verdict"))
		}
	default:
		if e.Verdict != nil || e.Mark != 0 {
			return wrap(invalidf("set element with a value"))
		}
	}
	return nil
}

// checkOverlaps rejects two elements of interval set s that share a key:
// overlapping intervals in a one-field set, and in a concatenated set two
// elements whose every field overlaps ("a" . 10.0.0.0/8 and "a" .
// 10.1.0.0/16). The kernel refuses an element whose start or end falls in
// another (EEXIST); we also refuse one that contains another, which the
// kernel takes or not depending on the order of insertion.
func checkOverlaps(s *Set) error {
	es := make([]parsedElement, 0, len(s.Elements))
	for _, e := range s.Elements {
		fields, err := parseKey(s, e.Key)
		if err != nil {
			return invalidf("element %q: %v", e.Key, err)
		}
		es = append(es, parsedElement{Element: e, fields: fields})
	}
	return findOverlap(es, nil)
}

// checkAddedOverlaps checks adds, elements about to be added to interval
// set s, against each other and against the set's other elements (s holds
// the desired elements, adds included); fields returns the parsed key of an
// element that is not added (the kernel holds it, and the caller caches its
// parse). Two elements that are both already there are not compared: the
// kernel holds them together.
func checkAddedOverlaps(s *Set, adds []Element, fields func(key string) ([]keyField, error)) error {
	if len(adds) == 0 {
		return nil
	}
	added := make(map[string]bool, len(adds))
	pa := make([]parsedElement, 0, len(adds))
	for _, e := range adds {
		f, err := parseKey(s, e.Key)
		if err != nil {
			return invalidf("element %q: %v", e.Key, err)
		}
		added[e.Key] = true
		pa = append(pa, parsedElement{Element: e, fields: f})
	}
	if err := findOverlap(slices.Clone(pa), nil); err != nil {
		return err
	}
	others := len(s.Elements) - len(added)
	if others <= 0 {
		return nil
	}
	if len(pa) <= 8 {
		// Each addition against every other element: no sort.
		var found []parsedElement
		for k, e := range s.Elements {
			if added[k] {
				continue
			}
			f, err := fields(k)
			if err != nil {
				return invalidf("element %q: %v", k, err)
			}
			for _, a := range pa {
				if boxesOverlap(a.fields, f) {
					found = append(found, a, parsedElement{Element: e, fields: f})
					break
				}
			}
		}
		if len(found) > 0 {
			// Name the first pair in key order, whatever the map's.
			return findOverlap(found, nil)
		}
		return nil
	}
	all := pa
	for k, e := range s.Elements {
		if added[k] {
			continue
		}
		f, err := fields(k)
		if err != nil {
			return invalidf("element %q: %v", k, err)
		}
		all = append(all, parsedElement{Element: e, fields: f})
	}
	return findOverlap(all, added)
}

// findOverlap sorts es by their first field and sweeps them, comparing each
// element with the earlier ones whose first field reaches it. With only set,
// a pair is compared only if at least one of its keys is in it. It returns
// an error naming the first overlapping pair found, in sweep order.
func findOverlap(es []parsedElement, only map[string]bool) error {
	slices.SortFunc(es, func(a, b parsedElement) int {
		for i := range a.fields {
			if c := bytes.Compare(a.fields[i].first, b.fields[i].first); c != 0 {
				return c
			}
		}
		return strings.Compare(a.Key, b.Key)
	})
	var active []*parsedElement
	for i := range es {
		cur := &es[i]
		kept := active[:0]
		for _, a := range active {
			if bytes.Compare(a.fields[0].last, cur.fields[0].first) >= 0 {
				kept = append(kept, a)
			}
		}
		active = kept
		for _, a := range active {
			if only != nil && !only[a.Key] && !only[cur.Key] {
				continue
			}
			if boxesOverlap(a.fields, cur.fields) {
				return invalidf("elements %q and %q overlap", a.Key, cur.Key)
			}
		}
		active = append(active, cur)
	}
	return nil
}

// boxesOverlap reports whether two keys share a value: every field's
// intervals intersect.
func boxesOverlap(a, b []keyField) bool {
	for i := range a {
		if bytes.Compare(a[i].first, b[i].last) > 0 || bytes.Compare(b[i].first, a[i].last) > 0 {
			return false
		}
	}
	return true
}

// ValidateName reports whether name is acceptable as a chain or set name:
// it applies the same check as the validator (a letter, then letters,
// digits and "_./-", at most 255 bytes: the names nft prints unquoted).
// The error matches ErrInvalid.
func ValidateName(name string) error {
	return checkName(name)
}

// ValidateIfName reports whether name is acceptable as an interface name in
// an IfName match (without Wildcard) or in the key of an ifname set: it
// applies the same check as the validator (1 to 15 bytes, printable ASCII,
// no whitespace, '/', ':', quotes, backslashes or '*'). The error matches
// ErrInvalid.
func ValidateIfName(name string) error {
	return checkIfName(name, false)
}

// SanitizeComment returns s changed into a comment the validator accepts
// (for chains, rules, sets and elements): each control character, DEL,
// double quote, backslash and byte of invalid UTF-8 becomes '_', and the
// result is clipped to the 128-byte limit without splitting a UTF-8
// sequence. A comment that is already valid is returned unchanged.
func SanitizeComment(s string) string {
	var b strings.Builder
	b.Grow(min(len(s), maxCommentLen))
	for i, c := range s {
		_, size := utf8.DecodeRuneInString(s[i:])
		repl := string(c)
		if c < 0x20 || c == 0x7f || c == '"' || c == '\\' || c == utf8.RuneError && size == 1 {
			repl = "_"
		}
		if b.Len()+len(repl) > maxCommentLen {
			break
		}
		b.WriteString(repl)
	}
	return b.String()
}
