package proto_test

import (
	"bytes"
	"encoding/hex"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	felix "github.com/nftep/nftep/proto"
)

// wepFrame is one ToDataplane frame carrying a WorkloadEndpointUpdate, written
// out byte by byte from the field numbers of felix.proto (Felix's own, from
// felix/proto/felixbackend.proto), not produced by any encoder. A tag byte is (field number << 3) | wire type,
// with wire type 0 for varints and 2 for length-delimited fields; lengths are
// varints (0x81 0x01 = 129).
//
// Go's protobuf encoder, which Felix uses, writes ordinary fields in field
// number order and oneof fields after them ("to preserve compatibility with
// historic wire output", google.golang.org/protobuf internal/impl/codec_message.go),
// so sequence_number (15) comes before the payload (11). This is frame 5 of
// testdata/felix/real-felix-session.bin, and TestReplayRealFelixSession
// checks that it is.
var wepFrame = concat(
	// frame header: body length 162 (0xa2), u64 little-endian
	[]byte{0xa2, 0, 0, 0, 0, 0, 0, 0},
	// ToDataplane.sequence_number = 15, varint: tag 0x78, value 5
	[]byte{0x78, 0x05},
	// ToDataplane.workload_endpoint_update = 11, message: tag 0x5a, length 157
	[]byte{0x5a, 0x9d, 0x01},
	//   WorkloadEndpointUpdate.id = 1, message: tag 0x0a, length 23
	[]byte{0x0a, 0x17},
	//     WorkloadEndpointID.orchestrator_id = 2: tag 0x12, length 3
	[]byte{0x12, 0x03}, []byte("k8s"),
	//     WorkloadEndpointID.workload_id = 3: tag 0x1a, length 10
	[]byte{0x1a, 0x0a}, []byte("default/p1"),
	//     WorkloadEndpointID.endpoint_id = 4: tag 0x22, length 4
	[]byte{0x22, 0x04}, []byte("eth0"),
	//   WorkloadEndpointUpdate.endpoint = 5, message: tag 0x2a, length 129
	[]byte{0x2a, 0x81, 0x01},
	//     WorkloadEndpoint.state = 1: tag 0x0a, length 6
	[]byte{0x0a, 0x06}, []byte("active"),
	//     WorkloadEndpoint.name = 2: tag 0x12, length 5
	[]byte{0x12, 0x05}, []byte("cali1"),
	//     WorkloadEndpoint.mac = 3: tag 0x1a, length 17
	[]byte{0x1a, 0x11}, []byte("ee:ee:ee:00:00:01"),
	//     WorkloadEndpoint.profile_ids = 4: tag 0x22, length 9
	[]byte{0x22, 0x09}, []byte("allow-all"),
	//     WorkloadEndpoint.ipv4_nets = 5: tag 0x2a, length 12
	[]byte{0x2a, 0x0c}, []byte("10.65.0.1/32"),
	//     WorkloadEndpoint.ipv6_nets = 6: tag 0x32, length 14
	[]byte{0x32, 0x0e}, []byte("fd00:65::1/128"),
	//     WorkloadEndpoint.tiers = 7, message TierInfo: tag 0x3a, length 52
	[]byte{0x3a, 0x34},
	//       TierInfo.name = 1: tag 0x0a, length 7
	[]byte{0x0a, 0x07}, []byte("default"),
	//       TierInfo.ingress_policies = 2, message PolicyID: tag 0x12, length 35
	[]byte{0x12, 0x23},
	//         PolicyID.name = 2: tag 0x12, length 12
	[]byte{0x12, 0x0c}, []byte("from-trusted"),
	//         PolicyID.kind = 4: tag 0x22, length 19
	[]byte{0x22, 0x13}, []byte("GlobalNetworkPolicy"),
	//       TierInfo.default_action = 4: tag 0x22, length 4
	[]byte{0x22, 0x04}, []byte("Deny"),
)

// wepMessage is what wepFrame says.
func wepMessage() *felix.ToDataplane {
	return &felix.ToDataplane{
		SequenceNumber: 5,
		Payload: &felix.ToDataplane_WorkloadEndpointUpdate{WorkloadEndpointUpdate: &felix.WorkloadEndpointUpdate{
			Id: &felix.WorkloadEndpointID{OrchestratorId: "k8s", WorkloadId: "default/p1", EndpointId: "eth0"},
			Endpoint: &felix.WorkloadEndpoint{
				State:      "active",
				Name:       "cali1",
				Mac:        "ee:ee:ee:00:00:01",
				ProfileIds: []string{"allow-all"},
				Ipv4Nets:   []string{"10.65.0.1/32"},
				Ipv6Nets:   []string{"fd00:65::1/128"},
				Tiers: []*felix.TierInfo{{
					Name:            "default",
					IngressPolicies: []*felix.PolicyID{{Name: "from-trusted", Kind: "GlobalNetworkPolicy"}},
					DefaultAction:   "Deny",
				}},
			},
		}},
	}
}

