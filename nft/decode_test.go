package nft

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// ruleBytes encodes r as the kernel lists it: its NFTA_RULE_EXPRESSIONS
// and userdata, and its anonymous sets named __set0, __set1, … as the
// kernel names them.
func ruleBytes(t testing.TB, family Family, r *Rule) (exprs, ud []byte, anon map[string]*anonContent) {
	xs, as, err := encodeRule(r)
	if err != nil {
		t.Fatalf("encode %s: %v", r, err)
	}
	anon = map[string]*anonContent{}
	var e enc
	n := 0
	for _, x := range xs {
		if l, ok := x.(*expr.Lookup); ok && l.SetName == "__set%d" {
			a := as[n]
			c := *l
			c.SetName = fmt.Sprintf("__set%d", n)
			x = &c
			anon[c.SetName] = &anonContent{flags: setFlags(a.Set), keyType: a.Set.KeyType.GetNFTMagic(), elements: a.Elements}
			n++
		}
		el := e.nest(unix.NFTA_LIST_ELEM)
		if err := e.expr(familyNum(family), x); err != nil {
			t.Fatal(err)
		}
		if err := e.end(el); err != nil {
			t.Fatal(err)
		}
	}
	return e.b, ruleUserData(r), anon
}

// TestDecodeVocab decodes every rule of the vocabulary from its encoding,
// without a kernel: each comes back equal to the model's rule or
// indistinguishable from it.
func TestDecodeVocab(t *testing.T) {
	for _, m := range []*Model{vocabModel("nftep"), vocabARPModel()} {
		for _, name := range m.ChainNames() {
			for i, r := range m.Chain(name).Rules {
				exprs, ud, anon := ruleBytes(t, m.Family, r)
				got := decodeExprBytes(m.Family, exprs, ud, anon)
				if !cmp.Equal(r, got, netipCmp) && !indistinguishable(r, got) {
					t.Errorf("%s rule %d: %s decoded as %s (%#v)", name, i+1, r, got, got)
				}
			}
		}
	}
}

// TestDecodeForeign decodes expressions nftep never emits.
func TestDecodeForeign(t *testing.T) {
	enc1 := func(family Family, xs ...expr.Any) []byte {
		var e enc
		for _, x := range xs {
			el := e.nest(unix.NFTA_LIST_ELEM)
			if err := e.expr(familyNum(family), x); err != nil {
				t.Fatal(err)
			}
			_ = e.end(el)
		}
		return e.b
	}
	for _, tc := range []struct {
		name string
		b    []byte
		want string
	}{
		{"masquerade with persistent", enc1(FamilyINet, &expr.Masq{Persistent: true}), "# unknown expression masq"},
		{"dnat", enc1(FamilyINet, &expr.Immediate{Register: 1, Data: []byte{1, 2, 3, 4}}, &expr.NAT{Type: expr.NATTypeDestNAT, Family: 2, RegAddrMin: 1}), "# unknown expression immediate # unknown expression nat"},
		{"verdict after a foreign match", enc1(FamilyINet,
			&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1}, &expr.Cmp{Op: expr.CmpOpGt, Register: 1, Data: []byte("a")},
			&expr.Verdict{Kind: expr.VerdictDrop}), "# unknown expression meta # unknown expression cmp drop"},
		{"counter in the middle", enc1(FamilyINet, &expr.Counter{Packets: 3, Bytes: 9}, &expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: u32(1)}, &expr.Verdict{Kind: expr.VerdictAccept}),
			"counter packets 3 bytes 9 meta mark 0x00000001 accept"},
		{"ip saddr without its family", enc1(FamilyINet,
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4}, &expr.Cmp{Register: 1, Data: []byte{1, 2, 3, 4}}),
			"# unknown expression payload # unknown expression cmp"},
		{"a plain drop", enc1(FamilyINet, &expr.Verdict{Kind: expr.VerdictDrop}), "drop"},
		{"arp operation in an inet table", enc1(FamilyINet,
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 6, Len: 2}, &expr.Cmp{Register: 1, Data: []byte{0, 1}}),
			"# unknown expression payload # unknown expression cmp"},
		{"garbage", []byte{1, 2, 3, 4, 5, 6, 7, 8}, ""},
	} {
		got := decodeExprBytes(FamilyINet, tc.b, nil, nil).String()
		if got != tc.want {
			t.Errorf("%s: decoded as %q, want %q", tc.name, got, tc.want)
		}
	}
}

// FuzzDecodeRule feeds the decoder arbitrary expression lists, userdata
// and anonymous set contents. It must never panic, and whatever it
// decodes without Foreign parts must encode again.
func FuzzDecodeRule(f *testing.F) {
	for _, m := range []*Model{vocabModel("nftep"), vocabARPModel()} {
		for _, name := range m.ChainNames() {
			for _, r := range m.Chain(name).Rules {
				exprs, ud, anon := ruleBytes(f, m.Family, r)
				var kt uint8
				var els []byte
				if a := anon["__set0"]; a != nil {
					for i, t := range fuzzKeyTypes {
						info := keyTypes[t]
						dt := info.dt
						if dt.GetNFTMagic() == a.keyType {
							kt = uint8(i)
						}
					}
					for _, e := range a.elements {
						els = append(els, e.Key...)
					}
				}
				f.Add(exprs, ud, kt, els, m.Family == FamilyARP)
			}
		}
	}
	f.Fuzz(func(t *testing.T, exprs, ud []byte, kt uint8, els []byte, arp bool) {
		family := FamilyINet
		if arp {
			family = FamilyARP
		}
		typ := fuzzKeyTypes[int(kt)%len(fuzzKeyTypes)]
		info := keyTypes[typ]
		a := &anonContent{flags: unix.NFT_SET_ANONYMOUS | unix.NFT_SET_CONSTANT, keyType: info.dt.GetNFTMagic()}
		if kt&0x80 != 0 {
			a.flags |= unix.NFT_SET_INTERVAL
		}
		for len(els) >= info.size {
			a.elements = append(a.elements, nftables.SetElement{Key: els[:info.size], IntervalEnd: els[0]&1 == 1 && kt&0x40 != 0})
			els = els[info.size:]
		}
		r := decodeExprBytes(family, exprs, ud, map[string]*anonContent{"__set0": a})
		_ = r.String()
		for _, m := range r.Match {
			if _, ok := m.(Foreign); ok {
				return
			}
		}
		if _, ok := r.Action.(Foreign); ok {
			return
		}
		if _, _, err := encodeRule(r); err != nil {
			t.Fatalf("decoded %s does not encode: %v", r, err)
		}
	})
}

var fuzzKeyTypes = []KeyType{TypeIfName, TypeIPv4Addr, TypeIPv6Addr, TypeMark, TypeInetProto, TypeInetService}
