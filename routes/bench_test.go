package routes

import (
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/nftep/nftep/internal/netnstest"
)

// Benchmarks against the kernel, in a namespace.
//
// Shape: a table of N workload routes spread over N/100 veth interfaces,
// 100 /32 routes (each with a static neighbour) per interface. Real nodes
// have one interface per workload, but creating 10,000 veth pairs takes
// minutes and the interface count does not change what is measured: the
// route table is one FIB whatever the devices, and Table's cost per change
// depends on the targets of the changed interface, which stays at 100.
//
//	go test -run '^$' -bench . -count 5 ./routes

const targetsPerIface = 100

// benchNode is a namespace with the veths of one benchmark size.
type benchNode struct {
	ns     *netnstest.NS
	ifaces []string
	index  map[string]int
}

func newBenchNode(b *testing.B, routes int) *benchNode {
	b.Helper()
	ns, peer := netnstest.New(b), netnstest.New(b)
	n := &benchNode{ns: ns, index: map[string]int{}}
	for i := range routes / targetsPerIface {
		name := fmt.Sprintf("cali%d", i)
		netnstest.Veth(b, ns, name, peer, fmt.Sprintf("p%d", i))
		n.ifaces = append(n.ifaces, name)
	}
	for _, name := range n.ifaces {
		n.index[name] = waitRunningB(b, ns, name)
	}
	return n
}

func waitRunningB(b *testing.B, ns *netnstest.NS, name string) int {
	b.Helper()
	for range 500 {
		if l := ns.Link(b, name); linkOperUp(l) {
			return l.Attrs().Index
		}
		time.Sleep(10 * time.Millisecond)
	}
	b.Fatalf("%s not running", name)
	return 0
}

// benchTargets returns the targets of interface i. With gen > 0 its first
// target moves to a fresh address (10.99.x.y), never used before in the run:
// re-adding a just-removed address would wait for that address's conntrack
// cleanup (B10), which is not what the benchmark measures.
func benchTargets(i, gen int) []Target {
	ts := make([]Target, 0, targetsPerIface)
	for j := range targetsPerIface {
		a := netip.AddrFrom4([4]byte{10, byte(64 + i/256), byte(i % 256), byte(j + 1)})
		if gen > 0 && j == 0 {
			a = netip.AddrFrom4([4]byte{10, 99, byte(gen / 250), byte(gen%250 + 1)})
		}
		ts = append(ts, Target{CIDR: netip.PrefixFrom(a, 32), DestMAC: net.HardwareAddr{0xee, 0xee, 0, byte(i), byte(j), 1}})
	}
	return ts
}

func (n *benchNode) table(b *testing.B) *Table {
	b.Helper()
	tbl, err := New(Config{Netlink: n.ns.Netlink()})
	if err != nil {
		b.Fatal(err)
	}
	return tbl
}

// flush removes every route and permanent neighbour we made, so that the
// next cold start really writes everything.
func (n *benchNode) flush(b *testing.B) {
	b.Helper()
	n.ns.Run(b, "ip", "route", "flush", "proto", "boot")
	n.ns.Run(b, "ip", "neigh", "flush", "nud", "permanent")
}

var benchSizes = []int{1000, 10000}

// BenchmarkApplyCold: SetRoutes for every interface and the first Apply
// (full resync, then every route and neighbour written) on an empty table.
func BenchmarkApplyCold(b *testing.B) {
	for _, size := range benchSizes {
		node := newBenchNode(b, size)
		b.Run(fmt.Sprintf("routes=%d", size), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				node.flush(b)
				tbl := node.table(b)
				b.StartTimer()
				for i, name := range node.ifaces {
					tbl.SetRoutes(name, benchTargets(i, 0))
				}
				if err := tbl.Apply(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(size), "routes/op")
		})
	}
}

// BenchmarkApplyOneChange: in a table of N routes, one interface's first
// address changes and Apply runs: one route delete, one route add, one
// neighbour set, and the old address queued for the background conntrack
// cleanup (which runs concurrently and is not waited for). Its cost must
// not grow with N.
func BenchmarkApplyOneChange(b *testing.B) {
	for _, size := range benchSizes {
		node := newBenchNode(b, size)
		b.Run(fmt.Sprintf("routes=%d", size), func(b *testing.B) {
			node.flush(b)
			tbl := node.table(b)
			for i, name := range node.ifaces {
				tbl.SetRoutes(name, benchTargets(i, 0))
			}
			if err := tbl.Apply(); err != nil {
				b.Fatal(err)
			}
			gen := 0
			for b.Loop() {
				gen++
				if gen == 250*256 {
					b.Fatal("out of fresh addresses")
				}
				tbl.SetRoutes(node.ifaces[3], benchTargets(3, gen))
				if err := tbl.Apply(); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			tbl.Close()
		})
	}
}

// BenchmarkResyncInSync: a full resync (relist links, routes, neighbours;
// compare) of a table of N routes that needs no change.
func BenchmarkResyncInSync(b *testing.B) {
	for _, size := range benchSizes {
		node := newBenchNode(b, size)
		b.Run(fmt.Sprintf("routes=%d", size), func(b *testing.B) {
			node.flush(b)
			tbl := node.table(b)
			for i, name := range node.ifaces {
				tbl.SetRoutes(name, benchTargets(i, 0))
			}
			if err := tbl.Apply(); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				tbl.QueueResync()
				if err := tbl.Apply(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
