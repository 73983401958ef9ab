package felix_test

// Every stream a real Felix wrote (testdata/felix), read with our schema
// and parsed with this package: what a real Felix sends, felix accepts.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/nftep/nftep/felix"
	"github.com/nftep/nftep/internal/testutil"
	"github.com/nftep/nftep/proto"
)

// recording is one recorded stream and what it must hold.
type recording struct {
	name string
	// firstSeq is the sequence number of its first frame (a delta
	// continues the stream before it on the same pipe).
	firstSeq uint64
	// frames is the number of frames.
	frames int
	// undeclared are the ToDataplane field numbers of the payloads our
	// schema leaves out, and how many frames carry each.
	undeclared map[protowire.Number]int
	// hostname is FelixHostname in its ConfigUpdate ("" without one).
	hostname string
}

var recordings = []recording{
	{name: "real-felix-session.bin", frames: 24, hostname: "node1"},
	{name: "real-felix-rules.bin", frames: 49, hostname: "node1", undeclared: map[protowire.Number]int{19: 5, 21: 3}},
	{name: "real-felix-rules-restart.bin", frames: 46, hostname: "node1", undeclared: map[protowire.Number]int{19: 5, 21: 3}},
	{name: "two-node/scenario1-n1.bin", frames: 11, hostname: "node1"},
	{name: "two-node/scenario1-n2.bin", frames: 12, hostname: "node2"},
	{name: "two-node/scenario2-delta-n1.bin", firstSeq: 11, frames: 4},
	{name: "two-node/scenario2-delta-n2.bin", firstSeq: 12, frames: 4},
	{name: "two-node/scenario3-n1.bin", frames: 31, hostname: "node1"},
	{name: "two-node/scenario3-n2.bin", frames: 48, hostname: "node2"},
	{name: "two-node/scenario4-n1.bin", frames: 27, hostname: "node1"},
	{name: "two-node/scenario4-n2.bin", frames: 28, hostname: "node2"},
}

// readRecording returns the messages of a recorded stream.
func readRecording(t *testing.T, name string) []*proto.ToDataplane {
	t.Helper()
	r := proto.NewReader(bytes.NewReader(testutil.ReadFelixRecording(t, name)))
	var out []*proto.ToDataplane
	for {
		m, err := r.ReadToDataplane()
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err, "%s: frame %d", name, len(out))
		out = append(out, m)
	}
}

// kind is the name of a message's payload type, as Felix names it
// ("WorkloadEndpointUpdate"), or "" when our schema does not declare it.
func kind(m *proto.ToDataplane) string {
	r := m.ProtoReflect()
	fd := r.WhichOneof(r.Descriptor().Oneofs().ByName("payload"))
	if fd == nil {
		return ""
	}
	return string(fd.Message().Name())
}

// unknownFields returns the numbers of the fields m, or a message inside
// it, holds that our schema does not declare.
func unknownFields(t *testing.T, m protoreflect.Message) []protowire.Number {
	t.Helper()
	var out []protowire.Number
	for b := m.GetUnknown(); len(b) > 0; {
		num, _, n := protowire.ConsumeField(b)
		require.GreaterOrEqual(t, n, 0, "unknown field bytes %x", []byte(b))
		out = append(out, num)
		b = b[n:]
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList() && fd.Message() != nil:
			for i := 0; i < v.List().Len(); i++ {
				out = append(out, unknownFields(t, v.List().Get(i).Message())...)
			}
		case fd.IsMap() && fd.MapValue().Message() != nil:
			v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
				out = append(out, unknownFields(t, mv.Message())...)
				return true
			})
		case !fd.IsList() && !fd.IsMap() && fd.Message() != nil:
			out = append(out, unknownFields(t, v.Message())...)
		}
		return true
	})
	return out
}

// txtCounts reads the last line of a two-node .txt transcript ("…: 11
// frames: ActivePolicyUpdate=1 …"): the number of frames and the count of
// each message type, as Felix's own schema decoded them.
func txtCounts(t *testing.T, name string) (int, map[string]int) {
	t.Helper()
	var last string
	sc := bufio.NewScanner(bytes.NewReader(testutil.ReadFelixRecording(t, name)))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) != "" {
			last = sc.Text()
		}
	}
	require.NoError(t, sc.Err())
	_, rest, ok := strings.Cut(last, ": ")
	require.True(t, ok, "%s: last line %q", name, last)
	var frames int
	_, err := fmt.Sscanf(rest, "%d frames:", &frames)
	require.NoError(t, err, "%s: last line %q", name, last)
	counts := map[string]int{}
	_, list, _ := strings.Cut(rest, "frames:")
	for _, f := range strings.Fields(list) {
		k, v, ok := strings.Cut(f, "=")
		require.True(t, ok, "%s: %q", name, f)
		var n int
		_, err := fmt.Sscanf(v, "%d", &n)
		require.NoError(t, err, "%s: %q", name, f)
		counts[k] = n
	}
	return frames, counts
}

