package render

import (
	"fmt"
	"strings"
	"testing"

	"github.com/nftep/nftep/nft"
)

// fatalTB turns Fatalf into a panic the test can recover, to check that the
// tracer refuses what it does not understand.
type fatalTB struct {
	testing.TB
}

type fatalMsg string

func (f fatalTB) Fatalf(format string, args ...any) { panic(fatalMsg(fmt.Sprintf(format, args...))) }
func (f fatalTB) Helper()                           {}

func tinyModel(rules map[string][]*nft.Rule, bases map[string]int, maps map[string]map[string]string) *nft.Model {
	m := nft.NewModel(nft.FamilyINet, "t")
	for name, rs := range rules {
		c := &nft.Chain{Name: name, Rules: rs}
		if prio, ok := bases[name]; ok {
			c.Base = &nft.BaseChain{Type: nft.ChainTypeFilter, Hook: nft.HookInput, Priority: prio, Policy: nft.PolicyAccept}
		}
		m.SetChain(c)
	}
	for name, elems := range maps {
		m.SetSet(&nft.Set{Name: name, Key: []nft.KeyType{nft.TypeIfName}, Data: nft.DataVerdict})
		for k, chain := range elems {
			m.SetElement(name, nft.Element{Key: k, Verdict: gotoP(chain)})
		}
	}
	return m
}

// TestTracer checks the tracer's own semantics on hand-built models.
func TestTracer(t *testing.T) {
	in := packet{path: pathInput, iif: "eth0", src: "10.0.0.1", dst: "10.0.0.2", proto: protoTCP, dport: 22}
	for _, tc := range []struct {
		name  string
		rules map[string][]*nft.Rule
		bases map[string]int
		maps  map[string]map[string]string
		want  string
		mark  uint32
	}{{
		name: "accept ends only its own base chain",
		rules: map[string][]*nft.Rule{
			"first":  {rule("accept all", accept)},
			"second": {rule("drop 22", drop, l4(protoTCP), dport(22))},
		},
		bases: map[string]int{"first": -10, "second": 0},
		want:  "drop",
	}, {
		name: "base chains run in priority order, not name order",
		rules: map[string][]*nft.Rule{
			"a-late":  {rule("drop unmarked", drop, markClear(0x1))},
			"z-early": {rule("mark", setBits(0x1))},
		},
		bases: map[string]int{"a-late": 0, "z-early": -100},
		want:  "accept", mark: 0x1,
	}, {
		name: "goto does not come back; return goes to the jumper's caller",
		rules: map[string][]*nft.Rule{
			"base": {rule("jump a", jump("a")), rule("mark after a", setBits(0x2))},
			"a":    {rule("goto b", gotoV("b")), rule("never", drop)},
			"b":    {rule("set", setBits(0x4)), rule("return", ret), rule("never", drop)},
		},
		bases: map[string]int{"base": 0},
		want:  "accept", mark: 0x6,
	}, {
		name: "vmap hit follows the element; miss falls through",
		rules: map[string][]*nft.Rule{
			"base": {rule("dispatch", nft.VMap{Key: nft.SelIIFName, Map: "m"}), rule("default", drop)},
			"eth0": {rule("mark", setBits(0x8))},
		},
		bases: map[string]int{"base": 0},
		maps:  map[string]map[string]string{"m": {"eth0": "eth0"}},
		want:  "accept", mark: 0x8,
	}, {
		name: "vmap miss reaches the default",
		rules: map[string][]*nft.Rule{
			"base": {rule("dispatch", nft.VMap{Key: nft.SelIIFName, Map: "m"}), rule("default", drop)},
			"eth1": {},
		},
		bases: map[string]int{"base": 0},
		maps:  map[string]map[string]string{"m": {"eth1": "eth1"}},
		want:  "drop",
	}, {
		name: "wildcard interface and mark masks",
		rules: map[string][]*nft.Rule{
			"base": {
				rule("set", setField(0xff00, 0x1200)),
				rule("mask mismatch", drop, nft.Mark{Mask: 0xff00, Value: 0x1300}),
				rule("eth* and mask match", nft.Reject{}, iifPrefix("eth"), nft.Mark{Mask: 0xff00, Value: 0x1200}),
			},
		},
		bases: map[string]int{"base": 0},
		want:  "reject", mark: 0x1200,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			m := tinyModel(tc.rules, tc.bases, tc.maps)
			got := tracePacket(t, m, in)
			if got.verdict != tc.want || got.mark != tc.mark {
				t.Errorf("got %s; want %s (mark %#x)", got, tc.want, tc.mark)
			}
		})
	}

	t.Run("unknown vocabulary fails", func(t *testing.T) {
		m := tinyModel(map[string][]*nft.Rule{
			"base": {rule("foreign", accept, l4(protoTCP), nft.Foreign{Text: "# unknown expression osf"})},
		}, map[string]int{"base": 0}, nil)
		defer func() {
			msg, ok := recover().(fatalMsg)
			if !ok || !strings.Contains(string(msg), "cannot evaluate") {
				t.Errorf("tracer did not refuse a foreign expression: %v", msg)
			}
		}()
		tracePacket(fatalTB{t}, m, in)
	})

	t.Run("missing jump target fails", func(t *testing.T) {
		m := tinyModel(map[string][]*nft.Rule{"base": {rule("jump", jump("nowhere"))}}, map[string]int{"base": 0}, nil)
		defer func() {
			msg, _ := recover().(fatalMsg)
			if !strings.Contains(string(msg), "does not exist") {
				t.Errorf("tracer did not refuse a missing chain: %q", msg)
			}
		}()
		tracePacket(fatalTB{t}, m, in)
	})
}
