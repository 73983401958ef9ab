package nft

// Decoding: the kernel's expressions of a rule back into a Rule, the inverse
// of encodeRule. Each match and action kind recognises its own expression
// sequences (the decode* functions next to each encode*); this file holds
// the driver that tries them, the expression list as read from the kernel,
// and the Foreign node for what nftep never emits.
//
// A recogniser only proposes: the driver encodes the proposed match in the
// protocol context at that point and accepts it only if that yields exactly
// the expressions it consumed (sameExprs). So a decoded rule re-encodes to
// the kernel's expressions by construction, and a near miss (a foreign rule
// that resembles ours) becomes Foreign instead of a wrong rule. Implicit
// dependencies (`meta nfproto` before an address, `meta l4proto` before an
// icmp type) first decode as explicit NFProto and L4Proto matches; the
// driver then drops each whose removal still encodes to the same
// expressions (absorb), which is what encodeRule would have added itself.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// kexpr is one expression of a kernel rule: its name and, when
// google/nftables knows the name and could unmarshal it, its value.
type kexpr struct {
	name string
	x    expr.Any
}

// parseExprs splits a rule's NFTA_RULE_EXPRESSIONS into expressions. Unlike
// google/nftables' rule parsing it keeps expressions it does not know (as
// a name without a value) instead of leaving them out, and it never panics
// (some of google/nftables' unmarshal functions index short attributes).
func parseExprs(family uint8, b []byte) []kexpr {
	var out []kexpr
	for len(b) >= 4 {
		l := int(binary.NativeEndian.Uint16(b[0:2]))
		if l < 4 || l > len(b) {
			break
		}
		if binary.NativeEndian.Uint16(b[2:4])&^(unix.NLA_F_NESTED|unix.NLA_F_NET_BYTEORDER) == unix.NFTA_LIST_ELEM {
			out = append(out, parseExpr(family, b[4:l]))
		}
		al := (l + 3) &^ 3
		if al >= len(b) {
			break
		}
		b = b[al:]
	}
	return out
}

// parseExpr reads one NFTA_LIST_ELEM: NFTA_EXPR_NAME and NFTA_EXPR_DATA.
func parseExpr(family uint8, b []byte) (k kexpr) {
	var data []byte
	forEachAttr(b, func(t uint16, v []byte) {
		switch t {
		case unix.NFTA_EXPR_NAME:
			k.name = string(bytes.TrimRight(v, "\x00"))
		case unix.NFTA_EXPR_DATA:
			data = v
		}
	})
	if k.name == "" {
		k.name = "?"
		return k
	}
	k.x = unmarshalExpr(family, k.name, data)
	return k
}

// unmarshalExpr unmarshals the data of an expression called name, or
// returns nil for a name nftep never emits or data it cannot read.
func unmarshalExpr(family uint8, name string, data []byte) (x expr.Any) {
	defer func() {
		if recover() != nil {
			x = nil
		}
	}()
	switch name {
	case "meta":
		x = &expr.Meta{}
	case "cmp":
		x = &expr.Cmp{}
	case "payload":
		x = &expr.Payload{}
	case "bitwise":
		x = &expr.Bitwise{}
	case "lookup":
		x = &expr.Lookup{}
	case "immediate":
		x = &expr.Immediate{}
	case "counter":
		x = &expr.Counter{}
	case "ct":
		x = &expr.Ct{}
	case "range":
		x = &expr.Range{}
	case "limit":
		x = &expr.Limit{}
	case "connlimit":
		x = &expr.Connlimit{}
	case "fib":
		x = &expr.Fib{}
	case "log":
		x = &expr.Log{}
	case "reject":
		x = &expr.Reject{}
	case "notrack":
		return &expr.Notrack{}
	case "masq":
		x = &expr.Masq{}
	case "nat":
		x = &expr.NAT{}
	default:
		return nil
	}
	if err := expr.Unmarshal(family, data, x); err != nil {
		return nil
	}
	if imm, ok := x.(*expr.Immediate); ok && imm.Register == unix.NFT_REG_VERDICT && len(imm.Data) == 0 {
		v := &expr.Verdict{}
		if err := expr.Unmarshal(family, data, v); err != nil {
			return nil
		}
		return v
	}
	return x
}

