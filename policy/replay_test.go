package policy

// Replay of a real Felix session (testdata/felix/README.md) through
// the endpoint manager and this manager, as the daemon wires them: every
// message to both, then the endpoint manager's batch, then ours.

import (
	"errors"
	"io"
	"net/netip"
	"os"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	gproto "google.golang.org/protobuf/proto"

	"github.com/nftep/nftep/endpoints"
	"github.com/nftep/nftep/internal/testutil"
	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/proto"
	"github.com/nftep/nftep/render"
)

// readSession returns the payload of every frame, in order (nil for a
// frame without one).
func readSession(t testing.TB) []gproto.Message {
	t.Helper()
	f, err := os.Open(testutil.FelixRecording(t, "real-felix-session.bin"))
	require.NoError(t, err)
	defer f.Close()
	r := proto.NewReader(f)
	var out []gproto.Message
	for {
		msg, err := r.ReadToDataplane()
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err, "frame %d", len(out))
		out = append(out, payload(msg))
	}
}

// payload returns the message inside the ToDataplane oneof.
func payload(m *proto.ToDataplane) gproto.Message {
	rm := m.ProtoReflect()
	fd := rm.WhichOneof(rm.Descriptor().Oneofs().ByName("payload"))
	if fd == nil {
		return nil
	}
	return rm.Get(fd).Message().Interface()
}

const trustedSet = "s:q38qNHN7nspDFoSFrokLyGaw-LedVU_14RKfcA"

func TestReplayRealFelixSession(t *testing.T) {
	frames := readSession(t)
	require.Len(t, frames, 24, "the README says 24 frames")
	rcfg := render.DefaultConfig()
	model := nft.NewModel(nft.FamilyINet, rcfg.TableName)
	pol := New(rcfg, model, nil)
	eps := endpoints.New(endpoints.DefaultConfig(), endpoints.Deps{Render: rcfg, Table: model, Policies: pol})
	// The interface monitor's report: the host endpoint's interface eth0
	// has its expected address, so the endpoint manager resolves it.
	eps.OnUpdate(endpoints.InterfaceStateUpdate{Name: "eth0", State: endpoints.IfaceUp, Index: 2})
	eps.OnUpdate(endpoints.InterfaceAddrsUpdate{Name: "eth0", Addrs: []netip.Addr{netip.MustParseAddr("192.168.50.1")}})

	blockIn := render.PolicyChainName(render.LayerFilter, render.Ingress, "security", gnp("security.block-9999"))
	blockOutMangle := render.PolicyChainName(render.LayerMangle, render.Egress, "security", gnp("security.block-9999"))
	only8080 := render.PolicyChainName(render.LayerFilter, render.Ingress, "default", gnp("p2-only-8080"))

	// One batch per frame: the strictest schedule, since every
	// intermediate state must be a valid table.
	for i, msg := range frames {
		eps.OnUpdate(msg)
		pol.OnUpdate(msg)
		require.NoError(t, eps.ResolveUpdateBatch(), "frame %d: ResolveUpdateBatch", i)
		require.NoError(t, eps.CompleteDeferredWork(), "frame %d: endpoints", i)
		require.NoError(t, pol.CompleteDeferredWork(), "frame %d: policy", i)
		require.NoError(t, model.Validate(), "frame %d (%T): invalid table", i, msg)
		for _, name := range model.ChainNames() {
			c := model.Chain(name)
			assert.NotContains(t, c.String(), "fail closed", "frame %d: chain %s fails closed: a message was lost or misread", i, name)
		}
		switch i {
		case 7:
			// The host endpoint's mangle egress chain evaluates its
			// profile: the profile's mangle chain is written too.
			assert.NotNil(t, model.Chain("mangle-pro-allow-all"), "frame 7: mangle-pro-allow-all for the host endpoint")
		case 18:
			// The host endpoint has tier security: its mangle egress chain
			// jumps to the policy's mangle chain.
			assert.NotNil(t, model.Chain(blockOutMangle), "frame 18: %s for the host endpoint", blockOutMangle)
		case 19:
			wantText(t, "frame 19: ports 8080 and 9000-9100", `
				chain filter-pi-default.p2-only-8080 {
					tcp dport { 8080, 9000-9100 } meta mark set meta mark | 0x00010000 return comment "policy default/p2-only-8080 inbound rule 0 id VKLTDh2Nsa_wnZe3"
				}
			`, model.Chain(only8080).String())
		}
	}

	// The end state the README describes.
	assert.Nil(t, model.Chain(only8080), "p2-only-8080 is still in the table")
	for _, name := range []string{blockOutMangle, "mangle-pro-allow-all"} {
		assert.Nil(t, model.Chain(name), "%s outlived the host endpoint", name)
	}
	var members []string
	for m := range pol.sets[trustedSet].members {
		members = append(members, m.Prefix.String())
	}
	slices.Sort(members)
	assert.Equal(t, []string{"10.65.0.0/28", "10.65.0.3/32", "192.168.50.0/24", "fd00:65::3/128"}, members, "trusted set members")
	var ours []string
	for _, name := range model.ChainNames() {
		if isPolicyChainName(name) {
			ours = append(ours, name)
		}
	}
	assert.Equal(t, []string{
		"filter-pi-default.from-trusted", blockIn,
		"filter-po-security.security.block-9999", "filter-pri-allow-all", "filter-pro-allow-all",
	}, ours, "policy and profile chains")
	var got string
	for _, name := range ours {
		got += model.Chain(name).String()
	}
	got += model.Set(IPSetName(trustedSet, nft.IPv4)).String() + model.Set(IPSetName(trustedSet, nft.IPv6)).String()
	wantText(t, "end state", `
		chain filter-pi-default.from-trusted {
			ip saddr @ipset-s.q38qNHN7nspDFoSFrokLyGaw-LedVU_14RKfcA-v4 meta mark set meta mark | 0x00010000 return comment "policy default/from-trusted inbound rule 0 id kPGBz96pIP9du6zk"
			ip6 saddr @ipset-s.q38qNHN7nspDFoSFrokLyGaw-LedVU_14RKfcA-v6 meta mark set meta mark | 0x00010000 return comment "policy default/from-trusted inbound rule 0 id kPGBz96pIP9du6zk"
		}
		chain filter-pi-security.security.block-9999 {
			tcp dport 9999 drop comment "policy security/security.block-9999 inbound rule 0 id 0iwq7jAGNIvYDR_k"
			meta mark set meta mark | 0x00020000 return comment "policy security/security.block-9999 inbound rule 1 id V7M29q6FCUrdYzmI"
		}
		chain filter-po-security.security.block-9999 {
			meta mark set meta mark | 0x00020000 return comment "policy security/security.block-9999 outbound rule 0 id ygFwVYP9X4l04cY5"
		}
		chain filter-pri-allow-all {
			meta mark set meta mark | 0x00010000 return comment "profile allow-all inbound rule 0 id css01wQIcKw_svIr"
		}
		chain filter-pro-allow-all {
			meta mark set meta mark | 0x00010000 return comment "profile allow-all outbound rule 0 id uqmdH0_P4jhQlK4F"
		}
		set ipset-s.q38qNHN7nspDFoSFrokLyGaw-LedVU_14RKfcA-v4 {
			type ipv4_addr
			flags interval
			comment "Felix IP set s:q38qNHN7nspDFoSFrokLyGaw-LedVU_14RKfcA"
			elements = { 10.65.0.0/28, 192.168.50.0/24 }
		}
		set ipset-s.q38qNHN7nspDFoSFrokLyGaw-LedVU_14RKfcA-v6 {
			type ipv6_addr
			flags interval
			comment "Felix IP set s:q38qNHN7nspDFoSFrokLyGaw-LedVU_14RKfcA"
			elements = { fd00:65::3 }
		}
	`, got)
}

