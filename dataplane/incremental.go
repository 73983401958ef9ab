package dataplane

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	gproto "google.golang.org/protobuf/proto"

	"github.com/nftep/nftep/internal/gcidle"
	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/routes"
)

// An incremental apply: a one-shot `nftep apply` that trusts the record of
// the last apply (see record.go) and programs only what changed since.
//
// The state file is read by its bytes first (fileIndex): an update whose
// bytes the last apply applied (the same digest) defines the same object
// as then, and is not decoded at all; only the others are. That finds the
// objects that changed, came or went, and their context, the part of the
// node they live in: every object but the workload endpoints (policies,
// profiles, IP sets, host endpoints and cluster networking: few, next to
// the workloads), and the workload endpoints that changed, came or went,
// with any other on one of their interfaces. The engine is fed the context
// as it was (decoded from the record's copy of the file), computed, and
// its tables told to trust the record: the kernel holds that part exactly
// as rendered (checked chain by chain and element by element), and the
// rest too (unrendered). Then the changes go through the engine as in
// `run`, and the plan touches only what they changed. A chain the context
// drops stays while the kernel's unrendered chains still jump to it
// (nft.Table.Trust); a policy chain those jump to is counted as used
// (policy.Manager.AddUses), so a changed policy is rewritten for them too.
//
// Anything the quick read does not vouch for (an update that does not
// decode or check, a removal, an object defined twice, a change of another
// kind) makes the whole node computed from the file read in full, which
// also reports what is wrong with it.

// incrementalHeapLimit is the base of the heap an incremental apply may
// grow to before it collects (plus four times the state file's size).
const incrementalHeapLimit = 128 << 20

// notIncremental says why an apply computes the whole node.
type notIncremental struct{ why string }

func (e *notIncremental) Error() string { return e.why }

func whole(format string, args ...any) error {
	return &notIncremental{why: fmt.Sprintf(format, args...)}
}

