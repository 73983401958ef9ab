package dataplane

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	gproto "google.golang.org/protobuf/proto"

	"github.com/nftep/nftep/felix"
	"github.com/nftep/nftep/proto"
)

// Snapshot is the state a state file describes: every object at its last
// update, with the position of that update for error messages. Diff turns
// two snapshots into the Felix messages that lead from one to the other, so
// a changed file is applied incrementally, like a Felix update stream.
type Snapshot struct {
	// Config is the file's `config:` map.
	Config map[string]string

	ipsets   map[string]*snapSet
	policies map[string]snapItem // by policyKey
	profiles map[string]snapItem
	weps     map[string]snapItem // by wepKey
	heps     map[string]snapItem

	// Cluster networking: routes by dst, VTEPs and host metadata by node,
	// and the encapsulation (nil: none given).
	clusterRoutes map[string]snapItem
	vteps         map[string]snapItem
	hosts         map[string]snapItem
	encap         *proto.Encapsulation
	// pools are the IP pools by id.
	pools map[string]snapItem
}

// snapItem is the last update of an object and where it came from.
type snapItem struct {
	index int
	msg   gproto.Message
}

// snapSet is an IP set after the updates and deltas so far.
type snapSet struct {
	index   int
	typ     proto.IPSetUpdate_IPSetType
	members map[string]bool
}

// NewSnapshot folds the file's updates, in order, into a Snapshot, checking
// each message's fields and, at the end, that every policy, profile and IP
// set the remaining objects refer to is defined. The first problem is
// returned as a *StateFileError.
func NewSnapshot(sf *StateFile) (*Snapshot, error) {
	s := emptySnapshot()
	s.Config = maps.Clone(sf.Config)
	for i, env := range sf.Updates {
		msg := Payload(env)
		if err := s.add(msg, i); err != nil {
			var fe *fieldError
			what := payloadName(env)
			if id := objectID(msg); id != "" {
				what += " " + id
			}
			sfe := &StateFileError{File: sf.Path, Index: i, What: what, Err: err}
			if errors.As(err, &fe) {
				sfe.Field, sfe.Err = fe.field, fe.err
			}
			return nil, sfe
		}
	}
	if err := s.checkReferences(sf.Path); err != nil {
		return nil, err
	}
	return s, nil
}

func emptySnapshot() *Snapshot {
	return &Snapshot{
		Config:   map[string]string{},
		ipsets:   map[string]*snapSet{},
		policies: map[string]snapItem{},
		profiles: map[string]snapItem{},
		weps:     map[string]snapItem{},
		heps:     map[string]snapItem{},

		clusterRoutes: map[string]snapItem{},
		vteps:         map[string]snapItem{},
		hosts:         map[string]snapItem{},
		pools:         map[string]snapItem{},
	}
}

// fieldError is a problem with one field of a message.
type fieldError struct {
	field string
	err   error
}

func (e *fieldError) Error() string { return e.field + ": " + e.err.Error() }
func (e *fieldError) Unwrap() error { return e.err }

func fieldErr(field string, format string, args ...any) error {
	return &fieldError{field: field, err: fmt.Errorf(format, args...)}
}