// TestRecordedStreamsParse reads every recorded stream: frames numbered
// without a gap, no unknown field but the payloads our schema leaves out on
// purpose, the same message types as Felix's own transcript, and every
// address, CIDR, MAC, interface name and IP-set member parses with this
// package.
func TestRecordedStreamsParse(t *testing.T) {
	for _, rec := range recordings {
		t.Run(rec.name, func(t *testing.T) {
			msgs := readRecording(t, rec.name)
			require.Len(t, msgs, rec.frames)

			counts := map[string]int{}
			undeclared := map[protowire.Number]int{}
			setTypes := map[string]proto.IPSetUpdate_IPSetType{}
			for i, m := range msgs {
				where := fmt.Sprintf("frame %d", i)
				assert.Equal(t, rec.firstSeq+uint64(i), m.GetSequenceNumber(), where)
				unknown := unknownFields(t, m.ProtoReflect())
				if kind(m) == "" {
					require.Len(t, unknown, 1, "%s: no payload we know, and not exactly one we leave out", where)
					undeclared[unknown[0]]++
					continue
				}
				assert.Empty(t, unknown, "%s (%s): fields our schema does not declare", where, kind(m))
				counts[kind(m)]++
				checkParses(t, where, m, setTypes)
			}
			assert.Equal(t, rec.undeclared, nilIfEmpty(undeclared), "payloads our schema leaves out")
			assert.Equal(t, 1, counts["InSync"]+boolInt(rec.firstSeq > 0), "InSync exactly once (a delta has none)")

			if cfg := msgs[0].GetConfigUpdate(); rec.hostname != "" {
				require.NotNil(t, cfg, "frame 0 is the ConfigUpdate")
				c := felix.NewConfig(cfg.GetConfig())
				assert.Equal(t, rec.hostname, c.String("FelixHostname", ""))
				assert.False(t, c.Bool("UseInternalDataplaneDriver", true), "Felix ran with an external driver")
				assert.Equal(t, "/usr/local/bin/nftep-felix-driver", c.String("DataplaneDriver", ""))
				assert.NoError(t, c.Err())
			}

			if txt, ok := strings.CutSuffix(rec.name, ".bin"); ok && strings.HasPrefix(rec.name, "two-node/") {
				frames, want := txtCounts(t, txt+".txt")
				assert.Equal(t, rec.frames, frames, "frames in the transcript")
				assert.Equal(t, want, counts, "message types: Felix's transcript against our schema")
			}
		})
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func nilIfEmpty[K comparable, V any](m map[K]V) map[K]V {
	if len(m) == 0 {
		return nil
	}
	return m
}

// checkParses parses every string of m that felix has a parser for.
// setTypes remembers each IP set's type for its later deltas.
func checkParses(t *testing.T, where string, m *proto.ToDataplane, setTypes map[string]proto.IPSetUpdate_IPSetType) {
	t.Helper()
	addr := func(field, s string) {
		t.Helper()
		if s != "" {
			_, err := felix.ParseAddr(s)
			assert.NoError(t, err, "%s: %s", where, field)
		}
	}
	cidr := func(field, s string) {
		t.Helper()
		_, err := felix.ParseCIDR(s)
		assert.NoError(t, err, "%s: %s", where, field)
	}
	members := func(id string, ms []string) {
		t.Helper()
		typ, ok := setTypes[id]
		require.True(t, ok, "%s: a delta of IP set %s before its update", where, id)
		for _, s := range ms {
			_, err := felix.ParseMember(typ, s)
			assert.NoError(t, err, "%s: IP set %s", where, id)
		}
	}
	switch {
	case m.GetWorkloadEndpointUpdate() != nil:
		u := m.GetWorkloadEndpointUpdate()
		_, err := felix.ParseWorkload(u.GetEndpoint(), true)
		assert.NoError(t, err, "%s: workload %s", where, u.GetId().GetWorkloadId())
	case m.GetHostEndpointUpdate() != nil:
		u := m.GetHostEndpointUpdate()
		_, err := felix.ParseHostEndpoint(u.GetEndpoint())
		assert.NoError(t, err, "%s: host endpoint %s", where, u.GetId().GetEndpointId())
	case m.GetIpsetUpdate() != nil:
		u := m.GetIpsetUpdate()
		setTypes[u.GetId()] = u.GetType()
		members(u.GetId(), u.GetMembers())
	case m.GetIpsetDeltaUpdate() != nil:
		u := m.GetIpsetDeltaUpdate()
		members(u.GetId(), u.GetAddedMembers())
		members(u.GetId(), u.GetRemovedMembers())
	case m.GetRouteUpdate() != nil:
		u := m.GetRouteUpdate()
		cidr("route dst", u.GetDst())
		addr("route dst_node_ip", u.GetDstNodeIp())
	case m.GetVtepUpdate() != nil:
		u := m.GetVtepUpdate()
		for field, s := range map[string]string{"mac": u.GetMac(), "mac_v6": u.GetMacV6()} {
			_, err := felix.ParseMAC(s)
			assert.NoError(t, err, "%s: VTEP %s %s", where, u.GetNode(), field)
		}
		addr("ipv4_addr", u.GetIpv4Addr())
		addr("parent_device_ip", u.GetParentDeviceIp())
		addr("ipv6_addr", u.GetIpv6Addr())
		addr("parent_device_ipv6", u.GetParentDeviceIpv6())
	case m.GetIpamPoolUpdate() != nil:
		cidr("pool cidr", m.GetIpamPoolUpdate().GetPool().GetCidr())
	case m.GetHostMetadataUpdate() != nil:
		u := m.GetHostMetadataUpdate()
		// A node's addresses come with their subnet's length
		// ("192.168.60.11/24"), not bare.
		cidr("host ipv4_addr", u.GetIpv4Addr())
		if u.GetIpv6Addr() != "" {
			cidr("host ipv6_addr", u.GetIpv6Addr())
		}
	}
}

// TestRecordedSessionEndpoints: the session's workloads parse to the
// addresses the README gives them.
func TestRecordedSessionEndpoints(t *testing.T) {
	nets := map[string][]netip.Prefix{}
	for _, m := range readRecording(t, "real-felix-session.bin") {
		if u := m.GetWorkloadEndpointUpdate(); u != nil {
			w, err := felix.ParseWorkload(u.GetEndpoint(), true)
			require.NoError(t, err)
			nets[u.GetId().GetWorkloadId()] = append(slices.Clone(w.Nets[felix.IPv4]), w.Nets[felix.IPv6]...)
		}
	}
	assert.Equal(t, map[string][]netip.Prefix{
		"default/p1": {netip.MustParsePrefix("10.65.0.1/32"), netip.MustParsePrefix("fd00:65::1/128")},
		"default/p2": {netip.MustParsePrefix("10.65.0.2/32")},
		"default/p3": {netip.MustParsePrefix("10.65.0.3/32"), netip.MustParsePrefix("fd00:65::3/128")},
	}, nets)
}

// TestRecordedVXLANTunnels: in scenario 3 each node learns both nodes'
// tunnel endpoints; node2's MACs are those Felix's own dataplane put in
// node1's forwarding table (two-node/README.md).
func TestRecordedVXLANTunnels(t *testing.T) {
	type vtep struct{ mac, addr, parent, mac6, addr6, parent6 string }
	want := map[string]vtep{
		"node1": {"66:f9:37:c3:7e:94", "10.65.1.0", "192.168.60.11", "66:0f:35:f2:60:df", "fd00:65::1:0", "fd00:60::11"},
		"node2": {"66:2d:bf:44:a6:8b", "10.65.2.0", "192.168.60.12", "66:32:42:ed:de:d5", "fd00:65::2:0", "fd00:60::12"},
	}
	for _, name := range []string{"two-node/scenario3-n1.bin", "two-node/scenario3-n2.bin"} {
		got := map[string]vtep{}
		for _, m := range readRecording(t, name) {
			if u := m.GetVtepUpdate(); u != nil {
				got[u.GetNode()] = vtep{u.GetMac(), u.GetIpv4Addr(), u.GetParentDeviceIp(), u.GetMacV6(), u.GetIpv6Addr(), u.GetParentDeviceIpv6()}
			}
		}
		assert.Equal(t, want, got, name)
	}
}

// TestRecordedRoutesByPoolType: with VXLAN (scenario 3) the routes of the
// pools' blocks are VXLAN routes of both families; with IPIP (scenario 4)
// the IPv4 ones are IPIP and the IPv6 ones unencapsulated, as the README
// says.
func TestRecordedRoutesByPoolType(t *testing.T) {
	poolTypes := func(name string) map[string][]string {
		out := map[string][]string{}
		for _, m := range readRecording(t, name) {
			u := m.GetRouteUpdate()
			if u == nil || u.GetIpPoolType() == proto.IPPoolType_NONE {
				continue
			}
			p, err := felix.ParseCIDR(u.GetDst())
			require.NoError(t, err)
			fam := "ipv4"
			if felix.FamilyOf(p.Addr()) == felix.IPv6 {
				fam = "ipv6"
			}
			out[fam] = append(out[fam], u.GetIpPoolType().String())
		}
		for k := range out {
			slices.Sort(out[k])
			out[k] = slices.Compact(out[k])
		}
		return out
	}
	assert.Equal(t, map[string][]string{"ipv4": {"VXLAN"}, "ipv6": {"VXLAN"}}, poolTypes("two-node/scenario3-n1.bin"))
	assert.Equal(t, map[string][]string{"ipv4": {"IPIP"}, "ipv6": {"NO_ENCAP"}}, poolTypes("two-node/scenario4-n1.bin"))
	assert.ElementsMatch(t, []string{"ipv4", "ipv6"}, slices.Collect(maps.Keys(poolTypes("two-node/scenario4-n2.bin"))))
}
