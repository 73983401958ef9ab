package dataplane

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	gproto "google.golang.org/protobuf/proto"

	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/proto"
	"github.com/nftep/nftep/routes"
)

// An incremental apply: a one-shot `nftep apply` that trusts the record of
// the last apply (see record.go) and programs only what changed since.
//
// It works on a context, the part of the node the changed objects live in:
// every object but the workload endpoints (policies, profiles, IP sets,
// host endpoints and cluster networking: few, next to the workloads), and
// the workload endpoints that changed, came or went, with any other on one
// of their interfaces. The engine is fed the context as it was (decoded
// from the record), computed, and its tables told to trust the record: the
// kernel holds that part exactly as rendered (checked chain by chain and
// element by element), and the rest too (unrendered). Then the changes go
// through the engine as in `run`, and the plan touches only what they
// changed. A chain the context drops stays while the kernel's unrendered
// chains still jump to it (nft.Table.Trust); a policy chain those jump to
// is counted as used (policy.Manager.AddUses), so a changed policy is
// rewritten for them too.

// notIncremental says why an apply computes the whole node.
type notIncremental struct{ why string }

func (e *notIncremental) Error() string { return e.why }

func whole(format string, args ...any) error {
	return &notIncremental{why: fmt.Sprintf(format, args...)}
}