// applyIncremental programs what changed since the record of the last apply
// in opts.RunDir, data being the state file's content. A *notIncremental
// error means it programmed nothing: the caller computes the whole node.
// Any other error is a failure of the apply.
func applyIncremental(ctx context.Context, opts *Options, path string, data []byte, log *slog.Logger) (*Result, error) {
	if opts.Full {
		return nil, whole("--full")
	}
	// No collections while it works (gcidle.Pause): for one workload it
	// allocates about 20 MB at 10,000 workloads, and the process exits
	// right after. The limit, well above that, bounds a larger change (one
	// that decodes every update, say): the collector runs when the heap
	// reaches it. A whole apply, if this one turns into it, collects as
	// usual.
	defer gcidle.Pause(incrementalHeapLimit + 4*int64(len(data)))()
	t := newPhases()
	defer func() { log.Debug("incremental apply: where the time went", "phases", t.String()) }()
	// The record and the state file are read side by side: they do not
	// depend on each other, and each is tens of milliseconds at 10,000
	// workloads.
	type indexed struct {
		ix *fileIndex
		ok bool
	}
	index := make(chan indexed, 1)
	go func() {
		ix, ok := indexStateFile(data)
		index <- indexed{ix, ok}
	}()
	rec := readRecord(opts.RunDir)
	got := <-index
	ix, ok := got.ix, got.ok
	if rec == nil {
		return nil, whole("no record of the last apply")
	}
	// Its tables are read in the background; nothing of this apply
	// outlives it, also when it returns before it needs them (a whole
	// apply follows, and would share the CPU with them).
	defer func() { _ = rec.awaitTables() }()
	t.mark("read the record and index the file")
	if !ok {
		return nil, whole("the state file needs a full read")
	}
	cfg, err := opts.parseConfig(ix.config)
	if err != nil {
		return nil, whole("the configuration does not parse")
	}
	k := opts.kernel()
	switch {
	case rec.Build == "" || rec.Build != thisBuild():
		return nil, whole("the last apply was made by another build of nftep")
	case rec.Namespace == "" || rec.Namespace != namespaceIdentity(k):
		return nil, whole("the last apply was in another boot or network namespace")
	case rec.Config != configDigest(opts, ix.config):
		return nil, whole("the configuration changed")
	case !rec.hasINet || cfg.Render.ARPSuppression != rec.hasARP:
		return nil, whole("the record holds other tables")
	}

	// The updates: those applied last time by their bytes, the others
	// decoded and checked (matchUpdates).
	m, err := matchUpdates(ix, rec)
	if err != nil {
		return nil, err
	}
	ups, fresh := m.ups, m.fresh
	check := emptySnapshot()
	for _, i := range slices.Sorted(maps.Keys(fresh)) {
		if check.add(fresh[i], i) != nil {
			return nil, whole("updates[%d] does not read", i)
		}
	}

	// What changed, and its context.
	var changed []string
	for i := range fresh {
		changed = append(changed, ups[i].Key)
	}
	// A policy or profile removed may still be named by workload endpoints
	// the context leaves out: then all of them are checked.
	checkAll := false
	for j, u := range rec.Updates {
		if m.recToNew[j] >= 0 {
			continue
		}
		if _, ok := m.freshByKey[u.Key]; !ok {
			changed = append(changed, u.Key)
			checkAll = checkAll || kindOf(u.Key) == kindPolicy || kindOf(u.Key) == kindProfile
		}
	}
	slices.Sort(changed)
	isChanged := make(map[string]bool, len(changed))
	for _, key := range changed {
		isChanged[key] = true
	}
	ifaces := map[string]bool{} // the interfaces of the changed workloads
	for _, key := range changed {
		if kind := kindOf(key); !incrementalKinds[kind] {
			return nil, whole("a %s changed", kind)
		}
	}
	for i := range fresh {
		if kindOf(ups[i].Key) == kindWEP {
			ifaces[ups[i].Iface] = true
		}
	}
	for j, u := range rec.Updates {
		if m.recToNew[j] < 0 && kindOf(u.Key) == kindWEP {
			ifaces[u.Iface] = true
		}
	}
	// An unchanged workload on one of those interfaces is part of it:
	// which of two endpoints on one interface wins is decided together.
	inContext := func(u recordUpdate) bool { return kindOf(u.Key) != kindWEP || ifaces[u.Iface] }
	before, after := emptySnapshot(), emptySnapshot()
	before.Config, after.Config = maps.Clone(ix.config), maps.Clone(ix.config)
	msgs := map[int]gproto.Message{} // the context's messages, by update index
	for i, u := range ups {
		if !inContext(u) {
			continue
		}
		msg := fresh[i]
		if msg == nil {
			if msg, ok = ix.decode(i); !ok {
				return nil, whole("updates[%d] does not read", i)
			}
		}
		if after.add(msg, i) != nil {
			return nil, whole("updates[%d] does not check", i)
		}
		msgs[i] = msg
	}
	oldCtx := map[string]bool{}
	for j, u := range rec.Updates {
		if !inContext(u) && !isChanged[u.Key] {
			continue
		}
		// Unchanged: the same bytes, the same message.
		var msg gproto.Message
		if i := m.recToNew[j]; i >= 0 && msgs[i] != nil {
			msg = msgs[i]
		} else if msg, ok = decodeSpan(rec.File[u.Start:u.End]); !ok {
			return nil, whole("the record's updates[%d] does not read", j)
		}
		if before.add(msg, j) != nil {
			return nil, whole("the record's updates[%d] does not check", j)
		}
		oldCtx[u.Key] = true
	}
	if after.checkReferences(path) != nil {
		return nil, whole("a reference is broken")
	}
	if checkAll {
		all := emptySnapshot()
		for i, u := range ups {
			msg := msgs[i]
			if msg == nil {
				if msg, ok = ix.decode(i); !ok {
					return nil, whole("updates[%d] does not read", i)
				}
			}
			all.put(u.Key, msg, i)
		}
		if all.checkReferences(path) != nil {
			return nil, whole("a reference is broken")
		}
	}

	t.mark("decode what changed")
	// The new context must render (a dry run of it: nothing is written
	// anywhere if it does not). It runs beside the real engine's compute
	// of the context as it was and its trust of the record, which do not
	// depend on it (nor change what it reads); its verdict is awaited
	// before the changes are computed.
	dryRun := make(chan error, 1)
	go func() {
		_, err := validateSnapshot(path, after, cfg, nil)
		dryRun <- err
	}()
	dryRunErr := sync.OnceValue(func() error { return <-dryRun })
	// An early return (the record not trusted: the whole node is computed
	// next) waits for it too, so that it does not compete with that, and
	// nothing of this apply outlives it.
	defer dryRunErr()
	eng, err := newEngine(cfg, k, log, nil)
	if err != nil {
		return nil, err
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
		return nil, whole("the recorded state does not compute: %v", err)
	}
	t.mark("compute the context as it was")
	// The record's tables, read meanwhile.
	if err := rec.awaitTables(); err != nil {
		return nil, whole("the record's tables do not read: %v", err)
	}
	// Shared endpoint chains that unrendered endpoints' elements point at,
	// and the policy and profile chains unrendered chains jump to.
	inModel := eng.inet.Desired().ChainReferences()
	for name, n := range rec.INet.ChainRefs {
		eng.eps.AddExternalUses(name, n-inModel[name])
		eng.pol.AddUses(name, n-inModel[name])
	}
	if err := trust(ctx, eng.inet, rec.INet); err != nil {
		return nil, err
	}
	if eng.arp != nil {
		if err := trust(ctx, eng.arp, rec.ARP); err != nil {
			return nil, err
		}
	}
	if rt, ok := eng.routes.(interface{ TrustWanted() }); ok {
		rt.TrustWanted()
	} else if eng.routes != nil {
		return nil, whole("the route table cannot trust a record")
	}

	t.mark("trust the record")
	if err := dryRunErr(); err != nil {
		return nil, err
	}
	t.mark("validate the context (the rest of its dry run)")
	// The changes.
	removeRecord(opts.RunDir)
	for _, m := range Diff(before, after) {
		eng.update(m)
	}
	if err := eng.compute(); err != nil {
		return nil, fmt.Errorf("apply %q: %w", path, err)
	}
	t.mark("compute the changes")
	// The record's head (the state file) is written while the kernel
	// commits.
	var pending *pendingRecord
	if head, err := newRecordHead(opts, k, ix.config, ix.json); err != nil {
		log.Debug("no record of this apply: the next one computes the whole node", "error", err)
	} else if pending, err = startRecord(opts.RunDir, head); err != nil {
		log.Warn("cannot write the record of the apply", "error", err)
	}
	defer pending.abort() // unless finished; before data, which it reads, is unmapped
	res, err := eng.program(ctx, false, true)
	if err != nil {
		if errors.Is(err, nft.ErrPartial) {
			return nil, whole("%v", err)
		}
		return nil, fmt.Errorf("apply %q: %w", path, err)
	}
	log.Debug("applied incrementally", "changed", len(changed), "operations", res.inet.Operations+res.arp.Operations)

	t.mark("program")
	// The status: the record's, with the context's endpoints replaced.
	var status Status
	if err := json.Unmarshal(rec.Status, &status); err != nil {
		return nil, fmt.Errorf("apply %q: the record's status: %w", path, err)
	}
	status.Endpoints = rec.Endpoints
	now := time.Now().UTC()
	status.PID, status.Updated, status.LastApply, status.Source, status.LastError = os.Getpid(), now, now, path, ""
	status.Endpoints = mergeStatuses(status.Endpoints, convertStatuses(eng.eps.Statuses()), func(id string) bool {
		return oldCtx[objectKey(kindWEP, id)]
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
		Contents:    updateCounts(ups),
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
	t.mark("statuses")
	// status.json and the routes record are written beside the rest of
	// the record (they only read what both are made of), and awaited
	// before the return.
	statusWritten := make(chan error, 1)
	go func() {
		statusWritten <- errors.Join(writeStatus(opts.RunDir, &status, "", nil), writeRoutesRecord(opts.RunDir, owned))
	}()
	defer func() {
		if err := <-statusWritten; err != nil {
			log.Warn("cannot write the status file", "error", err)
		}
		t.mark("write the status (the rest of it)")
	}()
	// The ruleset recorded by the last whole apply is out of date.
	for _, f := range []string{RulesetFileName, RulesetJSONFileName} {
		_ = os.Remove(filepath.Join(opts.RunDir, f))
	}
	switch {
	case res.routesErr != nil:
		return out, fmt.Errorf("apply %q: the ruleset is programmed, but routes failed: %w", path, res.routesErr)
	case eng.sysctlsFailing():
		return out, nil
	}
	if pending != nil {
		var noRec *noRecordError
		if err := pending.finish(eng, ups, &status, owned); errors.As(err, &noRec) {
			log.Debug("no record of this apply: the next one computes the whole node", "error", noRec.err)
		} else if err != nil {
			log.Warn("cannot write the record of the apply", "error", err)
		}
	}
	t.mark("write the record, and the status beside it")
	return out, nil
}

// phases times the steps of one operation, for a debug log line that says
// where its time went.
type phases struct {
	last  time.Time
	names []string
	took  []time.Duration
}

func newPhases() *phases { return &phases{last: time.Now()} }

// mark ends the step called name.
func (p *phases) mark(name string) {
	now := time.Now()
	p.names = append(p.names, name)
	p.took = append(p.took, now.Sub(p.last))
	p.last = now
}

func (p *phases) String() string {
	var b strings.Builder
	for i, name := range p.names {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %v", name, p.took[i].Round(100*time.Microsecond))
	}
	return b.String()
}

// updateCounts is Snapshot.Counts of the file with the updates ups.
func updateCounts(ups []recordUpdate) string {
	n := map[string]int{}
	for _, u := range ups {
		n[kindOf(u.Key)]++
	}
	return formatCounts(n[kindWEP], n[kindHEP], n[kindPolicy], n[kindProfile], n[kindIPSet])
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
// orchestrator, workload and endpoint, then hosts by ID). old is in that
// order already (the record's), now's workloads are few: they are merged
// in, not the whole list sorted again.
func mergeStatuses(old, now []EndpointStatus, replaced func(id string) bool) []EndpointStatus {
	keep := func(s EndpointStatus) bool { return s.Kind == "workload" && !replaced(s.ID) }
	byID := func(a, b EndpointStatus) int { return compareWorkloadIDs(a.ID, b.ID) }
	var added, hosts []EndpointStatus
	for _, s := range now {
		if s.Kind == "workload" {
			added = append(added, s)
		} else {
			hosts = append(hosts, s)
		}
	}
	slices.SortFunc(added, byID)
	// The kept ones are merged from old where they are, unless old's
	// workloads are out of order (a record not of this build's making):
	// then from a sorted copy. keep is asked once of each (it may cost).
	workloads := old
	if i := slices.IndexFunc(old, func(s EndpointStatus) bool { return s.Kind != "workload" }); i >= 0 {
		workloads = old[:i]
	}
	if !slices.IsSortedFunc(workloads, byID) || slices.ContainsFunc(old[len(workloads):], func(s EndpointStatus) bool { return s.Kind == "workload" }) {
		kept := slices.DeleteFunc(slices.Clone(old), func(s EndpointStatus) bool { return !keep(s) })
		slices.SortFunc(kept, byID)
		old, keep = kept, func(EndpointStatus) bool { return true }
	}
	out := make([]EndpointStatus, 0, len(old)+len(added)+len(hosts))
	for _, s := range old {
		if keep(s) {
			out = mergeAdded(out, s, &added, byID)
		}
	}
	out = append(out, added...)
	return append(out, hosts...)
}

// mergeAdded appends to out the statuses of added (sorted) that come
// before s, then s, unless the first of added is s recomputed: then that
// one instead.
func mergeAdded(out []EndpointStatus, s EndpointStatus, added *[]EndpointStatus, byID func(a, b EndpointStatus) int) []EndpointStatus {
	for len(*added) > 0 {
		switch c := byID((*added)[0], s); {
		case c < 0:
			out, *added = append(out, (*added)[0]), (*added)[1:]
		case c == 0: // recomputed: now's wins
			out, *added = append(out, (*added)[0]), (*added)[1:]
			return out
		default:
			return append(out, s)
		}
	}
	return append(out, s)
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

// updateMatch is the state file's updates matched against the record's.
type updateMatch struct {
	// ups are the file's updates, in file order; the digests of those
	// matched are the record's (the same bytes).
	ups []recordUpdate
	// fresh are the updates not in the record, decoded, by index.
	fresh map[int]gproto.Message
	// freshByKey are the fresh updates by the object they define.
	freshByKey map[string]int
	// recToNew maps each of the record's updates to the update of the
	// file with the same bytes, -1 when none (changed or removed).
	recToNew []int
	// digested counts the updates that did not line up (hashed).
	digested int
}

// matchLookahead is how many of the record's updates the match skips over
// looking for the bytes of the file's next update: that many removed in a
// row line up the rest without a digest.
const matchLookahead = 8

// matchScans is how many updates that do not line up are looked for by a
// scan of the record's digests before a map of them is made.
const matchScans = 16

// matchUpdates matches the updates of the state file (ix) with those of
// the last apply's record by their bytes, walking both in file order: an
// update that is where it was (or a few removals further) costs a
// comparison, not a digest and a map of ten thousand. One that does not
// line up is looked for by its digest among the record's (a scan for the
// first few such updates, then a map), and decoded if the record does not
// have it. The error is a *notIncremental.
func matchUpdates(ix *fileIndex, rec *applyRecord) (*updateMatch, error) {
	m := &updateMatch{
		ups:        make([]recordUpdate, len(ix.spans)),
		fresh:      map[int]gproto.Message{},
		freshByKey: map[string]int{},
		recToNew:   make([]int, len(rec.Updates)),
	}
	for j := range m.recToNew {
		m.recToNew[j] = -1
	}
	recBytes := func(j int) []byte { return rec.File[rec.Updates[j].Start:rec.Updates[j].End] }
	var byDigest map[[32]byte]int
	scans := 0
	next := 0 // the record's update the file's next one is compared with first
	for i, sp := range ix.spans {
		b := ix.json[sp[0]:sp[1]]
		u := recordUpdate{Start: sp[0], End: sp[1]}
		j := -1
		for k := next; k < len(rec.Updates) && k <= next+matchLookahead; k++ {
			if m.recToNew[k] < 0 && bytes.Equal(b, recBytes(k)) {
				j = k
				break
			}
		}
		if j < 0 {
			m.digested++
			u.Digest = sha256.Sum256(b)
			k := -1
			switch {
			case scans < matchScans:
				scans++
				k = slices.IndexFunc(rec.Updates, func(r recordUpdate) bool { return r.Digest == u.Digest })
			default:
				if byDigest == nil {
					byDigest = make(map[[32]byte]int, len(rec.Updates))
					for k, r := range rec.Updates {
						byDigest[r.Digest] = k
					}
				}
				if i, ok := byDigest[u.Digest]; ok {
					k = i
				}
			}
			if k >= 0 && m.recToNew[k] < 0 {
				j = k
			}
		}
		if j >= 0 {
			r := &rec.Updates[j]
			u.Digest, u.Key, u.Iface = r.Digest, r.Key, r.Iface
			m.recToNew[j] = i
			// Found by its digest far from next: the walk moves there
			// only if the file's next update is the record's next one
			// there too (many removed in a row), not for one update
			// that moved (then the others are still where they were).
			if j < next || j > next+matchLookahead {
				if i+1 < len(ix.spans) && j+1 < len(rec.Updates) && bytes.Equal(ix.json[ix.spans[i+1][0]:ix.spans[i+1][1]], recBytes(j+1)) {
					next = j + 1
				}
			} else {
				next = j + 1
			}
		} else {
			msg, ok := decodeSpan(b)
			if !ok {
				return nil, whole("updates[%d] does not read", i)
			}
			if u.Key, u.Iface = definitionOf(msg); u.Key == "" {
				return nil, whole("updates[%d] is not the definition of one object", i)
			}
			if _, dup := m.freshByKey[u.Key]; dup {
				return nil, whole("%s is defined twice", strings.ReplaceAll(u.Key, "\x00", " "))
			}
			m.fresh[i] = msg
			m.freshByKey[u.Key] = i
		}
		m.ups[i] = u
	}
	// A fresh update may define an object an unchanged one defines too.
	// The record's keys are unique: only the matched ones can collide
	// with a fresh one.
	if len(m.fresh) > 0 {
		for j, r := range rec.Updates {
			if m.recToNew[j] < 0 {
				continue
			}
			if _, dup := m.freshByKey[r.Key]; dup {
				return nil, whole("%s is defined twice", strings.ReplaceAll(r.Key, "\x00", " "))
			}
		}
	}
	return m, nil
}
