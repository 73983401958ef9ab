package nft

// The kernel's packet trace: once a rule sets a packet's nftrace bit (`meta
// nftrace set 1`, see SetNftrace), nf_tables reports every rule that
// packet matches, every implicit return and every base-chain policy that
// decides it as an NFT_MSG_TRACE message to the NFNLGRP_NFTRACE group of
// the namespace (net/netfilter/nf_tables_trace.c; what `nft monitor trace`
// prints). ListenTrace subscribes; ParseTraceEvent reads one message.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// TraceType is what a trace event reports.
type TraceType uint32

const (
	// TraceRule: a rule matched, with the verdict it gave ("continue"
	// for a statement such as a mark set, after which the chain goes on).
	TraceRule TraceType = unix.NFT_TRACETYPE_RULE
	// TraceReturn: a chain ended without a verdict (or with return): a
	// regular chain's packet goes back to the chain that jumped there, a
	// base chain's meets its policy. Kernels report the implicit end of a
	// chain as a rule event without a rule handle; ParseTraceEvent makes
	// it a TraceReturn.
	TraceReturn TraceType = unix.NFT_TRACETYPE_RETURN
	// TracePolicy: a base chain ended and its policy decided.
	TracePolicy TraceType = unix.NFT_TRACETYPE_POLICY
)

func (t TraceType) String() string {
	switch t {
	case TraceRule:
		return "rule"
	case TraceReturn:
		return "return"
	case TracePolicy:
		return "policy"
	}
	return fmt.Sprintf("type %d", uint32(t))
}

// TraceEvent is one NFT_MSG_TRACE message.
type TraceEvent struct {
	// ID is the same for every event of one packet (a hash of the skb
	// and the time the trace started), so it tells packets apart.
	ID   uint32
	Type TraceType
	// Family is the table's family (NFPROTO_INET for an inet table).
	Family uint8
	Table  string
	Chain  string
	// Handle is the rule's handle (TraceRule, and TraceReturn where the
	// kernel names the last rule); 0 for a policy.
	Handle uint64
	// Verdict is the verdict as nft prints it: "accept", "drop",
	// "continue", "return", "jump <chain>", "goto <chain>", or
	// "verdict <code>" for one nftep never uses.
	Verdict string
	// Policy is the base chain's policy verdict of a TracePolicy event
	// ("accept" or "drop").
	Policy string
	// NFProto is the family of the packet: NFPROTO_IPV4 or NFPROTO_IPV6
	// in an inet table.
	NFProto uint32
	// IIF and OIF are the input and output interface indexes (0: none).
	IIF, OIF uint32
	// Mark is the packet mark when the event was made.
	Mark uint32
}

func (e TraceEvent) String() string {
	switch e.Type {
	case TracePolicy:
		return fmt.Sprintf("trace %#08x %s chain %s policy %s", e.ID, e.Table, e.Chain, e.Policy)
	case TraceReturn:
		return fmt.Sprintf("trace %#08x %s chain %s return", e.ID, e.Table, e.Chain)
	}
	return fmt.Sprintf("trace %#08x %s chain %s rule handle %d: %s", e.ID, e.Table, e.Chain, e.Handle, e.Verdict)
}

// errNotTrace is ParseTraceEvent's answer to a message of another type.
var errNotTrace = errors.New("not an NFT_MSG_TRACE message")

// ParseTraceEvent reads an NFT_MSG_TRACE message: typ is the netlink
// message type, data what follows the netlink header (the nfgenmsg, then
// the attributes). Malformed input is an error, never a panic.
func ParseTraceEvent(typ uint16, data []byte) (TraceEvent, error) {
	var e TraceEvent
	if typ != unix.NFNL_SUBSYS_NFTABLES<<8|unix.NFT_MSG_TRACE {
		return e, errNotTrace
	}
	if len(data) < 4 {
		return e, fmt.Errorf("trace event: %d bytes, shorter than its nfgenmsg", len(data))
	}
	e.Family = data[0]
	ad, err := netlink.NewAttributeDecoder(data[4:])
	if err != nil {
		return e, fmt.Errorf("trace event: %w", err)
	}
	ad.ByteOrder = binary.BigEndian
	var haveType, haveID, haveHandle bool
	for ad.Next() {
		switch ad.Type() {
		case unix.NFTA_TRACE_TABLE:
			e.Table = ad.String()
		case unix.NFTA_TRACE_CHAIN:
			e.Chain = ad.String()
		case unix.NFTA_TRACE_RULE_HANDLE:
			e.Handle, haveHandle = ad.Uint64(), true
		case unix.NFTA_TRACE_TYPE:
			e.Type, haveType = TraceType(ad.Uint32()), true
		case unix.NFTA_TRACE_ID:
			e.ID, haveID = ad.Uint32(), true
		case unix.NFTA_TRACE_VERDICT:
			ad.Nested(func(nd *netlink.AttributeDecoder) error {
				e.Verdict = parseTraceVerdict(nd)
				return nil
			})
		case unix.NFTA_TRACE_POLICY:
			e.Policy = verdictWord(int32(ad.Uint32()), "")
		case unix.NFTA_TRACE_NFPROTO:
			e.NFProto = ad.Uint32()
		case unix.NFTA_TRACE_IIF:
			e.IIF = ad.Uint32()
		case unix.NFTA_TRACE_OIF:
			e.OIF = ad.Uint32()
		case unix.NFTA_TRACE_MARK:
			e.Mark = ad.Uint32()
		}
	}
	if err := ad.Err(); err != nil {
		return e, fmt.Errorf("trace event: %w", err)
	}
	if !haveType || !haveID {
		return e, errors.New("trace event without a type or an id")
	}
	if e.Type == TraceRule && !haveHandle {
		e.Type = TraceReturn
	}
	if e.Type == TracePolicy && e.Policy == "" {
		// Kernels without NFTA_TRACE_POLICY give the policy as the verdict.
		e.Policy = e.Verdict
	}
	return e, nil
}