// add applies update i, the payload of an envelope, to s, noting i as
// where the object it defines was last defined.
func (s *Snapshot) add(payload gproto.Message, i int) error {
	switch msg := payload.(type) {
	case nil:
		return errors.New("no Felix message in this update (or one nftep does not know)")
	case *proto.ConfigUpdate:
		return errors.New("configUpdate does not belong in updates: put the settings in the top-level config map")
	case *proto.InSync:
		// Valid, and meaningless in a file: the file is the whole state.
	case *proto.IPAMPoolUpdate:
		p, err := felix.ParsePool(msg)
		if err != nil {
			var pe *felix.PoolError
			if errors.As(err, &pe) {
				return fieldErr(pe.Field, "%w", pe.Err)
			}
			return err
		}
		s.pools[p.ID] = snapItem{index: i, msg: msg}
	case *proto.IPAMPoolRemove:
		delete(s.pools, msg.GetId())
	case *proto.RouteUpdate, *proto.RouteRemove, *proto.VXLANTunnelEndpointUpdate, *proto.VXLANTunnelEndpointRemove,
		*proto.HostMetadataUpdate, *proto.HostMetadataRemove, *proto.Encapsulation:
		return s.addCluster(msg)
	case *proto.IPSetUpdate:
		if msg.GetId() == "" {
			return fieldErr("id", "missing")
		}
		set := &snapSet{index: i, typ: msg.GetType(), members: map[string]bool{}}
		if _, ok := proto.IPSetUpdate_IPSetType_name[int32(set.typ)]; !ok {
			return fieldErr("type", "unknown IP set type %d", set.typ)
		}
		// Members are checked as the policy manager parses them (it
		// would skip a bad one with a warning; a state file gets an error).
		for j, m := range msg.GetMembers() {
			if _, err := felix.ParseMember(set.typ, m); err != nil {
				return fieldErr(fmt.Sprintf("members[%d]", j), "%w", err)
			}
			set.members[m] = true
		}
		s.ipsets[msg.GetId()] = set
	case *proto.IPSetDeltaUpdate:
		set := s.ipsets[msg.GetId()]
		if set == nil {
			return fieldErr("id", "IP set %q is not defined by an earlier ipsetUpdate", msg.GetId())
		}
		for _, m := range msg.GetRemovedMembers() {
			delete(set.members, m)
		}
		for j, m := range msg.GetAddedMembers() {
			if _, err := felix.ParseMember(set.typ, m); err != nil {
				return fieldErr(fmt.Sprintf("addedMembers[%d]", j), "%w", err)
			}
			set.members[m] = true
		}
	case *proto.IPSetRemove:
		delete(s.ipsets, msg.GetId())
	case *proto.ActivePolicyUpdate:
		if msg.GetId().GetName() == "" {
			return fieldErr("id.name", "missing")
		}
		if err := checkRuleNets("policy", msg.GetPolicy().GetInboundRules(), msg.GetPolicy().GetOutboundRules()); err != nil {
			return err
		}
		s.policies[policyKey(msg.GetId())] = snapItem{index: i, msg: msg}
	case *proto.ActivePolicyRemove:
		delete(s.policies, policyKey(msg.GetId()))
	case *proto.ActiveProfileUpdate:
		if msg.GetId().GetName() == "" {
			return fieldErr("id.name", "missing")
		}
		if err := checkRuleNets("profile", msg.GetProfile().GetInboundRules(), msg.GetProfile().GetOutboundRules()); err != nil {
			return err
		}
		s.profiles[msg.GetId().GetName()] = snapItem{index: i, msg: msg}
	case *proto.ActiveProfileRemove:
		delete(s.profiles, msg.GetId().GetName())
	case *proto.WorkloadEndpointUpdate:
		if err := checkWorkload(msg); err != nil {
			return err
		}
		s.weps[wepKey(msg.GetId())] = snapItem{index: i, msg: msg}
	case *proto.WorkloadEndpointRemove:
		delete(s.weps, wepKey(msg.GetId()))
	case *proto.HostEndpointUpdate:
		if msg.GetId().GetEndpointId() == "" {
			return fieldErr("id.endpointId", "missing")
		}
		ep := msg.GetEndpoint()
		if ep == nil {
			return fieldErr("endpoint", "missing")
		}
		if ep.GetName() == "" && len(ep.GetExpectedIpv4Addrs())+len(ep.GetExpectedIpv6Addrs()) == 0 {
			return fieldErr("endpoint", "needs a name (an interface, or \"*\") or expected addresses")
		}
		if _, err := felix.ParseHostEndpoint(ep); err != nil {
			return endpointFieldErr(err)
		}
		s.heps[msg.GetId().GetEndpointId()] = snapItem{index: i, msg: msg}
	case *proto.HostEndpointRemove:
		delete(s.heps, msg.GetId().GetEndpointId())
	default:
		return fmt.Errorf("%T is not a message a state file can hold", msg)
	}
	return nil
}

