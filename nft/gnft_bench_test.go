//go:build gnftbench

package nft

// A throwaway measurement for docs/performance.md ("google/nftables, decided
// with numbers"): the cold start of BenchmarkCold's node-shaped table loaded
// through google/nftables' own API (AddTable, AddChain, AddSet,
// SetAddElements, AddRule, one Flush) instead of nftep's engine, in a child
// process so that its peak RSS is its own. Not part of the normal build:
//
//	go test -tags gnftbench -run '^$' -bench 'BenchmarkGnftCold' -benchtime 1x -count 5 ./nft
//
// The rules are nftep's own (queueRule: the same expressions and userdata
// the engine sends), so only the transport differs: google/nftables builds
// every message on its own, asks for an ACK per message and an echo per
// rule, and reads one reply per message after sending the batch.

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/nftep/nftep/internal/netnstest"
)

// gnftChildEnv carries the child's job: "<netns name> <workloads>".
const gnftChildEnv = "NFTEP_GNFT_CHILD"

// gnftBuf is the socket buffer size forced on google/nftables' socket:
// v0.3.0 reads one ACK per message (and an echo per rule) only after
// sending the whole batch, so the replies of a cold start must fit.
const gnftBuf = 1 << 30

// gnftElemChunk elements per SetAddElements call: v0.3.0 lets a list over
// 64 KiB wrap and the kernel then sees only part of it.
const gnftElemChunk = 500

func gnftHook(h Hook) *nftables.ChainHook {
	switch h {
	case HookPrerouting:
		return nftables.ChainHookPrerouting
	case HookInput:
		return nftables.ChainHookInput
	case HookForward:
		return nftables.ChainHookForward
	case HookOutput:
		return nftables.ChainHookOutput
	default:
		return nftables.ChainHookPostrouting
	}
}

// gnftLoad queues m on a new google/nftables connection in netns fd and
// flushes it as one batch. queued is the time spent queueing (building the
// messages), the rest of its time is Flush (send, kernel, replies).
func gnftLoad(m *Model, fd int) (queued time.Duration, err error) {
	start := time.Now()
	force := func(c *netlink.Conn) error {
		raw, err := c.SyscallConn()
		if err != nil {
			return err
		}
		var serr error
		if err := raw.Control(func(s uintptr) {
			if serr = unix.SetsockoptInt(int(s), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, gnftBuf); serr == nil {
				serr = unix.SetsockoptInt(int(s), unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, gnftBuf)
			}
		}); err != nil {
			return err
		}
		return serr
	}
	c, err := nftables.New(nftables.WithNetNSFd(fd), nftables.WithSockOptions(force))
	if err != nil {
		return 0, err
	}
	t := c.AddTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: m.Name})
	setNames, chainNames := m.PrintOrder()
	chains := map[string]*nftables.Chain{}
	for _, name := range chainNames {
		mc := m.Chain(name)
		ch := &nftables.Chain{Table: t, Name: name}
		if b := mc.Base; b != nil {
			pol := nftables.ChainPolicyAccept
			if b.Policy == PolicyDrop {
				pol = nftables.ChainPolicyDrop
			}
			ch.Type = nftables.ChainTypeFilter
			ch.Hooknum = gnftHook(b.Hook)
			ch.Priority = nftables.ChainPriorityRef(nftables.ChainPriority(b.Priority))
			ch.Policy = &pol
		}
		chains[name] = c.AddChain(ch)
	}
	for _, name := range setNames {
		s := m.Set(name)
		ns, err := encodeSet(t, s)
		if err != nil {
			return 0, err
		}
		if err := c.AddSet(ns, nil); err != nil {
			return 0, err
		}
		es := make([]Element, 0, len(s.Elements))
		for _, e := range s.Elements {
			es = append(es, e)
		}
		kes, err := encodeElements(s, es)
		if err != nil {
			return 0, err
		}
		for i := 0; i < len(kes); i += gnftElemChunk {
			j := min(i+gnftElemChunk, len(kes))
			for j < len(kes) && kes[j].IntervalEnd {
				j++
			}
			if err := c.SetAddElements(ns, kes[i:j]); err != nil {
				return 0, err
			}
			i = j - gnftElemChunk
		}
	}
	for _, name := range chainNames {
		for _, r := range m.Chain(name).Rules {
			if err := queueRule(c, t, chains[name], r); err != nil {
				return 0, err
			}
		}
	}
	queued = time.Since(start)
	return queued, c.Flush()
}

