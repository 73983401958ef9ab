package dataplane

// Fuzz targets for the input nftep takes from others: state files, and
// Felix's stream of frames as the managers handle it. Neither may panic;
// a bad state file is one error naming the file, and bad Felix messages
// never make the kernel refuse a transaction (they stay with their
// object, reported in its status). `go test` runs the seeds; `make fuzz`
// searches.

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	gproto "google.golang.org/protobuf/proto"

	"github.com/nftep/nftep/examples"
	"github.com/nftep/nftep/internal/testutil"
	"github.com/nftep/nftep/proto"
)

// FuzzStateFile parses, folds and validates a state file.
func FuzzStateFile(f *testing.F) {
	f.Add(examples.Demo)
	if b, err := os.ReadFile(filepath.Join("..", "cmd", "nftep", "testdata", "explain.yaml")); err == nil {
		f.Add(b)
	}
	f.Add([]byte(`{"config": {"InterfacePrefix": "cali"}, "updates": [{"ipsetUpdate": {"id": "s:x", "type": "NET", "members": ["10.0.0.0/8"]}}]}`))
	f.Add([]byte("updates:\n  - workloadEndpointUpdate:\n      id: {orchestratorId: k8s, workloadId: ns/a, endpointId: eth0}\n      endpoint: {name: cali-a, ipv4Nets: [10.0.0.1/32], mac: 'ee:ee:ee:ee:ee:ee'}\n"))
	f.Add([]byte("config: {\nupdates: ["))
	f.Fuzz(func(t *testing.T, data []byte) {
		sf, err := ParseStateFile("node.yaml", data)
		if err == nil {
			_, err = NewSnapshot(sf)
		}
		if err == nil {
			_, err = ParseConfig(sf.Config, "")
			return
		}
		var se *StateFileError
		if !errors.As(err, &se) || se.File != "node.yaml" {
			t.Fatalf("error %v (%T) is not a StateFileError naming the file", err, err)
		}
	})
}

// FuzzFelixMessages hands Felix messages of random content to the
// managers over a fake kernel, on top of a node's state (the recorded real
// Felix session, testdata/felix, and a few endpoints, policies and IP
// sets), computing and programming after each:
// no panic, and every transaction the kernel accepts, whatever the
// messages hold. (The framing has its own target, proto.FuzzReader.)
func FuzzFelixMessages(f *testing.F) {
	base := baseMessages(f)
	for _, m := range base {
		b, err := gproto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, b, b)
	}
	f.Fuzz(func(t *testing.T, m1, m2, m3 []byte) {
		k := newFakeKernel()
		cfg, err := ParseConfig(map[string]string{"InterfacePrefix": "cali", "Ipv6Support": "true"}, "")
		if err != nil {
			t.Fatal(err)
		}
		e, err := newEngine(cfg, k, slog.New(slog.DiscardHandler), nil)
		if err != nil {
			t.Fatal(err)
		}
		handle := func(env *proto.ToDataplane) {
			switch env.Payload.(type) {
			case *proto.ToDataplane_ConfigUpdate, *proto.ToDataplane_InSync, nil:
				return
			}
			e.update(Payload(env))
			if err := e.compute(); err != nil {
				t.Fatalf("compute after %s: %v", payloadName(env), err)
			}
			if _, err := e.program(context.Background(), false, true); err != nil {
				t.Fatalf("program after %s: the kernel refused the transaction: %v", payloadName(env), err)
			}
		}
		for _, env := range base {
			handle(env)
		}
		for _, b := range [][]byte{m1, m2, m3} {
			env := new(proto.ToDataplane)
			if gproto.Unmarshal(b, env) != nil {
				continue // the driver stops at a frame that does not decode
			}
			handle(env)
		}
	})
}

// baseMessages is the node state FuzzFelixMessages starts from: the
// recorded real Felix session's messages, then a few of our own.
func baseMessages(t testing.TB) []*proto.ToDataplane {
	var out []*proto.ToDataplane
	r := proto.NewReader(bytes.NewReader(testutil.ReadFelixRecording(t, "real-felix-session.bin")))
	for {
		env, err := r.ReadToDataplane()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("recorded Felix session, message %d: %v", len(out), err)
		}
		out = append(out, env)
	}
	return append(out,
		&proto.ToDataplane{Payload: &proto.ToDataplane_IpsetUpdate{IpsetUpdate: &proto.IPSetUpdate{Id: "s:x", Type: proto.IPSetUpdate_NET, Members: []string{"10.0.0.0/8", "fd00::/8"}}}},
		&proto.ToDataplane{Payload: &proto.ToDataplane_ActivePolicyUpdate{ActivePolicyUpdate: &proto.ActivePolicyUpdate{Id: &proto.PolicyID{Name: "p"},
			Policy: &proto.Policy{Tier: "default", InboundRules: []*proto.Rule{{Action: "allow", SrcIpSetIds: []string{"s:x"}, DstNet: []string{"fd00::/8"}}}}}}},
		&proto.ToDataplane{Payload: &proto.ToDataplane_ActiveProfileUpdate{ActiveProfileUpdate: &proto.ActiveProfileUpdate{Id: &proto.ProfileID{Name: "kns.a"},
			Profile: &proto.Profile{OutboundRules: []*proto.Rule{{Action: "allow"}}}}}},
		wepUpdate("ns/a", "cali1", "10.0.0.1"),
		wepUpdate("ns/b", "cali2", "10.0.0.2"),
	)
}