// has says whether s holds the object key (see definitionOf).
func (s *Snapshot) has(key string) bool {
	_, id, _ := strings.Cut(key, "\x00")
	var ok bool
	switch kindOf(key) {
	case kindIPSet:
		_, ok = s.ipsets[id]
	case kindPolicy:
		_, ok = s.policies[id]
	case kindProfile:
		_, ok = s.profiles[id]
	case kindWEP:
		_, ok = s.weps[id]
	case kindHEP:
		_, ok = s.heps[id]
	case kindRoute:
		_, ok = s.clusterRoutes[id]
	case kindVTEP:
		_, ok = s.vteps[id]
	case kindHost:
		_, ok = s.hosts[id]
	case kindPool:
		_, ok = s.pools[id]
	case kindEncap:
		ok = s.encap != nil
	}
	return ok
}

// put files msg, a definition that passed add before, under key (see
// definitionOf), without checking it again.
func (s *Snapshot) put(key string, msg gproto.Message, i int) {
	_, id, _ := strings.Cut(key, "\x00")
	switch kindOf(key) {
	case kindIPSet:
		u := msg.(*proto.IPSetUpdate)
		set := &snapSet{index: i, typ: u.GetType(), members: make(map[string]bool, len(u.GetMembers()))}
		for _, m := range u.GetMembers() {
			set.members[m] = true
		}
		s.ipsets[id] = set
	case kindPolicy:
		s.policies[id] = snapItem{index: i, msg: msg}
	case kindProfile:
		s.profiles[id] = snapItem{index: i, msg: msg}
	case kindWEP:
		s.weps[id] = snapItem{index: i, msg: msg}
	case kindHEP:
		s.heps[id] = snapItem{index: i, msg: msg}
	case kindRoute:
		s.clusterRoutes[id] = snapItem{index: i, msg: msg}
	case kindVTEP:
		s.vteps[id] = snapItem{index: i, msg: msg}
	case kindHost:
		s.hosts[id] = snapItem{index: i, msg: msg}
	case kindPool:
		s.pools[id] = snapItem{index: i, msg: msg}
	case kindEncap:
		s.encap = msg.(*proto.Encapsulation)
	}
}

// addCluster applies one cluster-networking update to s, checked as the
// overlay manager parses it (it would skip a bad one with a warning; a
// state file gets an error naming the field).
func (s *Snapshot) addCluster(msg gproto.Message) error {
	felixErr := func(err error) error {
		if field, rest, ok := strings.Cut(err.Error(), ": "); ok && !strings.Contains(field, " ") {
			return &fieldError{field: field, err: errors.New(rest)}
		}
		return err
	}
	switch msg := msg.(type) {
	case *proto.RouteUpdate:
		r, err := felix.ParseRoute(msg)
		if err != nil {
			return felixErr(err)
		}
		s.clusterRoutes[r.Dst.String()] = snapItem{msg: msg}
	case *proto.RouteRemove:
		p, err := felix.ParseNet(msg.GetDst())
		if err != nil {
			return fieldErr("dst", "%w", err)
		}
		delete(s.clusterRoutes, p.String())
	case *proto.VXLANTunnelEndpointUpdate:
		if _, err := felix.ParseVTEP(msg); err != nil {
			return felixErr(err)
		}
		s.vteps[msg.GetNode()] = snapItem{msg: msg}
	case *proto.VXLANTunnelEndpointRemove:
		delete(s.vteps, msg.GetNode())
	case *proto.HostMetadataUpdate:
		if _, err := felix.HostAddrs(msg); err != nil {
			return felixErr(err)
		}
		s.hosts[msg.GetHostname()] = snapItem{msg: msg}
	case *proto.HostMetadataRemove:
		delete(s.hosts, msg.GetHostname())
	case *proto.Encapsulation:
		s.encap = msg
	}
	return nil
}