// anonContent is an anonymous set of the table, which a rule's lookup
// refers to by name: its flags, key type and elements.
type anonContent struct {
	flags, keyType uint32
	elements       []nftables.SetElement
}

// decoder walks one rule's expressions.
type decoder struct {
	family Family
	xs     []kexpr
	// anon holds the table's anonymous sets by name.
	anon map[string]*anonContent
}

// at returns expression i as T, or false.
func at[T expr.Any](xs []kexpr, i int) (T, bool) {
	var zero T
	if i < 0 || i >= len(xs) || xs[i].x == nil {
		return zero, false
	}
	t, ok := xs[i].x.(T)
	return t, ok
}

// matchDecoder proposes a match for the expressions at the start of xs:
// the match and how many expressions it stands for, or n == 0. ctx is the
// protocol context of the rule so far (an encoder with no expressions).
type matchDecoder func(d *decoder, xs []kexpr, ctx *encoder) (m Match, n int)

// actionDecoder proposes an action for all of xs.
type actionDecoder func(d *decoder, xs []kexpr, ctx *encoder) (a Action, ok bool)

// The recognisers, one per kind, in the files of their kinds. The order
// matters where two kinds encode alike: the more specific (Addr, Port)
// comes before Lookup, which prints the same; an icmp type and code
// before a source port, which loads the same two bytes.
var (
	matchDecoders = []matchDecoder{
		decodeNFProto, decodeL4Proto, decodeIfName, decodeAddr, decodeICMP, decodePort,
		decodeCtState, decodeCtStatus, decodeCtCount, decodeMark, decodeFibType, decodeRPF, decodeLimit,
		decodeARPOperation, decodeARPSenderIP, decodeLookup,
	}
	actionDecoders = []actionDecoder{
		decodeVerdict, decodeVMap, decodeSetMark, decodeSetMarkFromMap, decodeLog, decodeNotrack, decodeReject, decodeSetNftrace,
		decodeMasquerade, decodeSNAT,
	}
)

// decodeRule turns a kernel rule's expressions and userdata into a Rule.
// It never fails: what it cannot read becomes Foreign.
func (d *decoder) decodeRule(xs []kexpr, ud []byte) *Rule {
	r := &Rule{}
	r.Comment, _ = ruleCommentFromUserData(ud)
	ctx := &encoder{l4proto: -1}
	i := 0
	for i < len(xs) {
		rest := xs[i:]
		if a := d.action(rest, ctx); a != nil {
			r.Action = a
			break
		}
		if c, ok := at[*expr.Counter](xs, i); ok && !r.Counter {
			if i+1 == len(xs) {
				r.Counter = true
				break
			}
			if a := d.action(xs[i+1:], ctx); a != nil {
				r.Counter, r.Action = true, a
				break
			}
			r.Match = append(r.Match, foreignExpr(xs[i], c))
			i++
			continue
		}
		m, n := d.match(rest, ctx)
		if n == 0 {
			r.Match = append(r.Match, foreignExpr(xs[i], nil))
			i++
			continue
		}
		// Advance the context as the encoder would.
		_ = m.encodeMatch(ctx)
		ctx.exprs, ctx.anon = nil, nil
		r.Match = append(r.Match, m)
		i += n
	}
	d.absorb(r, xs)
	return r
}

// match returns the first match proposal that encodes to exactly the
// expressions it consumes.
func (d *decoder) match(xs []kexpr, ctx *encoder) (Match, int) {
	for _, dec := range matchDecoders {
		m, n := dec(d, xs, ctx)
		if n == 0 || n > len(xs) {
			continue
		}
		e := ctx.fork()
		if err := m.encodeMatch(e); err != nil {
			continue
		}
		if d.sameExprs(xs[:n], e) {
			return m, n
		}
	}
	return nil, 0
}