// TestGnftChild is the child process of BenchmarkGnftCold; it does nothing
// unless started as one.
func TestGnftChild(t *testing.T) {
	job := os.Getenv(gnftChildEnv)
	if job == "" {
		t.Skip("only as BenchmarkGnftCold's child")
	}
	var nsName string
	var workloads int
	if _, err := fmt.Sscanf(job, "%s %d", &nsName, &workloads); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open("/run/netns/" + nsName)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	start := time.Now()
	m := NewModel(FamilyINet, testTable)
	nodeModel(m, workloads, benchPolicies)
	built := time.Now()
	queued, err := gnftLoad(m, int(f.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	hwm, err := vmHWM()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(childResult{BuildNs: built.Sub(start).Nanoseconds(), ApplyNs: time.Since(built).Nanoseconds(), HWMKiB: hwm,
		EncodeNs: queued.Nanoseconds(), KernelNs: time.Since(built).Nanoseconds() - queued.Nanoseconds()})
	fmt.Printf("BENCHCHILD %s\n", b)
}

// BenchmarkGnftCold is BenchmarkCold with google/nftables as the transport:
// a child process builds the same model and loads it with one Flush. It
// checks the result by counting the rules the kernel holds.
func BenchmarkGnftCold(b *testing.B) {
	netnstest.RequireRoot(b)
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("workloads=%d", n), func(b *testing.B) {
			runtime.GC()
			var apply, proc, queued, flush time.Duration
			var rss int64
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				ns := netnstest.New(b)
				b.StartTimer()
				out, d, r := spawn(b, []string{fmt.Sprintf("%s=%s %d", gnftChildEnv, ns.Name, n)},
					os.Args[0], "-test.run=^TestGnftChild$", "-test.v")
				b.StopTimer()
				var res childResult
				for _, l := range strings.Split(out, "\n") {
					if v, ok := strings.CutPrefix(l, "BENCHCHILD "); ok {
						if err := json.Unmarshal([]byte(v), &res); err != nil {
							b.Fatal(err)
						}
					}
				}
				if res.ApplyNs == 0 {
					b.Fatalf("child output: %s", out)
				}
				proc += d
				apply += time.Duration(res.ApplyNs)
				queued += time.Duration(res.EncodeNs)
				flush += time.Duration(res.KernelNs)
				rss += max(r, res.HWMKiB)
				if i == 0 {
					gnftCheck(b, ns, n)
				}
				b.StartTimer()
			}
			N := float64(b.N)
			b.ReportMetric(apply.Seconds()/N, "gnft-apply-s")
			b.ReportMetric(proc.Seconds()/N, "gnft-proc-s")
			b.ReportMetric(float64(rss)/1024/N, "gnft-rss-MB")
			b.ReportMetric(queued.Seconds()/N, "gnft-queue-s")
			b.ReportMetric(flush.Seconds()/N, "gnft-flush-s")
		})
	}
}

// gnftCheck reads the table back through nftep's engine and fails unless
// it holds the whole model (no chain, rule or element lost).
func gnftCheck(b *testing.B, ns *netnstest.NS, n int) {
	b.Helper()
	tbl, err := NewTable(TableConfig{Family: FamilyINet, Name: testTable, NetNSFd: ns.Fd()})
	if err != nil {
		b.Fatal(err)
	}
	nodeModel(tbl.Desired(), n, benchPolicies)
	rs, err := tbl.Resync(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	if rs.Drift.Any() {
		b.Fatalf("google/nftables' load differs from the model: %s", rs.Drift)
	}
}