func checkWorkload(msg *proto.WorkloadEndpointUpdate) error {
	id := msg.GetId()
	for _, f := range []struct{ name, v string }{
		{"orchestratorId", id.GetOrchestratorId()}, {"workloadId", id.GetWorkloadId()}, {"endpointId", id.GetEndpointId()},
	} {
		if f.v == "" {
			return fieldErr("id."+f.name, "missing")
		}
	}
	ep := msg.GetEndpoint()
	if ep == nil {
		return fieldErr("endpoint", "missing")
	}
	// Checked as the endpoint manager will parse it (it would refuse the
	// endpoint; a state file gets an error instead). IPv6 fields are
	// checked even when Ipv6Support is off: in a file they are a typo.
	if _, err := felix.ParseWorkload(ep, true); err != nil {
		return endpointFieldErr(err)
	}
	for j, t := range ep.GetTiers() {
		if t.GetName() == "" {
			return fieldErr(fmt.Sprintf("endpoint.tiers[%d].name", j), "missing")
		}
	}
	return nil
}

// checkRuleNets checks the CIDRs of rules as the policy manager parses
// them (it would fail the policy closed; a state file gets an error).
func checkRuleNets(what string, inbound, outbound []*proto.Rule) error {
	for dir, rules := range [2][]*proto.Rule{inbound, outbound} {
		dirName := [2]string{"inboundRules", "outboundRules"}[dir]
		for j, r := range rules {
			for _, f := range []struct {
				name string
				nets []string
			}{{"srcNet", r.GetSrcNet()}, {"dstNet", r.GetDstNet()}, {"notSrcNet", r.GetNotSrcNet()}, {"notDstNet", r.GetNotDstNet()}} {
				for k, n := range f.nets {
					if _, err := felix.ParseNet(n); err != nil {
						return fieldErr(fmt.Sprintf("%s.%s[%d].%s[%d]", what, dirName, j, f.name, k), "%w", err)
					}
				}
			}
		}
	}
	return nil
}

// endpointFieldErr turns the first problem felix found in an endpoint
// into a fieldError under "endpoint.".
func endpointFieldErr(err error) error {
	var fe *felix.FieldError
	if errors.As(err, &fe) {
		return &fieldError{field: "endpoint." + fe.Field, err: fe.Err}
	}
	return fieldErr("endpoint", "%w", err)
}

