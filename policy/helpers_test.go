package policy

// Test machinery.
//
// Conventions: the default render config (mark mask 0xffff0000, so Accept
// is 0x00010000 and Pass 0x00020000; deny action drop); policies are
// global ("GlobalNetworkPolicy") in tier "default" unless a test says
// otherwise; the chain "test-endpoint" stands for the endpoint chains that
// jump to policy and profile chains.

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nftep/nftep/internal/testutil"
	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/proto"
	"github.com/nftep/nftep/render"
)

// refChain is the stand-in for endpoint chains.
const refChain = "test-endpoint"

type harness struct {
	t     testing.TB
	cfg   render.Config
	model *nft.Model
	m     *Manager
	// jumps are the policy jumps of the chains setChain wrote.
	jumps map[string][]string
}

func newHarness(t testing.TB, cfgs ...func(*render.Config)) *harness {
	t.Helper()
	return newHarnessOn(t, nil, cfgs...)
}

// newHarnessOn is newHarness writing into model (a kernel table's desired
// state), or into a new model when model is nil.
func newHarnessOn(t testing.TB, model *nft.Model, cfgs ...func(*render.Config)) *harness {
	t.Helper()
	cfg := render.DefaultConfig()
	for _, f := range cfgs {
		f(&cfg)
	}
	if model == nil {
		model = nft.NewModel(nft.FamilyINet, cfg.TableName)
	}
	return &harness{t: t, cfg: cfg, model: model, m: New(cfg, model, nil)}
}

// step feeds msgs to the manager, runs CompleteDeferredWork and checks that
// the model is valid (every jump and set reference resolves, no overlapping
// intervals): what nft.Table would check before sending anything.
func (h *harness) step(msgs ...any) {
	h.t.Helper()
	for _, msg := range msgs {
		h.m.OnUpdate(msg)
	}
	if err := h.m.CompleteDeferredWork(); err != nil {
		h.t.Fatalf("CompleteDeferredWork: %v", err)
	}
	if err := h.model.Validate(); err != nil {
		h.t.Fatalf("model invalid after step: %v\n%s", err, h.model)
	}
}

// jumpTo makes the stand-in endpoint chain jump to names (replacing its
// previous jumps), as the endpoint manager would.
func (h *harness) jumpTo(names ...string) {
	c := &nft.Chain{Name: refChain}
	for _, n := range names {
		c.Rules = append(c.Rules, &nft.Rule{Action: nft.Verdict{Kind: nft.Jump, Chain: n}})
	}
	h.setChain(c)
}

// setChain writes c into the model and tells the manager about its jumps
// to policy and profile chains, as the endpoint manager does for its
// chains.
func (h *harness) setChain(c *nft.Chain) {
	if h.jumps == nil {
		h.jumps = map[string][]string{}
	}
	h.model.SetChain(c)
	setWithJumps(h.m, h.jumps, c)
}

// deleteChain deletes a chain setChain wrote and releases its jumps.
func (h *harness) deleteChain(name string) {
	h.model.DeleteChain(name)
	for _, j := range h.jumps[name] {
		h.m.ReleaseChain(j)
	}
	delete(h.jumps, name)
}

// setWithJumps tells m that c (already in the model) jumps to its policy
// and profile chains, and that the chain it replaced (whose jumps jumps
// records) no longer does.
func setWithJumps(m *Manager, jumps map[string][]string, c *nft.Chain) {
	var cur []string
	for _, r := range c.Rules {
		if v, ok := r.Action.(nft.Verdict); ok && (v.Kind == nft.Jump || v.Kind == nft.Goto) && isPolicyChainName(v.Chain) {
			cur = append(cur, v.Chain)
			m.UseChain(v.Chain)
		}
	}
	for _, j := range jumps[c.Name] {
		m.ReleaseChain(j)
	}
	jumps[c.Name] = cur
}

// chain returns the model's chain as nft prints it, or "" when absent.
func (h *harness) chain(name string) string {
	c := h.model.Chain(name)
	if c == nil {
		return ""
	}
	return c.String()
}

// set returns the model's set as nft prints it, or "" when absent.
func (h *harness) set(name string) string {
	s := h.model.Set(name)
	if s == nil {
		return ""
	}
	return s.String()
}

// ourChains returns the names of the chains in the model other than the
// stand-in endpoint chain.
func (h *harness) ourChains() []string {
	var out []string
	for _, n := range h.model.ChainNames() {
		if n != refChain {
			out = append(out, n)
		}
	}
	return out
}

// wantText compares nft text, reporting the caller's line.
func wantText(t testing.TB, what, want, got string) {
	t.Helper()
	if diff := cmp.Diff(testutil.Dedent(want), got); diff != "" {
		t.Errorf("%s (called at %s) (-want +got):\n%s", what, callerLine(), diff)
	}
}

func callerLine() string {
	_, file, line, _ := runtime.Caller(2)
	return fmt.Sprintf("%s:%d", file[strings.LastIndex(file, "/")+1:], line)
}

// Message builders.

func gnp(name string) *proto.PolicyID {
	return &proto.PolicyID{Name: name, Kind: "GlobalNetworkPolicy"}
}

func policyUpdate(id *proto.PolicyID, tier string, in, out []*proto.Rule) *proto.ActivePolicyUpdate {
	return &proto.ActivePolicyUpdate{Id: id, Policy: &proto.Policy{Tier: tier, InboundRules: in, OutboundRules: out}}
}

func profileUpdate(name string, in, out []*proto.Rule) *proto.ActiveProfileUpdate {
	return &proto.ActiveProfileUpdate{Id: &proto.ProfileID{Name: name}, Profile: &proto.Profile{InboundRules: in, OutboundRules: out}}
}

func netSet(id string, members ...string) *proto.IPSetUpdate {
	return &proto.IPSetUpdate{Id: id, Type: proto.IPSetUpdate_NET, Members: members}
}

func protoName(n string) *proto.Protocol {
	return &proto.Protocol{NumberOrName: &proto.Protocol_Name{Name: n}}
}

func protoNum(n int32) *proto.Protocol {
	return &proto.Protocol{NumberOrName: &proto.Protocol_Number{Number: n}}
}

func ports(rs ...int32) []*proto.PortRange {
	var out []*proto.PortRange
	for i := 0; i+1 < len(rs); i += 2 {
		out = append(out, &proto.PortRange{First: rs[i], Last: rs[i+1]})
	}
	return out
}

// pi is the filter-layer inbound chain of a global policy in tier default.
func pi(name string) string {
	return render.PolicyChainName(render.LayerFilter, render.Ingress, "default", gnp(name))
}