// action returns the action all of xs encode, or nil.
func (d *decoder) action(xs []kexpr, ctx *encoder) Action {
	for _, dec := range actionDecoders {
		a, ok := dec(d, xs, ctx)
		if !ok {
			continue
		}
		e := ctx.fork()
		if err := a.encodeAction(e); err != nil {
			continue
		}
		if d.sameExprs(xs, e) {
			return a
		}
	}
	return nil
}

// fork returns an encoder with e's context and no expressions.
func (e *encoder) fork() *encoder {
	return &encoder{nfproto: e.nfproto, l4proto: e.l4proto}
}

// absorb removes the NFProto and L4Proto matches that encodeRule would add
// by itself as dependencies of later matches: those whose removal leaves
// the rule's expressions unchanged.
func (d *decoder) absorb(r *Rule, xs []kexpr) {
	for changed := true; changed; {
		changed = false
		for i, m := range r.Match {
			switch m := m.(type) {
			case NFProto:
			case L4Proto:
				if len(m.Protos) != 1 || m.Negate {
					continue
				}
			default:
				continue
			}
			try := &Rule{Match: slices.Delete(slices.Clone(r.Match), i, i+1), Counter: r.Counter, Action: r.Action}
			exprs, anon, err := encodeRule(try)
			if err != nil {
				continue
			}
			if d.sameExprs(xs, &encoder{exprs: exprs, anon: anon}) {
				r.Match = try.Match
				changed = true
				break
			}
		}
	}
}

// sameExprs says whether the kernel's expressions xs are those e holds,
// apart from what the kernel assigns or counts: counter values, the names
// and IDs of anonymous sets (whose contents are compared instead), log
// attributes the kernel adds.
func (d *decoder) sameExprs(xs []kexpr, e *encoder) bool {
	if len(xs) != len(e.exprs) {
		return false
	}
	anon := 0
	for i, k := range xs {
		if k.x == nil {
			return false
		}
		switch want := e.exprs[i].(type) {
		case *expr.Counter:
			if _, ok := k.x.(*expr.Counter); !ok {
				return false
			}
		case *expr.Lookup:
			got, ok := k.x.(*expr.Lookup)
			if !ok || got.SourceRegister != want.SourceRegister || got.IsDestRegSet != want.IsDestRegSet ||
				got.DestRegister != want.DestRegister || got.Invert != want.Invert {
				return false
			}
			if want.SetID != 0 && want.SetName == "__set%d" {
				if anon >= len(e.anon) || !d.sameAnon(got.SetName, e.anon[anon]) {
					return false
				}
				anon++
			} else if got.SetName != want.SetName || strings.HasPrefix(got.SetName, "__set") {
				return false
			}
		case *expr.Log:
			got, ok := k.x.(*expr.Log)
			const ours = logPrefixAttr | logGroupAttr
			if !ok || got.Key&ours != want.Key&ours || got.Group != want.Group || !bytes.Equal(got.Data, want.Data) {
				return false
			}
			// The kernel reports a kernel-log rule's level and an nflog
			// rule's snaplen and threshold; nft leaves them at the
			// defaults nftep uses.
			if got.Key&logGroupAttr == 0 && got.Level != 0 && got.Level != expr.LogLevelWarning {
				return false
			}
			if got.Key&logGroupAttr != 0 && (got.Snaplen != 0 || got.QThreshold != 0) {
				return false
			}
			if got.Flags != 0 {
				return false
			}
		default:
			if !reflect.DeepEqual(k.x, want) {
				return false
			}
		}
	}
	return anon == len(e.anon)
}

// sameAnon says whether the table's anonymous set name holds what a holds.
func (d *decoder) sameAnon(name string, a *anonSet) bool {
	k := d.anon[name]
	if k == nil || k.keyType != a.Set.KeyType.GetNFTMagic() {
		return false
	}
	want := setFlags(a.Set) &^ unix.NFT_SET_CONSTANT
	if k.flags&(unix.NFT_SET_ANONYMOUS|unix.NFT_SET_INTERVAL|unix.NFT_SET_MAP|nftSetConcat) != want {
		return false
	}
	key := func(e nftables.SetElement) string {
		return fmt.Sprintf("%x/%t", e.Key, e.IntervalEnd)
	}
	var got, exp []string
	for _, e := range k.elements {
		got = append(got, key(e))
	}
	for _, e := range a.Elements {
		exp = append(exp, key(e))
	}
	slices.Sort(got)
	slices.Sort(exp)
	return slices.Equal(got, exp)
}