// checkReferences makes sure every policy and profile an endpoint names,
// and every IP set a rule names, is defined: in a state file a dangling
// name is a typo, and the dataplane would drop the endpoint's traffic (a
// fail-closed placeholder) rather than guess.
func (s *Snapshot) checkReferences(file string) error {
	refErr := func(item snapItem, field string, format string, args ...any) error {
		what := ""
		if env := envelopeOf(item.msg); env != nil {
			what = payloadName(env) + " " + objectID(item.msg)
		}
		return &StateFileError{File: file, Index: item.index, What: what, Field: field, Err: fmt.Errorf(format, args...)}
	}
	checkTiers := func(item snapItem, field string, tiers []*proto.TierInfo) error {
		for j, t := range tiers {
			for dir, ids := range [2][]*proto.PolicyID{t.GetIngressPolicies(), t.GetEgressPolicies()} {
				for k, id := range ids {
					if _, ok := s.policies[policyKey(id)]; !ok {
						return refErr(item, fmt.Sprintf("%s[%d].%s[%d]", field, j, [2]string{"ingressPolicies", "egressPolicies"}[dir], k),
							"policy %s is not defined by any activePolicyUpdate", policyKey(id))
					}
				}
			}
		}
		return nil
	}
	checkProfiles := func(item snapItem, field string, ids []string) error {
		for j, id := range ids {
			if _, ok := s.profiles[id]; !ok {
				return refErr(item, fmt.Sprintf("%s[%d]", field, j), "profile %q is not defined by any activeProfileUpdate", id)
			}
		}
		return nil
	}
	checkRules := func(item snapItem, field string, rules []*proto.Rule) error {
		for j, r := range rules {
			for n, ids := range [...][]string{
				r.GetSrcIpSetIds(), r.GetDstIpSetIds(), r.GetNotSrcIpSetIds(), r.GetNotDstIpSetIds(),
				r.GetSrcNamedPortIpSetIds(), r.GetDstNamedPortIpSetIds(), r.GetNotSrcNamedPortIpSetIds(), r.GetNotDstNamedPortIpSetIds(),
				r.GetDstIpPortSetIds(),
			} {
				for k, id := range ids {
					if _, ok := s.ipsets[id]; !ok {
						return refErr(item, fmt.Sprintf("%s[%d].%s[%d]", field, j, ruleSetFields[n], k), "IP set %q is not defined by any ipsetUpdate", id)
					}
				}
			}
		}
		return nil
	}
	// The first error, in a stable order (by kind, then ID), reads better
	// than a list of consequences of one typo. Sorting 10,000 IDs costs
	// more than the checks: a first pass in map order finds whether there
	// is an error at all.
	keys := func(m map[string]snapItem) []string { return slices.Sorted(maps.Keys(m)) }
	if !s.referencesBroken(checkTiers, checkProfiles, checkRules) {
		return nil
	}
	var errs []error
	for _, k := range keys(s.weps) {
		item := s.weps[k]
		ep := item.msg.(*proto.WorkloadEndpointUpdate).GetEndpoint()
		errs = append(errs,
			checkTiers(item, "endpoint.tiers", ep.GetTiers()),
			checkProfiles(item, "endpoint.profileIds", ep.GetProfileIds()))
	}
	for _, k := range keys(s.heps) {
		item := s.heps[k]
		ep := item.msg.(*proto.HostEndpointUpdate).GetEndpoint()
		errs = append(errs,
			checkTiers(item, "endpoint.tiers", ep.GetTiers()),
			checkTiers(item, "endpoint.untrackedTiers", ep.GetUntrackedTiers()),
			checkTiers(item, "endpoint.preDnatTiers", ep.GetPreDnatTiers()),
			checkTiers(item, "endpoint.forwardTiers", ep.GetForwardTiers()),
			checkProfiles(item, "endpoint.profileIds", ep.GetProfileIds()))
	}
	for _, k := range keys(s.policies) {
		item := s.policies[k]
		pol := item.msg.(*proto.ActivePolicyUpdate).GetPolicy()
		errs = append(errs,
			checkRules(item, "policy.inboundRules", pol.GetInboundRules()),
			checkRules(item, "policy.outboundRules", pol.GetOutboundRules()))
	}
	for _, k := range keys(s.profiles) {
		item := s.profiles[k]
		prof := item.msg.(*proto.ActiveProfileUpdate).GetProfile()
		errs = append(errs,
			checkRules(item, "profile.inboundRules", prof.GetInboundRules()),
			checkRules(item, "profile.outboundRules", prof.GetOutboundRules()))
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// ruleSetFields are the protojson names of a rule's IP set fields, in the
// order checkReferences looks at them.
var ruleSetFields = [...]string{
	"srcIpSetIds", "dstIpSetIds", "notSrcIpSetIds", "notDstIpSetIds",
	"srcNamedPortIpSetIds", "dstNamedPortIpSetIds", "notSrcNamedPortIpSetIds", "notDstNamedPortIpSetIds",
	"dstIpPortSetIds",
}

// referencesBroken runs the checks of checkReferences in map order and
// says whether any failed.
func (s *Snapshot) referencesBroken(
	checkTiers func(snapItem, string, []*proto.TierInfo) error,
	checkProfiles func(snapItem, string, []string) error,
	checkRules func(snapItem, string, []*proto.Rule) error,
) bool {
	for _, item := range s.weps {
		ep := item.msg.(*proto.WorkloadEndpointUpdate).GetEndpoint()
		if checkTiers(item, "", ep.GetTiers()) != nil || checkProfiles(item, "", ep.GetProfileIds()) != nil {
			return true
		}
	}
	for _, item := range s.heps {
		ep := item.msg.(*proto.HostEndpointUpdate).GetEndpoint()
		for _, tiers := range [...][]*proto.TierInfo{ep.GetTiers(), ep.GetUntrackedTiers(), ep.GetPreDnatTiers(), ep.GetForwardTiers()} {
			if checkTiers(item, "", tiers) != nil {
				return true
			}
		}
		if checkProfiles(item, "", ep.GetProfileIds()) != nil {
			return true
		}
	}
	for _, item := range s.policies {
		pol := item.msg.(*proto.ActivePolicyUpdate).GetPolicy()
		if checkRules(item, "", pol.GetInboundRules()) != nil || checkRules(item, "", pol.GetOutboundRules()) != nil {
			return true
		}
	}
	for _, item := range s.profiles {
		prof := item.msg.(*proto.ActiveProfileUpdate).GetProfile()
		if checkRules(item, "", prof.GetInboundRules()) != nil || checkRules(item, "", prof.GetOutboundRules()) != nil {
			return true
		}
	}
	return false
}

// envelopeOf wraps msg in a ToDataplane, to name its payload.
func envelopeOf(msg gproto.Message) *proto.ToDataplane {
	env := new(proto.ToDataplane)
	switch m := msg.(type) {
	case *proto.WorkloadEndpointUpdate:
		env.Payload = &proto.ToDataplane_WorkloadEndpointUpdate{WorkloadEndpointUpdate: m}
	case *proto.HostEndpointUpdate:
		env.Payload = &proto.ToDataplane_HostEndpointUpdate{HostEndpointUpdate: m}
	case *proto.ActivePolicyUpdate:
		env.Payload = &proto.ToDataplane_ActivePolicyUpdate{ActivePolicyUpdate: m}
	case *proto.ActiveProfileUpdate:
		env.Payload = &proto.ToDataplane_ActiveProfileUpdate{ActiveProfileUpdate: m}
	default:
		return nil
	}
	return env
}

// Messages returns the Felix messages that build s from nothing, in Felix's
// order (that of a flush of Felix's EventSequencer,
// felix/calc/event_sequencer.go; see Diff).
func (s *Snapshot) Messages() []gproto.Message { return Diff(nil, s) }

// Diff returns the Felix messages that turn the state old (nil: nothing)
// into new, in the order a Felix flush uses (dependencies first, removals in
// reverse dependency order): IP sets, policies, profiles, endpoints, then
// endpoint, profile, policy and IP set removals. Unchanged objects send
// nothing; each kind is sorted by ID so the result is deterministic.
func Diff(old, new *Snapshot) []gproto.Message {
	if old == nil {
		old = emptySnapshot()
	}
	var out []gproto.Message
	for _, id := range slices.Sorted(maps.Keys(new.ipsets)) {
		ns, os := new.ipsets[id], old.ipsets[id]
		if os == nil || os.typ != ns.typ || !maps.Equal(os.members, ns.members) {
			out = append(out, &proto.IPSetUpdate{Id: id, Type: ns.typ, Members: slices.Sorted(maps.Keys(ns.members))})
		}
	}
	// Only what changed is sorted: at 10,000 endpoints with one changed,
	// sorting them all would cost more than the rest of the diff.
	updates := func(o, n map[string]snapItem) {
		var keys []string
		for k, it := range n {
			// The same message (an update whose bytes did not change,
			// see quickSnapshot) is equal without a look.
			if prev, ok := o[k]; !ok || prev.msg != it.msg && !proto.Equal(prev.msg, it.msg) {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			out = append(out, n[k].msg)
		}
	}
	removes := func(o, n map[string]snapItem, remove func(gproto.Message) gproto.Message) {
		var keys []string
		for k := range o {
			if _, ok := n[k]; !ok {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			out = append(out, remove(o[k].msg))
		}
	}
	updates(old.policies, new.policies)
	updates(old.profiles, new.profiles)
	updates(old.weps, new.weps)
	updates(old.heps, new.heps)
	removes(old.weps, new.weps, func(m gproto.Message) gproto.Message {
		return &proto.WorkloadEndpointRemove{Id: m.(*proto.WorkloadEndpointUpdate).GetId()}
	})
	removes(old.heps, new.heps, func(m gproto.Message) gproto.Message {
		return &proto.HostEndpointRemove{Id: m.(*proto.HostEndpointUpdate).GetId()}
	})
	removes(old.profiles, new.profiles, func(m gproto.Message) gproto.Message {
		return &proto.ActiveProfileRemove{Id: m.(*proto.ActiveProfileUpdate).GetId()}
	})
	removes(old.policies, new.policies, func(m gproto.Message) gproto.Message {
		return &proto.ActivePolicyRemove{Id: m.(*proto.ActivePolicyUpdate).GetId()}
	})
	for _, id := range slices.Sorted(maps.Keys(old.ipsets)) {
		if new.ipsets[id] == nil {
			out = append(out, &proto.IPSetRemove{Id: id})
		}
	}
	// Cluster networking, in Felix's order: route removals, VTEP removals
	// and updates, route updates, host metadata, IP pools, encapsulation.
	removes(old.clusterRoutes, new.clusterRoutes, func(m gproto.Message) gproto.Message {
		return &proto.RouteRemove{Dst: m.(*proto.RouteUpdate).GetDst()}
	})
	removes(old.vteps, new.vteps, func(m gproto.Message) gproto.Message {
		return &proto.VXLANTunnelEndpointRemove{Node: m.(*proto.VXLANTunnelEndpointUpdate).GetNode()}
	})
	updates(old.vteps, new.vteps)
	updates(old.clusterRoutes, new.clusterRoutes)
	removes(old.hosts, new.hosts, func(m gproto.Message) gproto.Message {
		return &proto.HostMetadataRemove{Hostname: m.(*proto.HostMetadataUpdate).GetHostname()}
	})
	updates(old.hosts, new.hosts)
	removes(old.pools, new.pools, func(m gproto.Message) gproto.Message {
		return &proto.IPAMPoolRemove{Id: m.(*proto.IPAMPoolUpdate).GetId()}
	})
	updates(old.pools, new.pools)
	if new.encap != nil && !new.encap.Equal(old.encap) {
		out = append(out, new.encap)
	}
	return out
}

// Counts returns how many objects of each kind s holds, for logs.
func (s *Snapshot) Counts() string {
	return formatCounts(len(s.weps), len(s.heps), len(s.policies), len(s.profiles), len(s.ipsets))
}

func formatCounts(weps, heps, policies, profiles, ipsets int) string {
	return fmt.Sprintf("%d workload endpoints, %d host endpoints, %d policies, %d profiles, %d IP sets",
		weps, heps, policies, profiles, ipsets)
}

// policyKey identifies a policy: kind, namespace and name.
func policyKey(id *proto.PolicyID) string {
	k := id.GetName()
	if ns := id.GetNamespace(); ns != "" {
		k = ns + "/" + k
	}
	if kind := id.GetKind(); kind != "" {
		k = kind + " " + k
	}
	return k
}

// wepKey identifies a workload endpoint as Felix prints it.
func wepKey(id *proto.WorkloadEndpointID) string {
	return id.GetOrchestratorId() + "/" + id.GetWorkloadId() + "/" + id.GetEndpointId()
}

// objectID names the object a message is about, for error messages.
func objectID(msg gproto.Message) string {
	switch m := msg.(type) {
	case *proto.WorkloadEndpointUpdate:
		return wepKey(m.GetId())
	case *proto.WorkloadEndpointRemove:
		return wepKey(m.GetId())
	case *proto.HostEndpointUpdate:
		return m.GetId().GetEndpointId()
	case *proto.HostEndpointRemove:
		return m.GetId().GetEndpointId()
	case *proto.ActivePolicyUpdate:
		return policyKey(m.GetId())
	case *proto.ActivePolicyRemove:
		return policyKey(m.GetId())
	case *proto.ActiveProfileUpdate:
		return m.GetId().GetName()
	case *proto.ActiveProfileRemove:
		return m.GetId().GetName()
	case *proto.IPSetUpdate:
		return m.GetId()
	case *proto.IPSetDeltaUpdate:
		return m.GetId()
	case *proto.IPSetRemove:
		return m.GetId()
	case *proto.RouteUpdate:
		return m.GetDst()
	case *proto.RouteRemove:
		return m.GetDst()
	case *proto.VXLANTunnelEndpointUpdate:
		return m.GetNode()
	case *proto.VXLANTunnelEndpointRemove:
		return m.GetNode()
	case *proto.HostMetadataUpdate:
		return m.GetHostname()
	case *proto.HostMetadataRemove:
		return m.GetHostname()
	case *proto.IPAMPoolUpdate:
		return m.GetId()
	case *proto.IPAMPoolRemove:
		return m.GetId()
	}
	return ""
}