// parseTraceVerdict reads a nested NFTA_VERDICT_CODE and NFTA_VERDICT_CHAIN.
func parseTraceVerdict(nd *netlink.AttributeDecoder) string {
	nd.ByteOrder = binary.BigEndian
	var code int32
	var chain string
	for nd.Next() {
		switch nd.Type() {
		case unix.NFTA_VERDICT_CODE:
			code = int32(nd.Uint32())
		case unix.NFTA_VERDICT_CHAIN:
			chain = nd.String()
		}
	}
	return verdictWord(code, chain)
}

// verdictWord prints a verdict code as nft does. A drop may carry an errno
// in its upper bits (NF_DROP_ERR), hence the mask for netfilter verdicts.
func verdictWord(code int32, chain string) string {
	switch code {
	case unix.NFT_CONTINUE:
		return "continue"
	case unix.NFT_BREAK:
		return "break"
	case unix.NFT_JUMP:
		return "jump " + chain
	case unix.NFT_GOTO:
		return "goto " + chain
	case unix.NFT_RETURN:
		return "return"
	}
	// NF_DROP 0, NF_ACCEPT 1, NF_STOLEN 2, NF_QUEUE 3 under NF_VERDICT_MASK
	// 0xff (linux/netfilter.h; golang.org/x/sys/unix does not define them).
	switch uint32(code) & 0xff {
	case 0:
		return "drop"
	case 1:
		return "accept"
	case 2:
		return "stolen"
	case 3:
		return "queue"
	}
	return fmt.Sprintf("verdict %d", code)
}

// TraceListener receives the kernel's trace events of one namespace.
type TraceListener struct {
	c eventConn
}

// ListenTrace subscribes to the trace events of the namespace netnsFd
// refers to (≤ 0: the caller's). Events are only made for packets whose
// nftrace bit is set, so a listener costs nothing until a rule sets it.
func ListenTrace(netnsFd int) (*TraceListener, error) {
	// A traced packet makes an event per rule it matches; a few probe
	// packets make a few hundred at most.
	c, err := dialGroup(netnsFd, unix.NFNLGRP_NFTRACE, "nf_tables trace", 1<<20)
	if err != nil {
		return nil, err
	}
	return &TraceListener{c: c}, nil
}

// Collect returns the events received until ctx is done or quiet passes
// without one after the first. Events that cannot be parsed are skipped;
// a receive buffer that overflowed is an error (events were lost).
func (l *TraceListener) Collect(ctx context.Context, quiet time.Duration) ([]TraceEvent, error) {
	var out []TraceEvent
	for ctx.Err() == nil {
		deadline := time.Now().Add(quiet)
		if len(out) == 0 {
			deadline = time.Now().Add(time.Hour)
		}
		if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
			deadline = d
		}
		if err := l.c.SetReadDeadline(deadline); err != nil {
			return out, err
		}
		msgs, err := l.c.Receive()
		if errors.Is(err, os.ErrDeadlineExceeded) {
			if ctx.Err() != nil || len(out) > 0 {
				return out, nil
			}
			continue
		}
		if err != nil {
			return out, fmt.Errorf("receive trace events: %w", err)
		}
		for _, m := range msgs {
			if e, err := ParseTraceEvent(uint16(m.Header.Type), m.Data); err == nil {
				out = append(out, e)
			}
		}
	}
	return out, nil
}

// Close ends the subscription.
func (l *TraceListener) Close() error { return l.c.Close() }
