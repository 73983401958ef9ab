package dataplane

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	gproto "google.golang.org/protobuf/proto"
)

// TestStateFilePools: IP pools in a state file are objects of the snapshot:
// Messages carries them, Diff sends removals and changes only, and a bad
// pool is refused with an error naming the pool and the field (nothing is
// applied: NewSnapshot fails).
func TestStateFilePools(t *testing.T) {
	old := snapshotOf(t, `
config: {NATOutgoingExclusions: IPPoolsAndHostIPs}
updates:
  - hostMetadataUpdate: {hostname: node1, ipv4Addr: 192.168.60.11/24}
  - ipamPoolUpdate: {id: 10.65.0.0-16, pool: {cidr: 10.65.0.0/16, masquerade: true}}
  - ipamPoolUpdate: {id: 10.66.0.0-16, pool: {cidr: 10.66.0.0/16}}
  - ipamPoolUpdate: {id: fd00:65::-64, pool: {cidr: "fd00:65::/64", masquerade: true, vxlanMode: always}}
  - encapsulation: {vxlanEnabledV6: true}
`)
	names := func(msgs []gproto.Message) []string {
		var out []string
		for _, m := range msgs {
			out = append(out, string(gproto.MessageName(m).Name())+" "+objectID(m))
		}
		return out
	}
	assert.Equal(t, []string{
		"HostMetadataUpdate node1",
		"IPAMPoolUpdate 10.65.0.0-16", "IPAMPoolUpdate 10.66.0.0-16", "IPAMPoolUpdate fd00:65::-64",
		"Encapsulation ",
	}, names(old.Messages()))

	new := snapshotOf(t, `
updates:
  - hostMetadataUpdate: {hostname: node1, ipv4Addr: 192.168.60.11/24}
  - ipamPoolUpdate: {id: 10.65.0.0-16, pool: {cidr: 10.65.0.0/16, masquerade: false}}
  - ipamPoolUpdate: {id: fd00:65::-64, pool: {cidr: "fd00:65::/64", masquerade: true, vxlanMode: always}}
  - encapsulation: {vxlanEnabledV6: true}
`)
	assert.Equal(t, []string{"IPAMPoolRemove 10.66.0.0-16", "IPAMPoolUpdate 10.65.0.0-16"}, names(Diff(old, new)))
	assert.Empty(t, Diff(new, new))

	for _, tc := range []struct{ name, pool, want string }{
		{"bad CIDR", `{id: p, pool: {cidr: 10.65.0.0/33}}`, `updates[0] (ipamPoolUpdate p): pool.cidr: "10.65.0.0/33" is not a CIDR`},
		{"host bits", `{id: p, pool: {cidr: 10.65.0.1/16}}`, `updates[0] (ipamPoolUpdate p): pool.cidr: "10.65.0.1/16" has host bits set (the network is 10.65.0.0/16)`},
		{"wrong family", `{id: 10.65.0.0-16, pool: {cidr: "fd00::/64"}}`, `updates[0] (ipamPoolUpdate 10.65.0.0-16): pool.cidr: fd00::/64 is IPv6 but the pool id names an IPv4 network`},
		{"unknown mode", `{id: p, pool: {cidr: 10.65.0.0/16, vxlanMode: sometimes}}`, `updates[0] (ipamPoolUpdate p): pool.vxlanMode: unknown encapsulation mode "sometimes"`},
		{"unknown use", `{id: p, pool: {cidr: 10.65.0.0/16, allowedUses: [Workload, Pets]}}`, `pool.allowedUses[1]: unknown use "Pets"`},
		{"no pool", `{id: p}`, `updates[0] (ipamPoolUpdate p): pool: missing`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sf, err := ParseStateFile("node.yaml", []byte("updates:\n  - ipamPoolUpdate: "+tc.pool+"\n"))
			require.NoError(t, err)
			_, err = NewSnapshot(sf)
			require.Error(t, err)
			assert.True(t, strings.Contains(err.Error(), tc.want), "error %q\nwant it to contain %q", err, tc.want)
		})
	}
}