// applyIncremental programs what changed since the record of the last apply
// in opts.RunDir. A *notIncremental error means it programmed nothing: the
// caller computes the whole node. Any other error is a failure of the
// apply.
func applyIncremental(ctx context.Context, opts *Options, path string, snap *Snapshot, cfg Config, log *slog.Logger) (*Result, map[string]recordObject, error) {
	newObjs := snap.objects()
	enc, err := encodeObjects(newObjs)
	if err != nil {
		return nil, nil, err
	}
	if opts.Full {
		return nil, enc, whole("--full")
	}
	rec := readRecord(opts.RunDir)
	if rec == nil {
		return nil, enc, whole("no record of the last apply")
	}
	k := opts.kernel()
	switch {
	case rec.Build == "" || rec.Build != thisBuild():
		return nil, enc, whole("the last apply was made by another build of nftep")
	case rec.Namespace == "" || rec.Namespace != namespaceIdentity(k):
		return nil, enc, whole("the last apply was in another boot or network namespace")
	case rec.Config != configDigest(opts, snap.Config):
		return nil, enc, whole("the configuration changed")
	case rec.INet == nil || cfg.Render.ARPSuppression != (rec.ARP != nil):
		return nil, enc, whole("the record holds other tables")
	}

	// What changed, and its context.
	var changed []string
	for key, o := range enc {
		if ro, ok := rec.Objects[key]; !ok || ro.Digest != o.Digest {
			changed = append(changed, key)
		}
	}
	for key := range rec.Objects {
		if _, ok := enc[key]; !ok {
			changed = append(changed, key)
		}
	}
	slices.Sort(changed)
	ifaces := map[string]bool{} // the interfaces of the changed workloads
	for _, key := range changed {
		if kind := kindOf(key); !incrementalKinds[kind] {
			return nil, enc, whole("a %s changed", kind)
		}
		if kindOf(key) != kindWEP {
			continue
		}
		if m, ok := newObjs[key]; ok {
			ifaces[m.(*proto.WorkloadEndpointUpdate).GetEndpoint().GetName()] = true
		}
		if ro, ok := rec.Objects[key]; ok {
			m, err := decodeObject(key, ro)
			if err != nil {
				return nil, enc, whole("%v", err)
			}
			ifaces[m.(*proto.WorkloadEndpointUpdate).GetEndpoint().GetName()] = true
		}
	}
	inContext := map[string]bool{}
	for _, key := range changed {
		inContext[key] = true
	}
	// An unchanged workload on one of those interfaces is part of it:
	// which of two endpoints on one interface wins is decided together.
	for key, m := range newObjs {
		if kindOf(key) == kindWEP && ifaces[m.(*proto.WorkloadEndpointUpdate).GetEndpoint().GetName()] {
			inContext[key] = true
		}
	}
	oldCtx, newCtx := map[string]gproto.Message{}, map[string]gproto.Message{}
	for key, ro := range rec.Objects {
		if kindOf(key) == kindWEP && !inContext[key] {
			continue
		}
		m, err := decodeObject(key, ro)
		if err != nil {
			return nil, enc, whole("%v", err)
		}
		oldCtx[key] = m
	}
	for key, m := range newObjs {
		if kindOf(key) != kindWEP || inContext[key] {
			newCtx[key] = m
		}
	}
	before, after := snapshotFromObjects(snap.Config, oldCtx), snapshotFromObjects(snap.Config, newCtx)

	// The new context must render (a dry run of it: nothing is written
	// anywhere if it does not).
	if _, err := validateSnapshot(path, after, cfg, nil); err != nil {
		return nil, enc, err
	}

	eng, err := newEngine(cfg, k, log, nil)
	if err != nil {
		return nil, enc, err
	}
	defer eng.close()
	// The interfaces of the context: its workloads', and, when it has host
	// endpoints (which may match any interface by name or address), all the
	// others but the workloads'.
	var us []any
	if named, ok := k.(interface {
		InterfacesNamed([]string) ([]any, error)
	}); ok && len(after.heps) == 0 && len(before.heps) == 0 {
		us, err = named.InterfacesNamed(slices.Sorted(maps.Keys(ifaces)))
	} else {
		us, err = k.Interfaces()
	}
	if err != nil {
		log.Warn("cannot list interfaces: endpoints will show as down", "error", err)
	} else {
		for _, u := range us {
			if name := ifaceName(u); name == "" || ifaces[name] || !isWorkloadInterface(cfg, name) {
				eng.update(u)
			}
		}
	}
	for _, m := range before.Messages() {
		eng.update(m)
	}
	if err := eng.compute(); err != nil {
		return nil, enc, whole("the recorded state does not compute: %v", err)
	}
	// Shared endpoint chains that unrendered endpoints' elements point at,
	// and the policy and profile chains unrendered chains jump to.
	inModel := eng.inet.Desired().ChainReferences()
	for name, n := range rec.INet.ChainRefs {
		eng.eps.AddExternalUses(name, n-inModel[name])
		eng.pol.AddUses(name, n-inModel[name])
	}
	if err := trust(ctx, eng.inet, rec.INet); err != nil {
		return nil, enc, err
	}
	if eng.arp != nil {
		if err := trust(ctx, eng.arp, rec.ARP); err != nil {
			return nil, enc, err
		}
	}
	if rt, ok := eng.routes.(interface{ TrustWanted() }); ok {
		rt.TrustWanted()
	} else if eng.routes != nil {
		return nil, enc, whole("the route table cannot trust a record")
	}

	// The changes.
	removeRecord(opts.RunDir)
	for _, m := range Diff(before, after) {
		eng.update(m)
	}
	if err := eng.compute(); err != nil {
		return nil, enc, fmt.Errorf("apply %q: %w", path, err)
	}
	res, err := eng.program(ctx, false, true)
	if err != nil {
		if errors.Is(err, nft.ErrPartial) {
			return nil, enc, whole("%v", err)
		}
		return nil, enc, fmt.Errorf("apply %q: %w", path, err)
	}
	log.Debug("applied incrementally", "changed", len(changed), "operations", res.inet.Operations+res.arp.Operations)

	// The status: the record's, with the context's endpoints replaced.
	var status Status
	if err := json.Unmarshal(rec.Status, &status); err != nil {
		return nil, enc, fmt.Errorf("apply %q: the record's status: %w", path, err)
	}
	now := time.Now().UTC()
	status.PID, status.Updated, status.LastApply, status.Source, status.LastError = os.Getpid(), now, now, path, ""
	status.Endpoints = mergeStatuses(status.Endpoints, convertStatuses(eng.eps.Statuses()), func(id string) bool {
		_, ok := oldCtx[objectKey(kindWEP, id)]
		return ok
	})
	status.Overlay = eng.overlayStatus()
	// iptables-legacy rules move no nftables generation: looked for again,
	// as a whole apply does.
	if tk, ok := k.(takeoverKernel); ok {
		sw := tk.Takeover()
		if _, err := sw.CheckLegacy(); err != nil {
			log.Warn("cannot look for iptables-legacy rules", "error", err)
		} else {
			r := sw.Report()
			if status.Takeover == nil {
				status.Takeover = &r
			} else {
				status.Takeover.Legacy = r.Legacy
			}
		}
	}
	out := &Result{
		Table:       cfg.Render.TableName,
		Contents:    snap.Counts(),
		Operations:  res.inet.Operations + res.arp.Operations,
		Statuses:    status.Endpoints,
		Incremental: true,
	}
	owned := maps.Clone(rec.Routes)
	if owned == nil {
		owned = map[string]int{}
	}
	if eng.routes != nil {
		for name := range ifaces {
			delete(owned, name)
		}
		maps.Copy(owned, eng.routes.Owned())
	}
	if err := errors.Join(writeStatus(opts.RunDir, &status, "", nil), writeRoutesRecord(opts.RunDir, owned)); err != nil {
		log.Warn("cannot write the status file", "error", err)
	}
	// The ruleset recorded by the last whole apply is out of date.
	for _, f := range []string{RulesetFileName, RulesetJSONFileName} {
		_ = os.Remove(filepath.Join(opts.RunDir, f))
	}
	switch {
	case res.routesErr != nil:
		return out, enc, fmt.Errorf("apply %q: the ruleset is programmed, but routes failed: %w", path, res.routesErr)
	case eng.sysctlsFailing():
		return out, enc, nil
	}
	if next, err := newRecord(opts, k, eng, snap, enc, &status, owned); err != nil {
		log.Debug("no record of this apply: the next one computes the whole node", "error", err)
	} else if err := writeRecord(opts.RunDir, next); err != nil {
		log.Warn("cannot write the record of the apply", "error", err)
	}
	return out, enc, nil
}

