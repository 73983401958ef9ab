package nft

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestForeignOpString: each removal prints as the nft command that does the
// same, with chain names nft would not take bare quoted.
func TestForeignOpString(t *testing.T) {
	for _, c := range []struct {
		op   ForeignOp
		want string
	}{
		{ForeignOp{Kind: ForeignDeleteTable, Family: FamilyIP, Table: "calico"}, "delete table ip calico"},
		{ForeignOp{Kind: ForeignDeleteRule, Family: FamilyIP6, Table: "filter", Chain: "FORWARD", Handle: 42}, "delete rule ip6 filter FORWARD handle 42"},
		{ForeignOp{Kind: ForeignFlushChain, Family: FamilyIP, Table: "filter", Chain: "cali-pi-default/web"}, `flush chain ip filter "cali-pi-default/web"`},
		{ForeignOp{Kind: ForeignDeleteChain, Family: FamilyIP, Table: "nat", Chain: "cali-nat-outgoing"}, "delete chain ip nat cali-nat-outgoing"},
		{ForeignOp{Kind: 99, Family: FamilyARP, Table: "calico-arp"}, "foreign operation 99 on arp calico-arp"},
	} {
		assert.Equal(t, c.want, c.op.String())
	}
}

// TestForeignBatch: the removals are encoded as the kernel's DELTABLE,
// DELRULE (with a handle: one rule; without: a flush) and DELCHAIN
// messages of their own families, in order, and a refusal names the
// operation; an unknown family or kind is refused before anything is sent.
func TestForeignBatch(t *testing.T) {
	ops := []ForeignOp{
		{Kind: ForeignDeleteRule, Family: FamilyIP, Table: "filter", Chain: "FORWARD", Handle: 7},
		{Kind: ForeignFlushChain, Family: FamilyIP, Table: "filter", Chain: "cali-FORWARD"},
		{Kind: ForeignDeleteChain, Family: FamilyIP, Table: "filter", Chain: "cali-FORWARD"},
		{Kind: ForeignDeleteTable, Family: FamilyIP6, Table: "calico"},
		{Kind: ForeignDeleteTable, Family: FamilyARP, Table: "calico-arp"},
	}
	tx := &Transaction{Foreign: ops}
	b, err := encodeBatch(unix.NFPROTO_UNSPEC, "", tx, nil, 0)
	require.NoError(t, err)
	defer b.release()

	type msg struct {
		typ    uint16
		family uint8
		attrs  map[uint16]string
		handle uint64
	}
	var got []msg
	var seqs []uint32
	require.NoError(t, forEachMsg(bytes.Join(b.iovecs(), nil), func(m nlMsg) error {
		if m.typ == unix.NFNL_MSG_BATCH_BEGIN || m.typ == unix.NFNL_MSG_BATCH_END {
			return nil
		}
		g := msg{typ: m.typ & 0xff, family: m.data[0], attrs: map[uint16]string{}}
		forEachAttr(payload(m.data), func(t uint16, v []byte) {
			if t == unix.NFTA_RULE_HANDLE && len(v) == 8 {
				g.handle = binary.BigEndian.Uint64(v)
				return
			}
			g.attrs[t] = string(bytes.TrimRight(v, "\x00"))
		})
		got = append(got, g)
		seqs = append(seqs, m.seq)
		return nil
	}))
	assert.Equal(t, []msg{
		{unix.NFT_MSG_DELRULE, unix.NFPROTO_IPV4, map[uint16]string{unix.NFTA_RULE_TABLE: "filter", unix.NFTA_RULE_CHAIN: "FORWARD"}, 7},
		{unix.NFT_MSG_DELRULE, unix.NFPROTO_IPV4, map[uint16]string{unix.NFTA_RULE_TABLE: "filter", unix.NFTA_RULE_CHAIN: "cali-FORWARD"}, 0},
		{unix.NFT_MSG_DELCHAIN, unix.NFPROTO_IPV4, map[uint16]string{unix.NFTA_CHAIN_TABLE: "filter", unix.NFTA_CHAIN_NAME: "cali-FORWARD"}, 0},
		{unix.NFT_MSG_DELTABLE, unix.NFPROTO_IPV6, map[uint16]string{unix.NFTA_TABLE_NAME: "calico"}, 0},
		{unix.NFT_MSG_DELTABLE, unix.NFPROTO_ARP, map[uint16]string{unix.NFTA_TABLE_NAME: "calico-arp"}, 0},
	}, got)
	// The kernel names a refused message by its sequence number; the
	// error then names the removal.
	assert.Contains(t, b.describe(tx, seqs[2]), "delete chain ip filter cali-FORWARD")
	assert.Equal(t, "5 removals in other tables (ip filter, ip6 calico, arp calico-arp)", describeForeign(ops))

	_, err = encodeBatch(unix.NFPROTO_UNSPEC, "", &Transaction{Foreign: []ForeignOp{{Kind: ForeignDeleteTable, Family: "nope", Table: "x"}}}, nil, 0)
	assert.ErrorContains(t, err, `unknown family "nope"`)
	_, err = encodeBatch(unix.NFPROTO_UNSPEC, "", &Transaction{Foreign: []ForeignOp{{Kind: 99, Family: FamilyIP, Table: "x"}}}, nil, 0)
	assert.ErrorContains(t, err, "unknown kind")
}

