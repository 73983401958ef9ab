package nft

// Fuzz targets for every parser of bytes the kernel sends: datagrams of
// netlink messages and error replies, the generation, the attributes of
// chain, rule and set dumps, events, and set elements. None may panic on
// anything; `go test` runs the seeds, `go test -fuzz=FuzzX` searches.

import (
	"testing"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// seedMessages are real shapes: a GETGEN answer, a dump reply, errors.
func seedMessages() [][]byte {
	var e enc
	e.reset(msgType(unix.NFT_MSG_NEWGEN), 0, 1, 0)
	e.be32(unix.NFTA_GEN_ID, 42)
	gen := append([]byte(nil), e.finish()...)
	e.reset(msgType(unix.NFT_MSG_NEWRULE), unix.NLM_F_MULTI, 2, unix.NFPROTO_INET)
	e.str(unix.NFTA_RULE_TABLE, testTable)
	e.str(unix.NFTA_RULE_CHAIN, "filter-input")
	e.bytes(unix.NFTA_RULE_USERDATA, ruleUserData(rule("c", accept)))
	rule := append([]byte(nil), e.finish()...)
	e.reset(msgType(unix.NFT_MSG_NEWCHAIN), unix.NLM_F_MULTI, 3, unix.NFPROTO_INET)
	e.str(unix.NFTA_CHAIN_TABLE, testTable)
	e.str(unix.NFTA_CHAIN_NAME, "filter-input")
	h := e.nest(unix.NFTA_CHAIN_HOOK)
	e.be32(unix.NFTA_HOOK_HOOKNUM, 1)
	e.be32(unix.NFTA_HOOK_PRIORITY, 0)
	_ = e.end(h)
	chain := append([]byte(nil), e.finish()...)
	return [][]byte{gen, rule, chain, ack(4, 0, 22, "Could not process rule"), ack(5, 0, 0, ""), append(gen, rule...), {}, {1, 2, 3}}
}

func FuzzDatagram(f *testing.F) {
	for _, s := range seedMessages() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = forEachMsg(b, func(m nlMsg) error {
			parseNLError(m)
			parseGen(m.data)
			parseWriter(m.data)
			parseGenID(m.data)
			eventTable(netlink.Message{Header: netlink.Header{Type: netlink.HeaderType(m.typ)}, Data: m.data})
			parseRule(m, []byte(testTable+"\x00"))
			forEachAttr(payload(m.data), func(typ uint16, v []byte) {
				if typ == unix.NFTA_CHAIN_HOOK {
					parseHook(unix.NFPROTO_INET, v, "filter", 0)
					parseHook(unix.NFPROTO_ARP, v, "filter", 1)
				}
			})
			eventConcerns(netlink.Message{Header: netlink.Header{Type: netlink.HeaderType(m.typ)}, Data: m.data}, unix.NFPROTO_INET, testTable)
			return nil
		})
	})
}

// FuzzDecodeElements decodes set elements as a dump returns them (key,
// key end, flags, verdict data) for each kind of set of the vocabulary.
func FuzzDecodeElements(f *testing.F) {
	sets := []*Set{
		{Name: "v4", Key: []KeyType{TypeIPv4Addr}, Interval: true},
		{Name: "if", Key: []KeyType{TypeIfName}, Data: DataVerdict},
		{Name: "cc", Key: []KeyType{TypeIfName, TypeIPv4Addr}, Interval: true},
		{Name: "mk", Key: []KeyType{TypeMark}, Data: DataMark},
	}
	f.Add(0, []byte{10, 0, 0, 0}, []byte{10, 255, 255, 255}, false)
	f.Add(1, []byte("cali1\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"), []byte{}, false)
	f.Add(2, []byte{}, []byte{}, true)
	f.Add(3, []byte{0, 0, 1, 0}, []byte{}, false)
	f.Fuzz(func(t *testing.T, which int, key, keyEnd []byte, end bool) {
		s := sets[((which%len(sets))+len(sets))%len(sets)]
		ke := nftables.SetElement{Key: key, KeyEnd: keyEnd, IntervalEnd: end}
		if s.Data == DataMark {
			ke.Val = key
		}
		_, _ = decodeElements(s, []nftables.SetElement{ke})
		_, _ = unpackKey(s, key)
	})
}