// trust makes t trust rec; a mismatch is a reason to compute the whole node.
func trust(ctx context.Context, t Table, rec *nft.TableRecord) error {
	tt, ok := t.(interface {
		Trust(context.Context, *nft.TableRecord) error
	})
	if !ok {
		return whole("the table cannot trust a record")
	}
	if err := tt.Trust(ctx, rec); err != nil {
		var mm *nft.RecordMismatch
		if errors.As(err, &mm) {
			return whole("%v", err)
		}
		return err
	}
	return nil
}

// ifaceName is the interface an interface update is about.
func ifaceName(u any) string {
	switch m := u.(type) {
	case routes.InterfaceStateUpdate:
		return m.Name
	case routes.InterfaceAddrsUpdate:
		return m.Name
	}
	return ""
}

// mergeStatuses returns old with the workload statuses replaced(id) says
// were recomputed dropped, the host statuses replaced by now's, and now's
// workload statuses added, in the endpoint manager's order (workloads by
// orchestrator, workload and endpoint, then hosts by ID).
func mergeStatuses(old, now []EndpointStatus, replaced func(id string) bool) []EndpointStatus {
	byID := map[string]EndpointStatus{}
	for _, s := range old {
		if s.Kind == "workload" && !replaced(s.ID) {
			byID[s.ID] = s
		}
	}
	var hosts []EndpointStatus
	for _, s := range now {
		if s.Kind == "workload" {
			byID[s.ID] = s
		} else {
			hosts = append(hosts, s)
		}
	}
	out := slices.SortedFunc(maps.Values(byID), func(a, b EndpointStatus) int { return compareWorkloadIDs(a.ID, b.ID) })
	return append(out, hosts...)
}

// compareWorkloadIDs orders "orchestrator/workload/endpoint" IDs field by
// field, as the endpoint manager does (the workload may hold slashes).
func compareWorkloadIDs(a, b string) int {
	split := func(id string) (string, string, string) {
		o, rest, _ := strings.Cut(id, "/")
		i := strings.LastIndex(rest, "/")
		if i < 0 {
			return o, rest, ""
		}
		return o, rest[:i], rest[i+1:]
	}
	ao, aw, ae := split(a)
	bo, bw, be := split(b)
	return cmp.Or(cmp.Compare(ao, bo), cmp.Compare(aw, bw), cmp.Compare(ae, be))
}

// isWorkloadInterface reports whether name has a workload interface prefix.
func isWorkloadInterface(cfg Config, name string) bool {
	for _, p := range cfg.Render.InterfacePrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}
