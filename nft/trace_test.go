package nft

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mdlayher/netlink"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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

// traceNetlink wraps a trace message body as a received netlink message.
func traceNetlink(data []byte) netlink.Message {
	return netlink.Message{Header: netlink.Header{Type: netlink.HeaderType(msgType(unix.NFT_MSG_TRACE))}, Data: data}
}

func TestParseTraceEvent(t *testing.T) {
	typ := uint16(msgType(unix.NFT_MSG_TRACE))
	ev := func(e TraceEvent) TraceEvent {
		e.ID, e.Family, e.Table, e.NFProto, e.IIF = 9, unix.NFPROTO_INET, testTable, unix.NFPROTO_IPV4, 7
		return e
	}
	for _, tc := range []struct {
		name string
		data []byte
		want TraceEvent
		text string
	}{
		{"jump", traceMsg(unix.NFT_TRACETYPE_RULE, 9, "filter-input", 4, unix.NFT_JUMP, "sub"),
			ev(TraceEvent{Type: TraceRule, Chain: "filter-input", Handle: 4, Verdict: "jump sub"}),
			"trace 0x00000009 nftep chain filter-input rule handle 4: jump sub"},
		{"goto", traceMsg(unix.NFT_TRACETYPE_RULE, 9, "filter-input", 5, unix.NFT_GOTO, "ep"),
			ev(TraceEvent{Type: TraceRule, Chain: "filter-input", Handle: 5, Verdict: "goto ep"}),
			"trace 0x00000009 nftep chain filter-input rule handle 5: goto ep"},
		{"drop with an errno", traceMsg(unix.NFT_TRACETYPE_RULE, 9, "c", 6, -int32(unix.EPERM)<<16, ""),
			ev(TraceEvent{Type: TraceRule, Chain: "c", Handle: 6, Verdict: "drop"}),
			"trace 0x00000009 nftep chain c rule handle 6: drop"},
		{"accept", traceMsg(unix.NFT_TRACETYPE_RULE, 9, "c", 7, 1, ""),
			ev(TraceEvent{Type: TraceRule, Chain: "c", Handle: 7, Verdict: "accept"}), ""},
		{"a statement: continue", traceMsg(unix.NFT_TRACETYPE_RULE, 9, "c", 8, unix.NFT_CONTINUE, ""),
			ev(TraceEvent{Type: TraceRule, Chain: "c", Handle: 8, Verdict: "continue"}), ""},
		{"return", traceMsg(unix.NFT_TRACETYPE_RULE, 9, "c", 9, unix.NFT_RETURN, ""),
			ev(TraceEvent{Type: TraceRule, Chain: "c", Handle: 9, Verdict: "return"}), ""},
		{"break", traceMsg(unix.NFT_TRACETYPE_RULE, 9, "c", 10, unix.NFT_BREAK, ""),
			ev(TraceEvent{Type: TraceRule, Chain: "c", Handle: 10, Verdict: "break"}), ""},
		{"stolen", traceMsg(unix.NFT_TRACETYPE_RULE, 9, "c", 11, 2, ""),
			ev(TraceEvent{Type: TraceRule, Chain: "c", Handle: 11, Verdict: "stolen"}), ""},
		{"queue", traceMsg(unix.NFT_TRACETYPE_RULE, 9, "c", 12, 3|5<<16, ""),
			ev(TraceEvent{Type: TraceRule, Chain: "c", Handle: 12, Verdict: "queue"}), ""},
		{"a verdict nftep never uses", traceMsg(unix.NFT_TRACETYPE_RULE, 9, "c", 13, 7, ""),
			ev(TraceEvent{Type: TraceRule, Chain: "c", Handle: 13, Verdict: "verdict 7"}), ""},
		{"end of chain: a rule event without a handle", traceMsg(unix.NFT_TRACETYPE_RULE, 9, "sub", 0, unix.NFT_CONTINUE, ""),
			ev(TraceEvent{Type: TraceReturn, Chain: "sub", Verdict: "continue"}),
			"trace 0x00000009 nftep chain sub return"},
		{"return event", traceMsg(unix.NFT_TRACETYPE_RETURN, 9, "sub", 3, unix.NFT_CONTINUE, ""),
			ev(TraceEvent{Type: TraceReturn, Chain: "sub", Handle: 3, Verdict: "continue"}), ""},
		{"policy", traceMsg(unix.NFT_TRACETYPE_POLICY, 9, "filter-input", 0, 1, ""),
			ev(TraceEvent{Type: TracePolicy, Chain: "filter-input", Policy: "accept"}),
			"trace 0x00000009 nftep chain filter-input policy accept"},
		{"policy drop", traceMsg(unix.NFT_TRACETYPE_POLICY, 9, "filter-input", 0, 0, ""),
			ev(TraceEvent{Type: TracePolicy, Chain: "filter-input", Policy: "drop"}), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseTraceEvent(typ, tc.data)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			if tc.text != "" {
				assert.Equal(t, tc.text, got.String())
			}
		})
	}

	// Kernels without NFTA_TRACE_POLICY give a policy as the verdict.
	var e enc
	e.reset(msgType(unix.NFT_MSG_TRACE), 0, 0, unix.NFPROTO_INET)
	e.str(unix.NFTA_TRACE_CHAIN, "filter-input")
	e.be32(unix.NFTA_TRACE_TYPE, unix.NFT_TRACETYPE_POLICY)
	e.be32(unix.NFTA_TRACE_ID, 1)
	v := e.nest(unix.NFTA_TRACE_VERDICT)
	e.be32(unix.NFTA_VERDICT_CODE, 0)
	require.NoError(t, e.end(v))
	e.be32(unix.NFTA_TRACE_OIF, 3)
	e.be32(unix.NFTA_TRACE_MARK, 0x10)
	got, err := ParseTraceEvent(typ, e.finish()[16:])
	require.NoError(t, err)
	assert.Equal(t, TraceEvent{ID: 1, Type: TracePolicy, Family: unix.NFPROTO_INET, Chain: "filter-input", Verdict: "drop", Policy: "drop", OIF: 3, Mark: 0x10}, got)

	_, err = ParseTraceEvent(uint16(msgType(unix.NFT_MSG_NEWRULE)), traceMsg(1, 1, "c", 1, 1, ""))
	assert.ErrorIs(t, err, errNotTrace, "a NEWRULE message")
	_, err = ParseTraceEvent(typ, []byte{1, 0})
	assert.ErrorContains(t, err, "shorter than its nfgenmsg")
	_, err = ParseTraceEvent(typ, []byte{1, 0, 0, 0, 0xff})
	assert.Error(t, err, "a truncated attribute")
	e.reset(msgType(unix.NFT_MSG_TRACE), 0, 0, unix.NFPROTO_INET)
	e.str(unix.NFTA_TRACE_CHAIN, "c")
	e.be32(unix.NFTA_TRACE_ID, 1)
	_, err = ParseTraceEvent(typ, e.finish()[16:])
	assert.EqualError(t, err, "trace event without a type or an id")
}