// TestParseForeignExprs: of a rule's expressions, the reader keeps the
// targets of jump and goto verdicts and the texts of iptables' comment
// matches, and skips everything else.
func TestParseForeignExprs(t *testing.T) {
	var e enc
	list := e.nest(unix.NFTA_RULE_EXPRESSIONS)
	verdict := func(code uint32, chain string) {
		el := e.nest(unix.NFTA_LIST_ELEM)
		e.str(unix.NFTA_EXPR_NAME, "immediate")
		data := e.nest(unix.NFTA_EXPR_DATA)
		e.be32(unix.NFTA_IMMEDIATE_DREG, 0)
		d := e.nest(unix.NFTA_IMMEDIATE_DATA)
		v := e.nest(unix.NFTA_DATA_VERDICT)
		e.be32(unix.NFTA_VERDICT_CODE, code)
		if chain != "" {
			e.str(unix.NFTA_VERDICT_CHAIN, chain)
		}
		for _, off := range []int{v, d, data, el} {
			require.NoError(t, e.end(off))
		}
	}
	match := func(name, info string) {
		el := e.nest(unix.NFTA_LIST_ELEM)
		e.str(unix.NFTA_EXPR_NAME, "match")
		data := e.nest(unix.NFTA_EXPR_DATA)
		e.str(nftaMatchName, name)
		buf := make([]byte, 256)
		copy(buf, info)
		e.bytes(nftaMatchInfo, buf)
		require.NoError(t, e.end(data))
		require.NoError(t, e.end(el))
	}
	other := func() {
		el := e.nest(unix.NFTA_LIST_ELEM)
		e.str(unix.NFTA_EXPR_NAME, "counter")
		require.NoError(t, e.end(el))
	}
	match("comment", "cali:Ok3Tq-1S3ShLr7Fc")
	other()
	verdict(nftJump, "cali-FORWARD")
	verdict(nftGoto, "cali-from-wl-dispatch")
	verdict(uint32(nfAccept), "")
	match("mark", "\x01\x00")
	require.NoError(t, e.end(list))

	var r ForeignRule
	forEachAttr(e.b, func(t uint16, v []byte) { parseForeignExprs(v, &r) })
	assert.Equal(t, []string{"cali-FORWARD", "cali-from-wl-dispatch"}, r.Targets)
	assert.Equal(t, []string{"cali:Ok3Tq-1S3ShLr7Fc"}, r.Comments)
}

// TestForeignTableChain finds a chain of a ForeignTable by name.
func TestForeignTableChain(t *testing.T) {
	ft := &ForeignTable{Family: FamilyIP, Name: "filter", Chains: []*ForeignChain{{Name: "INPUT", Base: true}, {Name: "cali-INPUT"}}}
	require.NotNil(t, ft.Chain("cali-INPUT"))
	assert.False(t, ft.Chain("cali-INPUT").Base)
	assert.Nil(t, ft.Chain("cali-OUTPUT"))
}
