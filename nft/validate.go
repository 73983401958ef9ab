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
	switch b.Type {
	case ChainTypeFilter, "":
	case ChainTypeNAT:
		if family != FamilyINet {
			return invalidf("base chain type %q in family %s (nftep's nat chain is inet)", b.Type, family)
		}
		if b.Hook == HookForward {
			return invalidf("base chain type %q at hook %s: nat chains have no forward hook", b.Type, b.Hook)
		}
	default:
		return invalidf("base chain type %q (nftep uses %q and %q)", b.Type, ChainTypeFilter, ChainTypeNAT)
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
		if x == nil {
			return invalidf("match %d: nil match", i+1)
		}
		if arp && x.arp() == arpNo {
			return invalidf("match %d: %T does not apply to the arp family", i+1, x)
		}
		if m != nil && !arp && x.arp() == arpOnly {
			return invalidf("match %d: %T applies only to the arp family, not %s", i+1, x, m.Family)
		}
		if err := x.checkMatch(rc); err != nil {
			return fmt.Errorf("match %d: %w", i+1, err)
		}
	}
	if r.Action != nil {
		if arp && !r.Action.inARP() {
			return invalidf("%T does not apply to the arp family", r.Action)
		}
		if err := r.Action.checkAction(rc); err != nil {
			return err
		}
	}
	return nil
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
		if data != DataNone {
			kind = "map"
		}
		return invalidf("reference to unknown %s %q", kind, name)
	}
	if !slices.Equal(s.Key, key) {
		return invalidf("set %q has key type %s, the match needs %s", name, keyTypeString(s.Key), keyTypeString(key))
	}
	if s.Data != data {
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
//
// It is nftep's one comment sanitiser (render and policy write every
// comment through it: they carry Felix names and error texts, which may
// hold anything); the validator only refuses, it never sanitises.
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