func TestTraceTypeString(t *testing.T) {
	assert.Equal(t, "rule", TraceRule.String())
	assert.Equal(t, "return", TraceReturn.String())
	assert.Equal(t, "policy", TracePolicy.String())
	assert.Equal(t, "type 9", TraceType(9).String())
}

// TestTraceCollect: a listener returns the events of the traced packets
// once the trace has gone quiet, skipping messages that are not trace
// events; it waits as long as nothing came yet, and gives up when its
// context ends.
func TestTraceCollect(t *testing.T) {
	q := newEventQueue(16)
	l := &TraceListener{c: q}
	defer l.Close()
	q.push([]netlink.Message{
		traceNetlink(traceMsg(unix.NFT_TRACETYPE_RULE, 1, "filter-input", 4, unix.NFT_JUMP, "filter-fw-v1")),
		{Header: netlink.Header{Type: netlink.HeaderType(msgType(unix.NFT_MSG_NEWGEN))}, Data: []byte{0, 0, 0, 0}},
		traceNetlink([]byte{1, 0}),
	})
	q.push([]netlink.Message{
		traceNetlink(traceMsg(unix.NFT_TRACETYPE_RULE, 1, "filter-fw-v1", 9, 1, "")),
	})
	start := time.Now()
	events, err := l.Collect(context.Background(), 20*time.Millisecond)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, time.Since(start), 20*time.Millisecond, "returned before the trace went quiet")
	var lines []string
	for _, e := range events {
		lines = append(lines, e.String())
	}
	assert.Equal(t, []string{
		"trace 0x00000001 nftep chain filter-input rule handle 4: jump filter-fw-v1",
		"trace 0x00000001 nftep chain filter-fw-v1 rule handle 9: accept",
	}, lines)

	// Nothing traced: the context's deadline ends the wait, without error.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	events, err = l.Collect(ctx, time.Millisecond)
	assert.NoError(t, err)
	assert.Empty(t, events)

	// Events lost: an error.
	q.max = 0
	q.push(nil)
	_, err = l.Collect(context.Background(), time.Millisecond)
	assert.ErrorIs(t, err, unix.ENOBUFS)
	assert.True(t, strings.HasPrefix(err.Error(), "receive trace events: "), err.Error())
}

// TestTraceCollectDeadline: a read deadline in the past is the end of the
// wait, as os.ErrDeadlineExceeded.
func TestTraceCollectDeadline(t *testing.T) {
	q := newEventQueue(1)
	require.NoError(t, q.SetReadDeadline(time.Now().Add(-time.Second)))
	_, err := q.Receive()
	assert.ErrorIs(t, err, os.ErrDeadlineExceeded)
	require.NoError(t, q.Close())
	require.NoError(t, q.SetReadDeadline(time.Time{}))
	_, err = q.Receive()
	assert.Error(t, err, "a closed queue")
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
