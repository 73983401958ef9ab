package dataplane

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/proto"
	"github.com/nftep/nftep/routes"
)

// TestInvalidModelWritesNothing: when either table's model is invalid (a
// bug of nftep's), program writes nothing anywhere: no transaction, not
// even the other table's, no interface sysctl, no route. A whole `apply`
// relies on it instead of a dry run of its own.
func TestInvalidModelWritesNothing(t *testing.T) {
	for _, fam := range []nft.Family{nft.FamilyINet, nft.FamilyARP} {
		t.Run(string(fam), func(t *testing.T) {
			e, k := badInputEngine(t)
			e.update(routes.InterfaceStateUpdate{Name: "cali1", State: routes.IfaceUp, Index: 5})
			e.update(Payload(wepUpdate("ns/a", "cali1", "10.0.0.1")))
			if err := e.compute(); err != nil {
				t.Fatal(err)
			}
			tbl := e.inet
			if fam == nft.FamilyARP {
				tbl = e.arp
			}
			bad := &nft.Chain{Name: "bad name"}
			tbl.Desired().SetChain(bad)
			_, err := e.program(context.Background(), false, true)
			if !nft.IsInvalid(err) {
				t.Fatalf("program: %v, want an invalid-model error", err)
			}
			if n := len(k.nft.Transactions()); n != 0 {
				t.Errorf("%d transactions sent, want none", n)
			}
			if w := k.sys.Writes(); len(w) != 0 {
				t.Errorf("sysctls written: %v, want none", w)
			}
			if k.routes.applies != 0 {
				t.Errorf("routes applied %d times, want none", k.routes.applies)
			}

			// Once the model is valid again, the same engine programs
			// everything.
			tbl.Desired().DeleteChain(bad.Name)
			if _, err := e.program(context.Background(), false, true); err != nil {
				t.Fatal(err)
			}
			if len(k.nft.Transactions()) == 0 || len(k.sys.Writes()) == 0 || k.routes.applies == 0 {
				t.Errorf("after the repair: %d transactions, %d sysctl writes, %d route applies; want some of each",
					len(k.nft.Transactions()), len(k.sys.Writes()), k.routes.applies)
			}
		})
	}
}

// TestRulesetFilesStream: the ruleset files written a piece at a time hold
// exactly what the whole strings did (engine.ruleset, json.Marshal of
// engine.tablesJSON), which the control socket still serves.
func TestRulesetFilesStream(t *testing.T) {
	e, _ := badInputEngine(t)
	e.update(routes.InterfaceStateUpdate{Name: "cali1", State: routes.IfaceUp, Index: 5})
	ep := wepUpdate("ns/a", "cali1", "10.0.0.1")
	ep.GetWorkloadEndpointUpdate().Endpoint.Tiers = []*proto.TierInfo{{Name: "default", IngressPolicies: []*proto.PolicyID{{Name: "p"}}}}
	e.applyBatch(t,
		&proto.ToDataplane{Payload: &proto.ToDataplane_IpsetUpdate{IpsetUpdate: &proto.IPSetUpdate{Id: "s:x", Type: proto.IPSetUpdate_NET, Members: []string{"10.99.0.1/32", "10.98.0.0/16"}}}},
		&proto.ToDataplane{Payload: &proto.ToDataplane_ActivePolicyUpdate{ActivePolicyUpdate: &proto.ActivePolicyUpdate{Id: &proto.PolicyID{Name: "p"},
			Policy: &proto.Policy{InboundRules: []*proto.Rule{{Action: "allow", SrcIpSetIds: []string{"s:x"}}, {Action: "deny"}}}}}},
		ep)
	if e.arp == nil {
		t.Fatal("want an arp table too")
	}
	dir := t.TempDir()
	if err := writeRulesetFiles(dir, e.models()); err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile(filepath.Join(dir, RulesetFileName))
	if err != nil {
		t.Fatal(err)
	}
	if string(text) != e.ruleset() {
		t.Errorf("%s differs from engine.ruleset:\n%s", RulesetFileName, cmp.Diff(e.ruleset(), string(text)))
	}
	data, err := os.ReadFile(filepath.Join(dir, RulesetJSONFileName))
	if err != nil {
		t.Fatal(err)
	}
	want, err := json.Marshal(e.tablesJSON())
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != string(want)+"\n" {
		t.Errorf("%s differs from json.Marshal(tablesJSON):\n%s", RulesetJSONFileName, cmp.Diff(string(want)+"\n", string(data)))
	}
}
