package nft

import (
	"testing"

	"golang.org/x/sys/unix"
)

// traceMsg builds an NFT_MSG_TRACE message body as the kernel sends it
// (nf_tables_trace.c): the nfgenmsg, then the attributes.
func traceMsg(typ uint32, id uint32, chain string, handle uint64, verdict int32, jumpTo string) []byte {
	var e enc
	e.reset(msgType(unix.NFT_MSG_TRACE), 0, 0, unix.NFPROTO_INET)
	e.str(unix.NFTA_TRACE_TABLE, testTable)
	e.str(unix.NFTA_TRACE_CHAIN, chain)
	if handle != 0 {
		e.bytes(unix.NFTA_TRACE_RULE_HANDLE, []byte{0, 0, 0, 0, 0, 0, byte(handle >> 8), byte(handle)})
	}
	e.be32(unix.NFTA_TRACE_TYPE, typ)
	e.be32(unix.NFTA_TRACE_ID, id)
	if typ == unix.NFT_TRACETYPE_POLICY {
		e.be32(unix.NFTA_TRACE_POLICY, uint32(verdict))
	} else {
		v := e.nest(unix.NFTA_TRACE_VERDICT)
		e.be32(unix.NFTA_VERDICT_CODE, uint32(verdict))
		if jumpTo != "" {
			e.str(unix.NFTA_VERDICT_CHAIN, jumpTo)
		}
		_ = e.end(v)
	}
	e.be32(unix.NFTA_TRACE_NFPROTO, unix.NFPROTO_IPV4)
	e.be32(unix.NFTA_TRACE_IIF, 7)
	b := e.finish()
	return append([]byte(nil), b[16:]...) // what follows the netlink header
}

func TestParseTraceEvent(t *testing.T) {
	typ := uint16(msgType(unix.NFT_MSG_TRACE))
	for _, tc := range []struct {
		name string
		data []byte
		want TraceEvent
	}{
		{"jump", traceMsg(unix.NFT_TRACETYPE_RULE, 9, "filter-input", 4, unix.NFT_JUMP, "sub"),
			TraceEvent{ID: 9, Type: TraceRule, Family: unix.NFPROTO_INET, Table: testTable, Chain: "filter-input", Handle: 4, Verdict: "jump sub", NFProto: unix.NFPROTO_IPV4, IIF: 7}},
		{"drop with an errno", traceMsg(unix.NFT_TRACETYPE_RULE, 9, "c", 6, -int32(unix.EPERM)<<16, ""),
			TraceEvent{ID: 9, Type: TraceRule, Family: unix.NFPROTO_INET, Table: testTable, Chain: "c", Handle: 6, Verdict: "drop", NFProto: unix.NFPROTO_IPV4, IIF: 7}},
		{"end of chain: a rule event without a handle", traceMsg(unix.NFT_TRACETYPE_RULE, 9, "sub", 0, unix.NFT_CONTINUE, ""),
			TraceEvent{ID: 9, Type: TraceReturn, Family: unix.NFPROTO_INET, Table: testTable, Chain: "sub", Verdict: "continue", NFProto: unix.NFPROTO_IPV4, IIF: 7}},
		{"policy", traceMsg(unix.NFT_TRACETYPE_POLICY, 9, "filter-input", 0, 1, ""),
			TraceEvent{ID: 9, Type: TracePolicy, Family: unix.NFPROTO_INET, Table: testTable, Chain: "filter-input", Policy: "accept", NFProto: unix.NFPROTO_IPV4, IIF: 7}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseTraceEvent(typ, tc.data)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
	if _, err := ParseTraceEvent(uint16(msgType(unix.NFT_MSG_NEWRULE)), traceMsg(1, 1, "c", 1, 1, "")); err != errNotTrace {
		t.Errorf("a NEWRULE message: %v, want errNotTrace", err)
	}
	if _, err := ParseTraceEvent(typ, []byte{1, 0}); err == nil {
		t.Errorf("2 bytes parsed as a trace event")
	}
}

// FuzzTraceEvent feeds ParseTraceEvent what a trace listener could
// receive: it must never panic.
func FuzzTraceEvent(f *testing.F) {
	f.Add(traceMsg(unix.NFT_TRACETYPE_RULE, 9, "filter-input", 4, unix.NFT_JUMP, "sub"))
	f.Add(traceMsg(unix.NFT_TRACETYPE_POLICY, 9, "filter-input", 0, 1, ""))
	f.Add(traceMsg(unix.NFT_TRACETYPE_RULE, 9, "sub", 0, unix.NFT_CONTINUE, ""))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := ParseTraceEvent(uint16(msgType(unix.NFT_MSG_TRACE)), b)
		if err == nil {
			_ = e.String()
		}
	})
}
