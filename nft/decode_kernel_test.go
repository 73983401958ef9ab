package nft

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/nftables/expr"

	"github.com/nftep/nftep/internal/netnstest"
)

// applyForTest programs m into ns with the engine, in one transaction.
func applyForTest(t *testing.T, ns *netnstest.NS, m *Model) {
	t.Helper()
	tbl, err := NewTable(TableConfig{Family: m.Family, Name: m.Name, NetNSFd: ns.Fd()})
	if err != nil {
		t.Fatal(err)
	}
	d := tbl.Desired()
	for _, n := range m.SetNames() {
		s := *m.Set(n)
		s.Elements = nil
		d.SetSet(&s)
		for _, e := range m.Set(n).Elements {
			d.SetElement(n, e)
		}
	}
	for _, n := range m.ChainNames() {
		d.SetChain(m.Chain(n))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := tbl.Apply(ctx); err != nil {
		t.Fatalf("apply: %v", err)
	}
}

func readForTest(t *testing.T, ns *netnstest.NS, family Family, name string) *KernelTable {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	kt, err := ReadKernelTable(ctx, ns.Fd(), family, name)
	if err != nil {
		t.Fatalf("ReadKernelTable: %v", err)
	}
	if len(kt.Problems) > 0 {
		t.Errorf("problems decoding the table: %q", kt.Problems)
	}
	return kt
}

// checkDecoded checks that kt, read from the kernel after m was programmed,
// is m: the same text, every set alike, and every rule either equal to the
// model's or indistinguishable from it (it prints and encodes the same:
// explicit and implied dependencies, a lookup of one address or port and
// the address or port set match, the order of an anonymous set's members).
func checkDecoded(t *testing.T, m *Model, kt *KernelTable) {
	t.Helper()
	if !kt.Exists {
		t.Fatalf("table %s %s does not exist", m.Family, m.Name)
	}
	if diff := cmp.Diff(m.String(), kt.Model.String()); diff != "" {
		t.Errorf("decoded table differs (-model +decoded):\n%s", diff)
	}
	if diff := cmp.Diff(m.SetNames(), kt.Model.SetNames()); diff != "" {
		t.Errorf("sets differ:\n%s", diff)
	}
	for _, n := range m.SetNames() {
		want, got := m.Set(n), kt.Model.Set(n)
		if got == nil {
			continue
		}
		if !setDefEqual(want, got) || want.Comment != got.Comment {
			t.Errorf("set %s: decoded %+v, want %+v", n, setDef(got), setDef(want))
		}
		if diff := cmp.Diff(want.Elements, got.Elements); diff != "" {
			t.Errorf("set %s: elements differ (-model +decoded):\n%s", n, diff)
		}
	}
	if diff := cmp.Diff(m.ChainNames(), kt.Model.ChainNames()); diff != "" {
		t.Fatalf("chains differ:\n%s", diff)
	}
	exact, same := 0, 0
	for _, n := range m.ChainNames() {
		want, got := m.Chain(n), kt.Model.Chain(n)
		if !baseEqual(want.Base, got.Base) {
			t.Errorf("chain %s: base %+v, want %+v", n, got.Base, want.Base)
		}
		if len(want.Rules) != len(got.Rules) {
			t.Errorf("chain %s: %d rules decoded, want %d", n, len(got.Rules), len(want.Rules))
			continue
		}
		for i, w := range want.Rules {
			g := got.Rules[i]
			switch {
			case cmp.Equal(w, g, netipCmp):
				exact++
			case indistinguishable(w, g):
				same++
			default:
				t.Errorf("chain %s rule %d: decoded %#v, want %#v", n, i+1, g, w)
			}
			if !kt.Ours(n, i) {
				t.Errorf("chain %s rule %d: not recognised as nftep's (hash %q)", n, i+1, kt.Rules[n][i].Hash)
			}
		}
	}
	t.Logf("%d rules decoded equal to the model's, %d indistinguishable from it", exact, same)
}

var netipCmp = cmp.Options{
	cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }),
	cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
}

// indistinguishable says whether two rules print alike and encode to the
// same expressions (anonymous set members compared as sets).
func indistinguishable(a, b *Rule) bool {
	if a.String() != b.String() {
		return false
	}
	ea, aa, err1 := encodeRule(a)
	eb, ab, err2 := encodeRule(b)
	if err1 != nil || err2 != nil || len(ea) != len(eb) || len(aa) != len(ab) {
		return false
	}
	for i := range ea {
		x, y := ea[i], eb[i]
		if lx, ok := x.(*expr.Lookup); ok {
			if ly, ok := y.(*expr.Lookup); ok && lx.SetID != 0 && ly.SetID != 0 {
				cx, cy := *lx, *ly
				cx.SetID, cy.SetID = 0, 0
				x, y = &cx, &cy
			}
		}
		if !cmp.Equal(x, y) {
			return false
		}
	}
	anon := map[string]*anonContent{}
	for i, s := range ab {
		anon[string(rune('a'+i))] = &anonContent{flags: setFlags(s.Set) &^ 0x2, keyType: s.Set.KeyType.GetNFTMagic(), elements: s.Elements}
	}
	d := &decoder{anon: anon}
	for i, s := range aa {
		if !d.sameAnon(string(rune('a'+i)), s) {
			return false
		}
	}
	return true
}

// TestDecodeVocabKernel programs the whole vocabulary (inet and arp) and
// reads it back into a model.
func TestDecodeVocabKernel(t *testing.T) {
	ns := netnstest.New(t)
	for _, m := range []*Model{vocabModel("nftep"), vocabARPModel()} {
		applyForTest(t, ns, m)
		kt := readForTest(t, ns, m.Family, m.Name)
		checkDecoded(t, m, kt)
		// A cold apply creates objects in print order.
		if got := kt.String(); got != m.String() {
			t.Errorf("%s: kernel-order print differs:\n%s", m.Family, cmp.Diff(m.String(), got))
		}
		if got := ns.Run(t, "nft", "list", "table", string(m.Family), m.Name); got != kt.String() {
			t.Errorf("%s: nft list differs from the decoded table (-nft +decoded):\n%s", m.Family, cmp.Diff(got, kt.String()))
		}
	}
}

// TestDecodeNodeKernel reads back the benchmarks' node table.
func TestDecodeNodeKernel(t *testing.T) {
	ns := netnstest.New(t)
	m := NewModel(FamilyINet, "nftep")
	nodeModel(m, 50, benchPolicies)
	applyForTest(t, ns, m)
	checkDecoded(t, m, readForTest(t, ns, m.Family, m.Name))
}

// TestDecodeMissingTable reads a table that does not exist.
func TestDecodeMissingTable(t *testing.T) {
	ns := netnstest.New(t)
	kt := readForTest(t, ns, FamilyINet, "nftep")
	if kt.Exists || kt.Model.NumChains() != 0 {
		t.Errorf("missing table read as %+v", kt)
	}
}
