package dataplane

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/nftep/nftep/proto"
	"github.com/nftep/nftep/routes"
)

// recordingManager is a Manager that notes its calls in a shared journal.
type recordingManager struct {
	name    string
	journal *[]string
	failAt  string
}

func (m *recordingManager) OnUpdate(msg any) {
	*m.journal = append(*m.journal, m.name+" OnUpdate "+messageKind(msg))
}

func (m *recordingManager) ResolveUpdateBatch() error {
	*m.journal = append(*m.journal, m.name+" ResolveUpdateBatch")
	if m.failAt == "resolve" {
		return errors.New("broken")
	}
	return nil
}

func (m *recordingManager) CompleteDeferredWork() error {
	*m.journal = append(*m.journal, m.name+" CompleteDeferredWork")
	if m.failAt == "complete" {
		return errors.New("broken")
	}
	return nil
}

// TestEngineManagersTakeTheirMessages: a registered manager gets the Felix
// message types it registered for and every interface update; compute
// calls every manager's ResolveUpdateBatch before any CompleteDeferredWork,
// in registration order; an error names the manager.
func TestEngineManagersTakeTheirMessages(t *testing.T) {
	var journal []string
	a := &recordingManager{name: "a", journal: &journal}
	b := &recordingManager{name: "b", journal: &journal}
	e := &engine{}
	e.register("manager a", a, &proto.IPAMPoolUpdate{})
	e.register("manager b", b, &proto.IPAMPoolUpdate{}, &proto.HostMetadataUpdate{})

	assert.True(t, e.update(&proto.IPAMPoolUpdate{Id: "10.65.0.0-16"}))
	assert.True(t, e.update(&proto.HostMetadataUpdate{Hostname: "node1"}))
	assert.False(t, e.update(&proto.Encapsulation{}), "no manager takes Encapsulation here")
	assert.True(t, e.update(routes.InterfaceStateUpdate{Name: "eth0"}), "interface updates go to every manager")
	require.NoError(t, e.compute())
	assert.Equal(t, []string{
		"a OnUpdate IPAMPoolUpdate",
		"b OnUpdate IPAMPoolUpdate",
		"b OnUpdate HostMetadataUpdate",
		"a OnUpdate felix.InterfaceStateUpdate",
		"b OnUpdate felix.InterfaceStateUpdate",
		"a ResolveUpdateBatch",
		"b ResolveUpdateBatch",
		"a CompleteDeferredWork",
		"b CompleteDeferredWork",
	}, journal)

	b.failAt = "resolve"
	assert.EqualError(t, e.compute(), "manager b: resolve batch: broken")
	b.failAt = "complete"
	assert.EqualError(t, e.compute(), "manager b: broken")
}

// TestDriverReportsUnhandledMessages: a Felix message that no manager
// takes, and a payload felix.proto does not declare, are each logged once
// per kind and counted every time, and start no apply.
func TestDriverReportsUnhandledMessages(t *testing.T) {
	var logged syncBuffer
	k := newFakeKernel()
	rec := newRecorder()
	f := startDriver(t, k, Options{Observer: rec, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	f.send(configUpdate(nil))
	f.send(inSync())
	f.waitIdle()
	applies := len(rec.snapshot().applies)

	// ServiceUpdate (field 31) and NamespaceUpdate (21) are Felix's; our
	// schema reserves them, so they arrive as unknown fields.
	unknown := func(field protowire.Number) *proto.ToDataplane {
		env := &proto.ToDataplane{}
		b := protowire.AppendTag(nil, field, protowire.BytesType)
		b = protowire.AppendBytes(b, protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "x"))
		env.ProtoReflect().SetUnknown(b)
		return env
	}
	f.send(unknown(31))
	f.send(unknown(31))
	f.send(unknown(21))
	f.waitIdle()
	require.NoError(t, f.close())

	assert.Equal(t, map[string]int{"field 31": 2, "field 21": 1}, rec.snapshot().unhandled)
	assert.Len(t, rec.snapshot().applies, applies, "an unhandled message starts no apply")
	log := logged.String()
	assert.Equal(t, 1, strings.Count(log, `kind="field 31"`), "logged once per kind:\n%s", log)
	assert.Equal(t, 1, strings.Count(log, `kind="field 21"`), "logged once per kind:\n%s", log)
}