// anonFields returns the elements of the anonymous set a lookup reads as
// one-field keys of type t, or false when the set is not anonymous or its
// elements do not read as such keys.
func (d *decoder) anonFields(l *expr.Lookup, t KeyType) ([]keyField, bool) {
	k := d.anon[l.SetName]
	dt := keyTypes[t].dt
	if k == nil || k.keyType != dt.GetNFTMagic() {
		return nil, false
	}
	s := &Set{Name: l.SetName, Key: []KeyType{t}, Interval: k.flags&unix.NFT_SET_INTERVAL != 0}
	els, err := decodeElements(s, k.elements)
	if err != nil || len(els) == 0 {
		return nil, false
	}
	var out []keyField
	for key := range els {
		fs, err := parseKey(s, key)
		if err != nil {
			return nil, false
		}
		out = append(out, fs[0])
	}
	slices.SortFunc(out, func(a, b keyField) int { return bytes.Compare(a.first, b.first) })
	return out, true
}

// isAnon says whether a lookup reads an anonymous set of the table.
func (d *decoder) isAnon(l *expr.Lookup) bool {
	_, ok := d.anon[l.SetName]
	return ok || strings.HasPrefix(l.SetName, "__set")
}

// Foreign stands for kernel expressions nftep never emits in that place: a
// rule another program added, or changed. It is a Match and an Action,
// prints as nft would where that is easy and as `# unknown expression
// <name>` otherwise, and cannot be encoded or validated.
type Foreign struct {
	// Text is what the expression prints as.
	Text string
}

func foreignExpr(k kexpr, c *expr.Counter) Foreign {
	if c != nil {
		return Foreign{Text: fmt.Sprintf("counter packets %d bytes %d", c.Packets, c.Bytes)}
	}
	if _, ok := k.x.(*expr.Notrack); ok {
		return Foreign{Text: "notrack"}
	}
	if v, ok := k.x.(*expr.Verdict); ok {
		if vv, err := verdictFromExpr(v); err == nil {
			return Foreign{Text: vv.String()}
		}
	}
	name := k.name
	if !printable(name) {
		name = fmt.Sprintf("%q", name)
	}
	return Foreign{Text: "# unknown expression " + name}
}

func printable(s string) bool {
	for _, c := range s {
		if c < 0x21 || c > 0x7e {
			return false
		}
	}
	return s != ""
}

func (f Foreign) printMatch(c *ruleContext) string  { return f.Text }
func (f Foreign) printAction(c *ruleContext) string { return f.Text }
func (f Foreign) encodeMatch(e *encoder) error {
	return fmt.Errorf("foreign expression %q cannot be encoded", f.Text)
}
func (f Foreign) encodeAction(e *encoder) error { return f.encodeMatch(e) }
func (f Foreign) checkMatch(rc *ruleCheck) error {
	return invalidf("foreign expression %q", f.Text)
}
func (f Foreign) checkAction(rc *ruleCheck) error { return f.checkMatch(rc) }
func (f Foreign) arp() arpUse                     { return arpAlso }
func (f Foreign) inARP() bool                     { return true }
func (f Foreign) sets(fn func(string))            {}
func (f Foreign) refs(chain, set func(string))    {}

// decodeExprBytes decodes a rule from the raw NFTA_RULE_EXPRESSIONS and
// NFTA_RULE_USERDATA of a rule of a family table (for the fuzz target).
func decodeExprBytes(family Family, exprs, ud []byte, anon map[string]*anonContent) *Rule {
	d := &decoder{family: family, anon: anon}
	return d.decodeRule(parseExprs(familyNum(family), exprs), ud)
}

func familyNum(f Family) uint8 {
	if f == FamilyARP {
		return unix.NFPROTO_ARP
	}
	return unix.NFPROTO_INET
}
