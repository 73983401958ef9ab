package proto_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/nftep/nftep/internal/testutil"
	felix "github.com/nftep/nftep/proto"
)

// assertNoUnknownFields fails if m, or any message inside it, holds fields our
// .proto does not declare: that would mean felix.proto is missing a field
// Felix sends.
func assertNoUnknownFields(t *testing.T, where string, m protoreflect.Message) {
	t.Helper()
	var walk func(path string, m protoreflect.Message)
	walk = func(path string, m protoreflect.Message) {
		u := m.GetUnknown()
		assert.Empty(t, u, "%s: %s (%s) has unknown fields", where, path, m.Descriptor().FullName())
		m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			p := path + "." + string(fd.Name())
			switch {
			case fd.IsList() && fd.Message() != nil:
				for i := 0; i < v.List().Len(); i++ {
					walk(p, v.List().Get(i).Message())
				}
			case fd.IsMap() && fd.MapValue().Message() != nil:
				v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
					walk(p, mv.Message())
					return true
				})
			case !fd.IsList() && !fd.IsMap() && fd.Message() != nil:
				walk(p, v.Message())
			}
			return true
		})
	}
	walk(string(m.Descriptor().Name()), m)
}

// TestReplayRealFelixSession decodes every frame a real Felix sent (see
// testdata/felix/README.md) and checks it against the protojson
// transcript, field for field.
func TestReplayRealFelixSession(t *testing.T) {
	t.Parallel()
	raw := testutil.ReadFelixRecording(t, "real-felix-session.bin")
	jsonl := testutil.ReadFelixRecording(t, "real-felix-session.jsonl")

	var lines [][]byte
	sc := bufio.NewScanner(bytes.NewReader(jsonl))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		lines = append(lines, bytes.Clone(sc.Bytes()))
	}
	require.NoError(t, sc.Err())

	const wantFrames = 24
	r := felix.NewReader(bytes.NewReader(raw))
	var msgs []*felix.ToDataplane
	var bodies [][]byte
	for {
		body, err := r.ReadFrame()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err, "frame %d", len(msgs))
		m := new(felix.ToDataplane)
		require.NoError(t, proto.Unmarshal(body, m), "frame %d: decode", len(msgs))
		msgs = append(msgs, m)
		bodies = append(bodies, body)
	}
	require.Len(t, msgs, wantFrames, "frames")
	require.Len(t, lines, wantFrames, "jsonl lines")

	for i, m := range msgs {
		assert.Equal(t, uint64(i), m.GetSequenceNumber(), "frame %d: sequence_number", i)
		assert.NotNil(t, m.GetPayload(), "frame %d: a payload we know", i)
		assertNoUnknownFields(t, "frame "+strconv.Itoa(i), m.ProtoReflect())

		want := new(felix.ToDataplane)
		if !assert.NoError(t, protojson.Unmarshal(lines[i], want), "jsonl line %d", i+1) {
			continue
		}
		if diff := cmp.Diff(want, m, protocmp.Transform()); diff != "" {
			assert.Fail(t, fmt.Sprintf("frame %d differs from jsonl line %d (-jsonl +bin):\n%s", i, i+1, diff))
		}

		// Our encoder reproduces Felix's bytes exactly.
		again, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
		if assert.NoError(t, err, "frame %d: re-encode", i) {
			assert.Equal(t, bodies[i], again, "frame %d: re-encoding differs from Felix's bytes", i)
		}
	}

	// The hand-written frame of wire_test.go is frame 5.
	assert.Equal(t, wepFrame[felix.HeaderSize:], bodies[5], "frame 5 is wepFrame")

	// Felix's ordering, as the README tells it.
	kinds := map[int]string{
		0:  "config_update",
		1:  "ipset_update",
		2:  "active_policy_update",
		4:  "active_profile_update",
		5:  "workload_endpoint_update",
		7:  "host_endpoint_update",
		8:  "encapsulation",
		9:  "in_sync",
		10: "ipset_delta_update",
		14: "active_policy_update",
		19: "active_policy_update",
		20: "ipset_delta_update",
		21: "workload_endpoint_remove",
		22: "active_policy_remove",
		23: "host_endpoint_remove",
	}
	for i, want := range kinds {
		assert.Equal(t, want, payloadName(msgs[i]), "frame %d: payload", i)
	}
	inSync := 0
	for _, m := range msgs {
		if m.GetInSync() != nil {
			inSync++
		}
	}
	assert.Equal(t, 1, inSync, "InSync messages")

	checkEndState(t, msgs)
}

func payloadName(m *felix.ToDataplane) string {
	od := m.ProtoReflect().Descriptor().Oneofs().ByName("payload")
	fd := m.ProtoReflect().WhichOneof(od)
	if fd == nil {
		return "<none>"
	}
	return string(fd.Name())
}

// checkEndState replays the messages into plain maps and checks the state the
// README says the node ends in after frame 23.
func checkEndState(t *testing.T, msgs []*felix.ToDataplane) {
	t.Helper()
	sets := map[string]map[string]bool{}
	policies := map[string]bool{}
	weps := map[string][]string{} // workload id → tier names
	heps := map[string]bool{}
	for _, m := range msgs {
		switch p := m.GetPayload().(type) {
		case *felix.ToDataplane_IpsetUpdate:
			s := map[string]bool{}
			for _, x := range p.IpsetUpdate.GetMembers() {
				s[x] = true
			}
			sets[p.IpsetUpdate.GetId()] = s
		case *felix.ToDataplane_IpsetDeltaUpdate:
			s := sets[p.IpsetDeltaUpdate.GetId()]
			for _, x := range p.IpsetDeltaUpdate.GetAddedMembers() {
				s[x] = true
			}
			for _, x := range p.IpsetDeltaUpdate.GetRemovedMembers() {
				delete(s, x)
			}
		case *felix.ToDataplane_ActivePolicyUpdate:
			policies[p.ActivePolicyUpdate.GetId().GetName()] = true
		case *felix.ToDataplane_ActivePolicyRemove:
			delete(policies, p.ActivePolicyRemove.GetId().GetName())
		case *felix.ToDataplane_WorkloadEndpointUpdate:
			var tiers []string
			for _, ti := range p.WorkloadEndpointUpdate.GetEndpoint().GetTiers() {
				tiers = append(tiers, ti.GetName())
			}
			weps[p.WorkloadEndpointUpdate.GetId().GetWorkloadId()] = tiers
		case *felix.ToDataplane_WorkloadEndpointRemove:
			delete(weps, p.WorkloadEndpointRemove.GetId().GetWorkloadId())
		case *felix.ToDataplane_HostEndpointUpdate:
			heps[p.HostEndpointUpdate.GetId().GetEndpointId()] = true
		case *felix.ToDataplane_HostEndpointRemove:
			delete(heps, p.HostEndpointRemove.GetId().GetEndpointId())
		}
	}

	wantWEPs := map[string][]string{
		"default/p1": {"security", "default"},
		"default/p3": {"security"},
	}
	assert.Equal(t, wantWEPs, weps, "workload endpoints and their tiers at the end")
	assert.Empty(t, heps, "host endpoints at the end")
	assert.Equal(t, map[string]bool{"from-trusted": true, "security.block-9999": true}, policies, "active policies at the end")
	require.Len(t, sets, 1, "IP sets (trusted)")
	for id, s := range sets {
		got := slices.Sorted(maps.Keys(s))
		want := []string{"10.65.0.0/28", "10.65.0.3/32", "192.168.50.0/24", "fd00:65::3/128"}
		assert.Equal(t, want, got, "IP set %s members at the end", id)
	}
}