// TestReplayEitherOrder: the managers may complete a batch in either
// order. With the policy manager first, every frame still leaves a valid
// table, and the session ends in the same ruleset: the endpoint manager
// hands over its references as it writes its chains (UseChain), so nothing
// depends on the policy manager reading the model after it.
func TestReplayEitherOrder(t *testing.T) {
	frames := readSession(t)
	final := map[bool]string{}
	for _, policyFirst := range []bool{false, true} {
		rcfg := render.DefaultConfig()
		model := nft.NewModel(nft.FamilyINet, rcfg.TableName)
		pol := New(rcfg, model, nil)
		eps := endpoints.New(endpoints.DefaultConfig(), endpoints.Deps{Render: rcfg, Table: model, Policies: pol})
		eps.OnUpdate(endpoints.InterfaceStateUpdate{Name: "eth0", State: endpoints.IfaceUp, Index: 2})
		eps.OnUpdate(endpoints.InterfaceAddrsUpdate{Name: "eth0", Addrs: []netip.Addr{netip.MustParseAddr("192.168.50.1")}})
		for i, msg := range frames {
			eps.OnUpdate(msg)
			pol.OnUpdate(msg)
			require.NoError(t, eps.ResolveUpdateBatch())
			steps := []func() error{eps.CompleteDeferredWork, pol.CompleteDeferredWork}
			if policyFirst {
				steps[0], steps[1] = steps[1], steps[0]
			}
			for _, step := range steps {
				require.NoError(t, step())
			}
			require.NoError(t, model.Validate(), "policy first %v, frame %d (%T): invalid table", policyFirst, i, msg)
		}
		final[policyFirst] = model.String()
	}
	assert.Equal(t, final[false], final[true], "the order of the managers changed the final ruleset")
}
