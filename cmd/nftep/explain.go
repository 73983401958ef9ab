package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"strconv"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/nftep/nftep/dataplane"
	"github.com/nftep/nftep/explain"
	"github.com/nftep/nftep/internal/netnsutil"
)

func explainCmd(fs *flag.FlagSet) func(context.Context, *env) error {
	var req explain.Request
	fs.StringVar(&req.From, "from", "", "where the packet comes from: a workload ID or part of it (pod-a), a host endpoint, an interface, an IP address, or host (required)")
	fs.StringVar(&req.To, "to", "", "where it goes: the same kinds of name (required)")
	fs.StringVar(&req.Proto, "proto", "tcp", "tcp, udp, sctp, icmp or a protocol number")
	dport := fs.Uint("dport", 0, "destination port")
	sport := fs.Uint("sport", 0, "source port (default an ephemeral port, 40000)")
	icmpType := fs.Uint("icmp-type", 0, "ICMP type (default echo request)")
	icmpCode := fs.Uint("icmp-code", 0, "ICMP code")
	fs.StringVar(&req.State, "state", "new", "conntrack state: new, established, related, invalid or untracked")
	mark := fs.String("mark", "0", "packet mark on arrival")
	fs.BoolVar(&req.IPv6, "6", false, "use the endpoints' IPv6 addresses")
	src := fs.String("src", "", "source address to use instead of --from's (a spoofed source; an endpoint without a route)")
	dst := fs.String("dst", "", "destination address to use instead of --to's")
	asJSON := fs.Bool("json", false, "print the report as JSON (docs/json.md)")
	confirm := fs.Bool("confirm", false, "also send a real probe of the flow (tcp or udp, state new) from the source's namespace and show the kernel's trace of it beside the computed path")
	timeout := fs.Duration("timeout", time.Second, "with --confirm: how long the probe waits for an answer, and the trace for events")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: nftep explain --from A --to B [--proto P] [--dport N] [--state S] [--confirm] [--json]

Says what nftep's table does with a packet from A to B, and why: it reads the
table from the kernel (as nftep show does), asks the namespace's routing which
path the packet takes (input, forward or output) and whether the strict
reverse-path check passes, walks the packet through the base chains of each
hook in priority order, and prints every chain entered and rule matched, the
verdict with the rule that decided it, and the near misses that would change
it ("accept if the source address were in @ipset-…").

With --confirm it also sends one real packet of the flow, from the source
pod's network namespace (the other end of its veth; the node's for --from
host), with the nftrace bit set for that flow alone by a temporary table
(inet <table>-trace, deleted afterwards, and by the kernel if nftep dies), and
prints the kernel's trace of it beside the computed path.

`)
		fs.PrintDefaults()
	}
	return func(ctx context.Context, e *env) error {
		if req.From == "" || req.To == "" {
			return errors.New("explain: --from and --to are required")
		}
		for _, p := range []struct {
			name string
			v    uint
			max  uint
			dst  func(uint)
		}{
			{"--dport", *dport, 65535, func(v uint) { req.DPort = uint16(v) }},
			{"--sport", *sport, 65535, func(v uint) { req.SPort = uint16(v) }},
			{"--icmp-type", *icmpType, 255, func(v uint) { req.ICMPType = uint8(v) }},
			{"--icmp-code", *icmpCode, 255, func(v uint) { req.ICMPCode = uint8(v) }},
		} {
			if p.v > p.max {
				return fmt.Errorf("explain: %s %d: at most %d", p.name, p.v, p.max)
			}
			p.dst(p.v)
		}
		m, err := strconv.ParseUint(*mark, 0, 32)
		if err != nil {
			return fmt.Errorf("explain: --mark %q: want a 32-bit number", *mark)
		}
		req.Mark = uint32(m)
		for _, a := range []struct {
			flag, v string
			dst     *netip.Addr
		}{{"--src", *src, &req.Src}, {"--dst", *dst, &req.Dst}} {
			if a.v == "" {
				continue
			}
			if *a.dst, err = netip.ParseAddr(a.v); err != nil {
				return fmt.Errorf("explain: %s %q: not an IP address", a.flag, a.v)
			}
		}

		k, err := dataplane.ReadKernel(ctx, e.options())
		if err != nil {
			return fmt.Errorf("explain: %w", err)
		}
		if !k.INet.Exists {
			return fmt.Errorf("explain: the kernel holds no table inet %s", k.Table)
		}
		ns := e.ns
		if ns == nil {
			ns = netnsutil.Current()
		}
		nl, err := ns.Netlink()
		if err != nil {
			return fmt.Errorf("explain: %w", err)
		}
		defer nl.Close()
		rep, err := explain.Explain(k.INet.Model, explain.NewNetlinkFacts(nl), req)
		if err != nil {
			return fmt.Errorf("explain: %w", err)
		}
		if *confirm {
			src, err := probeSource(ns, nl, rep.From)
			if err != nil {
				return fmt.Errorf("explain --confirm: %w", err)
			}
			if src != ns {
				defer src.Close()
			}
			rep.Confirmation, err = explain.Confirm(ctx, rep, explain.ConfirmRequest{
				Node: ns, Source: src, Table: k.INet, TraceTable: k.Table + "-trace", Timeout: *timeout})
			if err != nil {
				return fmt.Errorf("explain --confirm: %w", err)
			}
		}
		if *asJSON {
			return printJSON(e, rep.JSON())
		}
		rep.Print(e.stdout)
		return nil
	}
}

// probeSource is the namespace a --confirm probe is sent from: the node's
// for a packet from the host, else the namespace at the other end of the
// source's interface.
func probeSource(node *netnsutil.NS, nl *netlink.Handle, from explain.End) (*netnsutil.NS, error) {
	if from.Kind == "host" {
		return node, nil
	}
	name, err := explain.PeerNamespace(nl, from.Iface)
	if err != nil {
		return nil, fmt.Errorf("where to send the probe from: %w", err)
	}
	return netnsutil.Open(name)
}
