package nft

import (
	"context"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nftep/nftep/internal/netnstest"
)

// TestKernelTrace sets the nftrace bit of one flow from an owned table of
// its own, sends a packet of that flow, and reads the kernel's trace
// events: each rule of our table that matched (by handle, with its
// verdict), the implicit return of a regular chain, and nothing for rules
// that did not match. Closing the owned table's Table makes the kernel
// delete it.
func TestKernelTrace(t *testing.T) {
	node, peer := netnstest.New(t), netnstest.New(t)
	netnstest.Veth(t, node, "v1", peer, "eth0")
	node.AddAddr(t, "v1", "10.0.1.1/24")
	peer.AddAddr(t, "eth0", "10.0.1.2/24")

	udp := func(port uint16) []Match {
		return []Match{L4Proto{Protos: []uint8{17}}, Port{Dir: Out, Ranges: []PortRange{{port, port}}}}
	}
	ours := newKernelTable(t, node)
	m := ours.Desired()
	m.SetChain(&Chain{Name: "filter-input", Base: &BaseChain{Type: ChainTypeFilter, Hook: HookInput, Priority: PriorityFilter, Policy: PolicyAccept},
		Rules: []*Rule{
			{Action: SetMark{And: ^uint32(0x10), Xor: 0x10}, Comment: "statement: continue"},
			{Match: udp(7777), Action: jump("sub")},
			{Match: udp(1), Action: drop, Comment: "does not match"},
			{Match: udp(7777), Action: drop, Comment: "decides"},
		}})
	m.SetChain(regular("sub", &Rule{Match: udp(2), Action: accept, Comment: "does not match"}))
	mustApply(t, ours)

	trace, err := NewTable(TableConfig{Family: FamilyINet, Name: "nftep-trace", NetNSFd: node.Fd(), Owned: true})
	if err != nil {
		t.Fatal(err)
	}
	defer trace.Close()
	trace.Desired().SetChain(&Chain{Name: "prerouting", Base: &BaseChain{Type: ChainTypeFilter, Hook: HookPrerouting, Priority: -400, Policy: PolicyAccept},
		Rules: []*Rule{{Match: udp(7777), Action: SetNftrace{}}}})
	mustApply(t, trace)

	l, err := ListenTrace(node.Fd())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := peer.Do(func() error {
		c, err := net.Dial("udp4", "10.0.1.1:7777")
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Write([]byte("traced"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	events, err := l.Collect(ctx, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}

	k, err := ReadKernelTable(context.Background(), node.Fd(), FamilyINet, testTable)
	if err != nil {
		t.Fatal(err)
	}
	handle := map[uint64]string{}
	for chain, rules := range k.Rules {
		for i, r := range rules {
			handle[r.Handle] = chain + "[" + string(rune('0'+i)) + "]"
		}
	}
	var got []string
	for _, e := range events {
		if e.ID != events[0].ID {
			t.Errorf("events of two packets: %v and %v", events[0], e)
		}
		switch {
		case e.Table == "nftep-trace" && e.Type == TracePolicy:
			got = append(got, "trace table policy "+e.Policy)
		case e.Table == "nftep-trace":
			got = append(got, "trace table "+e.Type.String()+" "+e.Verdict)
		case e.Type == TraceRule:
			got = append(got, handle[e.Handle]+" "+e.Verdict)
		default:
			got = append(got, e.Chain+" "+e.Type.String()+" "+e.Verdict)
		}
	}
	want := []string{
		"trace table rule continue",
		"trace table return continue",
		"trace table policy accept",
		"filter-input[0] continue",
		"filter-input[1] jump sub",
		"sub return continue",
		"filter-input[3] drop",
	}
	if !slices.Equal(got, want) {
		t.Errorf("trace events:\n  got  %s\n  want %s", strings.Join(got, "\n       "), strings.Join(want, "\n       "))
	}

	// The owned table goes with its socket.
	if err := trace.Close(); err != nil {
		t.Fatal(err)
	}
	if out := node.Run(t, "nft", "list", "tables"); strings.Contains(out, "nftep-trace") {
		t.Errorf("the owned table outlived its socket:\n%s", out)
	}
}
