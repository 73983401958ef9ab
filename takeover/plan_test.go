package takeover

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/nftep/nftep/nft"
)

// TestPlan: Felix's whole tables; in shared tables its cali- chains
// (flushed, then deleted) and the rules of other chains that jump to one
// or carry its comment; nothing else (kube-proxy's table, a user's rule, a
// chain of Docker's, a base chain named like Felix's).
func TestPlan(t *testing.T) {
	tables := []*nft.ForeignTable{
		{Family: nft.FamilyIP, Name: "calico"},
		{Family: nft.FamilyARP, Name: "calico-arp"},
		{Family: nft.FamilyIP, Name: "kube-proxy", Chains: []*nft.ForeignChain{{Name: "cali-lookalike"}}},
		{Family: nft.FamilyIP, Name: "filter", Chains: []*nft.ForeignChain{
			{Name: "FORWARD", Base: true, Rules: []nft.ForeignRule{
				{Handle: 5, Comments: []string{"user rule"}},
				{Handle: 6, Targets: []string{"cali-FORWARD"}, Comments: []string{"cali:wUHhoiAYhphO9Mso"}},
				{Handle: 7, Comments: []string{"cali:S93hcgKJrXEqnTfs", "Policy explicitly accepted packet."}},
				{Handle: 8, Targets: []string{"DOCKER-USER"}},
			}},
			{Name: "DOCKER-USER", Rules: []nft.ForeignRule{{Handle: 9}}},
			{Name: "cali-FORWARD", Rules: []nft.ForeignRule{{Handle: 10, Targets: []string{"cali-empty"}}}},
			{Name: "cali-empty"},
		}},
	}
	f := plan(tables)
	var got []string
	for _, o := range f.Ops {
		got = append(got, o.String())
	}
	assert.Equal(t, []string{
		"delete table ip calico",
		"delete table arp calico-arp",
		"delete rule ip filter FORWARD handle 6",
		"delete rule ip filter FORWARD handle 7",
		"flush chain ip filter cali-FORWARD",
		"delete chain ip filter cali-FORWARD",
		"delete chain ip filter cali-empty",
	}, got)
	assert.Equal(t, "tables ip calico, arp calico-arp, 2 cali- chains, 2 rules in other chains", f.String())
	assert.True(t, plan(nil).Empty())
}

func TestWatched(t *testing.T) {
	for table, want := range map[string]bool{
		"ip calico": true, "ip6 calico": true, "arp calico-arp": true, "ip filter": true, "ip6 raw": true,
		"inet filter": false, "ip kube-proxy": false, "inet nftep": false, "arp calico": false,
	} {
		assert.Equal(t, want, watched(table), table)
	}
}