func concat(parts ...[]byte) []byte {
	return bytes.Join(parts, nil)
}

func TestWireCompatibilityWorkloadEndpointUpdate(t *testing.T) {
	t.Parallel()
	if got, want := len(wepFrame), felix.HeaderSize+0xa2; got != want {
		t.Fatalf("hand-written frame is %d bytes, its header says %d: fix the test", got, want)
	}

	// Decode with our types.
	got, err := felix.NewReader(bytes.NewReader(wepFrame)).ReadToDataplane()
	if err != nil {
		t.Fatalf("ReadToDataplane: %v", err)
	}
	if diff := cmp.Diff(wepMessage(), got, protocmp.Transform()); diff != "" {
		t.Errorf("decoded message (-want +got):\n%s", diff)
	}
	assertNoUnknownFields(t, "wepFrame", got.ProtoReflect())

	// Encode with ours: the same bytes.
	var buf bytes.Buffer
	if err := felix.NewWriter(&buf).WriteMessage(wepMessage()); err != nil {
		t.Fatalf("WriteMessage: %v", err)
	}
	if !bytes.Equal(buf.Bytes(), wepFrame) {
		t.Errorf("encoding differs from the hand-written frame\n got: %s\nwant: %s", hex.EncodeToString(buf.Bytes()), hex.EncodeToString(wepFrame))
	}

	// A decoder must not care about field order: the same fields in plain
	// field-number order (payload 11 before sequence_number 15) decode the same.
	body := wepFrame[felix.HeaderSize:]
	reordered := concat(body[2:], body[:2])
	got2 := new(felix.ToDataplane)
	if err := proto.Unmarshal(reordered, got2); err != nil {
		t.Fatalf("Unmarshal of the reordered body: %v", err)
	}
	if diff := cmp.Diff(wepMessage(), got2, protocmp.Transform()); diff != "" {
		t.Errorf("reordered body (-want +got):\n%s", diff)
	}
}

// TestWireCompatibilityUnknownPayload shows that a payload nftep reserves
// (service_update = 31 in Felix's ToDataplane) decodes as an envelope with no
// payload and its bytes kept as unknown fields, and that the stream goes on.
func TestWireCompatibilityUnknownPayload(t *testing.T) {
	t.Parallel()
	stream := concat(
		// frame header: body length 14
		[]byte{0x0e, 0, 0, 0, 0, 0, 0, 0},
		// ToDataplane.sequence_number = 15: tag 0x78, value 40
		[]byte{0x78, 0x28},
		// ToDataplane.service_update = 31 (reserved here): tag (31<<3)|2 = 0xfa 0x01, length 9
		[]byte{0xfa, 0x01, 0x09},
		//   ServiceUpdate.name = 1: tag 0x0a, length 7
		[]byte{0x0a, 0x07}, []byte("service"),
		// frame header: body length 4
		[]byte{0x04, 0, 0, 0, 0, 0, 0, 0},
		// ToDataplane.sequence_number = 15: tag 0x78, value 41
		[]byte{0x78, 0x29},
		// ToDataplane.in_sync = 1, empty message: tag 0x0a, length 0
		[]byte{0x0a, 0x00},
	)
	r := felix.NewReader(bytes.NewReader(stream))
	m, err := r.ReadToDataplane()
	if err != nil {
		t.Fatalf("frame 0: %v", err)
	}
	if m.GetSequenceNumber() != 40 || m.GetPayload() != nil {
		t.Errorf("frame 0: sequence %d, payload %T; want 40 and no payload", m.GetSequenceNumber(), m.GetPayload())
	}
	if want := stream[8+2 : 8+14]; !bytes.Equal(m.ProtoReflect().GetUnknown(), want) {
		t.Errorf("frame 0: unknown fields %x, want %x", m.ProtoReflect().GetUnknown(), want)
	}
	m, err = r.ReadToDataplane()
	if err != nil {
		t.Fatalf("frame 1: %v", err)
	}
	if m.GetSequenceNumber() != 41 || m.GetInSync() == nil {
		t.Errorf("frame 1: sequence %d, payload %T; want 41 and InSync", m.GetSequenceNumber(), m.GetPayload())
	}
}
