package dataplane

import (
	"bytes"
	"fmt"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"sigs.k8s.io/yaml"

	"github.com/nftep/nftep/proto"
)

// benchStateFile is a state file of n workloads (two policies each way, a
// profile, a MAC), 100 policies and 100 IP sets, as JSON.
func benchStateFile(b testing.TB, n int) []byte {
	b.Helper()
	var buf bytes.Buffer
	buf.WriteString(`{"config": {"InterfacePrefix": "cali"}, "updates": [`)
	add := func(m *proto.ToDataplane) {
		j, err := protojson.Marshal(m)
		if err != nil {
			b.Fatal(err)
		}
		if buf.Bytes()[buf.Len()-1] != '[' {
			buf.WriteString(",\n")
		}
		buf.Write(j)
	}
	for p := range 100 {
		add(&proto.ToDataplane{Payload: &proto.ToDataplane_IpsetUpdate{IpsetUpdate: &proto.IPSetUpdate{Id: fmt.Sprintf("s:set-%d", p), Type: proto.IPSetUpdate_NET,
			Members: []string{fmt.Sprintf("10.200.%d.1/32", p), fmt.Sprintf("10.200.%d.2/32", p)}}}})
		add(&proto.ToDataplane{Payload: &proto.ToDataplane_ActivePolicyUpdate{ActivePolicyUpdate: &proto.ActivePolicyUpdate{
			Id: &proto.PolicyID{Name: fmt.Sprintf("pol-%d", p)},
			Policy: &proto.Policy{Tier: "default", InboundRules: []*proto.Rule{{Action: "allow",
				Protocol: &proto.Protocol{NumberOrName: &proto.Protocol_Name{Name: "tcp"}}, SrcIpSetIds: []string{fmt.Sprintf("s:set-%d", p)},
				DstPorts: []*proto.PortRange{{First: int32(8000 + p), Last: int32(8000 + p)}}}}}}}})
	}
	add(&proto.ToDataplane{Payload: &proto.ToDataplane_ActiveProfileUpdate{ActiveProfileUpdate: &proto.ActiveProfileUpdate{
		Id: &proto.ProfileID{Name: "kns.demo"}, Profile: &proto.Profile{OutboundRules: []*proto.Rule{{Action: "allow"}}}}}})
	for i := range n {
		pol := func(k int) *proto.PolicyID { return &proto.PolicyID{Name: fmt.Sprintf("pol-%d", (i+k)%100)} }
		add(&proto.ToDataplane{Payload: &proto.ToDataplane_WorkloadEndpointUpdate{WorkloadEndpointUpdate: &proto.WorkloadEndpointUpdate{
			Id: &proto.WorkloadEndpointID{OrchestratorId: "k8s", WorkloadId: fmt.Sprintf("demo/pod-%d", i), EndpointId: "eth0"},
			Endpoint: &proto.WorkloadEndpoint{State: "active", Name: fmt.Sprintf("calie%06x", i), Mac: fmt.Sprintf("02:ee:00:%02x:%02x:%02x", i>>16&255, i>>8&255, i&255),
				Ipv4Nets: []string{fmt.Sprintf("10.%d.%d.%d/32", 64+i>>16, i>>8&255, i&255)}, ProfileIds: []string{"kns.demo"},
				Tiers: []*proto.TierInfo{{Name: "default", IngressPolicies: []*proto.PolicyID{pol(0), pol(1)}, EgressPolicies: []*proto.PolicyID{pol(2), pol(3)}}}},
		}}})
	}
	buf.WriteString("]}\n")
	return buf.Bytes()
}

// BenchmarkParseStateFile parses the state file of a node of 1,000 and
// 10,000 workloads as JSON and as YAML (MB/s is the file's size over the
// time), builds its Snapshot, and diffs two snapshots of it (a reload of
// an unchanged file).
func BenchmarkParseStateFile(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		js := benchStateFile(b, n)
		ym, err := yaml.JSONToYAML(js)
		if err != nil {
			b.Fatal(err)
		}
		for _, f := range []struct {
			name string
			data []byte
		}{{"json", js}, {"yaml", ym}} {
			b.Run(fmt.Sprintf("workloads=%d/%s", n, f.name), func(b *testing.B) {
				b.SetBytes(int64(len(f.data)))
				b.ReportAllocs()
				for range b.N {
					if _, err := ParseStateFile("node", f.data); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		b.Run(fmt.Sprintf("workloads=%d/diff", n), func(b *testing.B) {
			// A reload of an unchanged file: two snapshots of separate
			// parses, compared object by object.
			snap := func() *Snapshot {
				sf, err := ParseStateFile("node", js)
				if err != nil {
					b.Fatal(err)
				}
				s, err := NewSnapshot(sf)
				if err != nil {
					b.Fatal(err)
				}
				return s
			}
			old, new := snap(), snap()
			b.ReportAllocs()
			for range b.N {
				if d := Diff(old, new); len(d) != 0 {
					b.Fatalf("%d messages between equal snapshots", len(d))
				}
			}
		})
		b.Run(fmt.Sprintf("workloads=%d/snapshot", n), func(b *testing.B) {
			sf, err := ParseStateFile("node", js)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for range b.N {
				if _, err := NewSnapshot(sf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkIndexStateFile is the quick read of an incremental apply or of
// `run` (fileIndex): the config and the spans of the updates of a
// 10,000-workload JSON state file, and each span's digest, without decoding
// any update.
func BenchmarkIndexStateFile(b *testing.B) {
	data := benchStateFile(b, 10000)
	b.SetBytes(int64(len(data)))
	for range b.N {
		ix, ok := indexStateFile(data)
		if !ok {
			b.Fatal("the quick read failed")
		}
		for i := range ix.spans {
			ix.digest(i)
		}
	}
}
