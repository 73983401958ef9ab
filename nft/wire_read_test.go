package nft

// ReadKernelTable (what `nftep show` prints) over the kernel transport's
// wire code, answered from a Fake: chains in the kernel's order, rules
// decoded from their expressions with their handles and hashes, sets with
// their comments and elements.

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWireReadKernelTable(t *testing.T) {
	w := &wire{f: NewFake()}
	tr := wireTransport{w.transport(), w}
	tbl := newWireTable(t, w, FamilyINet)
	m := tbl.Desired()
	baseModel(m)
	s := *m.Set("allowed")
	s.Comment = "sources v1 accepts"
	m.SetSet(&s)
	m.SetElement("allowed", Element{Key: "10.0.0.7"})
	mustApply(t, tbl)
	theirs := &Rule{Match: []Match{Addr{Family: IPv4, Dir: In, Prefixes: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}}}, Action: drop}
	mustForeign(t, w.f.InsertRule(FamilyINet, testTable, "filter-fw-v2", theirs))

	kt, err := readKernelTableFrom(context.Background(), tr, FamilyINet, testTable)
	require.NoError(t, err)
	assert.True(t, kt.Exists)
	assert.Empty(t, kt.Problems)
	assert.Equal(t, []string{"allowed", "filter-from-wl"}, kt.Sets, "sets in the kernel's order (creation)")
	assert.Equal(t, []string{"filter-input", "filter-fw-v1", "filter-fw-v2"}, kt.Chains, "chains in the kernel's order (creation)")

	want := m.Clone()
	v2 := *want.Chain("filter-fw-v2")
	v2.Rules = append([]*Rule{theirs}, v2.Rules...)
	want.SetChain(&v2)
	assert.Equal(t, want.String(), kt.Model.String(), "the table decoded")
	assert.Equal(t, "sources v1 accepts", kt.Model.Set("allowed").Comment)

	// Ours: rules carrying nftep's hash of what they hold.
	assert.False(t, kt.Ours("filter-fw-v2", 0), "their rule")
	assert.True(t, kt.Ours("filter-fw-v2", 1))
	for i := range m.Chain("filter-fw-v1").Rules {
		assert.True(t, kt.Ours("filter-fw-v1", i), "rule %d of filter-fw-v1", i+1)
		assert.Equal(t, uint64(i+1), kt.Rules["filter-fw-v1"][i].Handle)
	}
	assert.False(t, kt.Ours("filter-fw-v1", 3), "past the last rule")
	assert.False(t, kt.Ours("missing", 0))
	assert.Empty(t, kt.Rules["filter-fw-v2"][0].Hash)

	// `nft list table` order: sets then chains, each as the kernel lists them.
	text := kt.String()
	assert.Less(t, strings.Index(text, "set allowed"), strings.Index(text, "map filter-from-wl"))
	assert.Less(t, strings.Index(text, "chain filter-input"), strings.Index(text, "chain filter-fw-v1"))

	// A dump interrupted by a concurrent change is read again.
	w.interrupt = 1
	again, err := readKernelTableFrom(context.Background(), tr, FamilyINet, testTable)
	require.NoError(t, err)
	assert.Equal(t, kt.Model.String(), again.Model.String())

	// No table: Exists false, nothing else.
	none, err := readKernelTableFrom(context.Background(), tr, FamilyARP, testTable)
	require.NoError(t, err)
	assert.False(t, none.Exists)
	assert.Empty(t, none.Chains)
}

// TestUdataComment reads an element comment from userdata as nft writes
// it (type 0, NUL-terminated), among other entries, and refuses userdata
// that is not a type-length-value list.
func TestUdataComment(t *testing.T) {
	for _, tc := range []struct {
		name string
		ud   []byte
		want string
		ok   bool
	}{
		{"comment", []byte{0, 3, 'a', 'b', 0}, "ab", true},
		{"after another entry", []byte{7, 1, 'x', 0, 2, 'c', 0}, "c", true},
		{"none", nil, "", true},
		{"truncated", []byte{0, 9, 'a'}, "", false},
		{"one byte", []byte{0}, "", false},
	} {
		got, ok := udataComment(tc.ud)
		assert.Equal(t, tc.ok, ok, tc.name)
		assert.Equal(t, tc.want, got, tc.name)
	}
}
