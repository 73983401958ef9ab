package dataplane

import (
	"crypto/sha256"

	gproto "google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"

	"github.com/nftep/nftep/felix"
	"github.com/nftep/nftep/proto"
)

// A state file seen by its bytes: its config and where each update is,
// without decoding the updates. An incremental apply decodes only the
// updates whose bytes it has not applied before (by their digest), so a
// node of 10,000 workloads with one changed costs one decoded update, not
// 10,000. Whatever this quick read does not understand, the full parser
// (ParseStateFile) reads, and reports.

// fileIndex is a state file as JSON, its config, and its updates' spans.
type fileIndex struct {
	json   []byte
	config map[string]string
	spans  [][2]int
}

// indexStateFile indexes data, a state file's content; ok is false when the
// quick read cannot (the file is not well-formed): the caller parses it
// fully. A file in YAML is turned into JSON first, as ParseStateFile does.
func indexStateFile(data []byte) (ix *fileIndex, ok bool) {
	js := data
	if !looksLikeJSON(data) {
		var err error
		if js, err = yaml.YAMLToJSON(data); err != nil {
			return nil, false
		}
	}
	d := proto.NewJSONDecoder(js)
	if d.ObjectStart() != nil {
		return nil, false
	}
	ix = &fileIndex{json: js, config: map[string]string{}}
	var seenConfig, seenUpdates bool
	for first := true; ; first = false {
		key, more, err := d.NextKey(first)
		if err != nil {
			return nil, false
		}
		if !more {
			break
		}
		switch string(key) {
		case "config":
			if seenConfig {
				return nil, false
			}
			seenConfig = true
			if err, _ := parseConfigJSON(d, ix.config); err != nil {
				return nil, false
			}
		case "updates":
			if seenUpdates {
				return nil, false
			}
			seenUpdates = true
			if d.IsNull() {
				continue
			}
			if d.ArrayStart() != nil {
				return nil, false
			}
			for i := 0; ; i++ {
				more, err := d.ArrayNext(i == 0)
				if err != nil {
					return nil, false
				}
				if !more {
					break
				}
				start, end, ok := d.SkipObject()
				if !ok {
					return nil, false
				}
				ix.spans = append(ix.spans, [2]int{start, end})
			}
		default:
			return nil, false
		}
	}
	if d.End() != nil {
		return nil, false
	}
	return ix, true
}

// digest is the digest of update i's bytes.
func (ix *fileIndex) digest(i int) [32]byte {
	return sha256.Sum256(ix.json[ix.spans[i][0]:ix.spans[i][1]])
}

// decode decodes update i; ok is false when it does not decode (the full
// parser says why).
func (ix *fileIndex) decode(i int) (gproto.Message, bool) {
	return decodeSpan(ix.json[ix.spans[i][0]:ix.spans[i][1]])
}

// decodeSpan decodes one update's JSON into its payload.
func decodeSpan(b []byte) (gproto.Message, bool) {
	d := proto.NewJSONDecoder(b)
	env := new(proto.ToDataplane)
	if d.Decode(env) != nil || d.End() != nil {
		return nil, false
	}
	msg := Payload(env)
	return msg, msg != nil
}

// definitionOf returns the objectKey of the object msg defines, and for a
// workload endpoint its interface; key is "" when msg is not the
// definition of one object (a removal, an IP set delta, in-sync). msg has
// passed Snapshot.add: the key is the one Snapshot files it under.
func definitionOf(msg gproto.Message) (key, iface string) {
	switch m := msg.(type) {
	case *proto.IPSetUpdate:
		return objectKey(kindIPSet, m.GetId()), ""
	case *proto.ActivePolicyUpdate:
		return objectKey(kindPolicy, policyKey(m.GetId())), ""
	case *proto.ActiveProfileUpdate:
		return objectKey(kindProfile, m.GetId().GetName()), ""
	case *proto.WorkloadEndpointUpdate:
		return objectKey(kindWEP, wepKey(m.GetId())), m.GetEndpoint().GetName()
	case *proto.HostEndpointUpdate:
		return objectKey(kindHEP, m.GetId().GetEndpointId()), ""
	case *proto.RouteUpdate:
		if r, err := felix.ParseRoute(m); err == nil {
			return objectKey(kindRoute, r.Dst.String()), ""
		}
	case *proto.VXLANTunnelEndpointUpdate:
		return objectKey(kindVTEP, m.GetNode()), ""
	case *proto.HostMetadataUpdate:
		return objectKey(kindHost, m.GetHostname()), ""
	case *proto.IPAMPoolUpdate:
		if p, err := felix.ParsePool(m); err == nil {
			return objectKey(kindPool, p.ID), ""
		}
	case *proto.Encapsulation:
		return objectKey(kindEncap, ""), ""
	}
	return "", ""
}

// fileUpdates indexes sf, a file that passed NewSnapshot, for the record
// of the apply: each update's span, digest, and the object it defines. ok
// is false unless every update defines one object and no object twice
// (removals and deltas make an object the sum of several updates: such a
// file gets no record, and the next apply reads it whole).
func fileUpdates(sf *StateFile) (ups []recordUpdate, ok bool) {
	if len(sf.Spans) != len(sf.Updates) {
		return nil, false
	}
	seen := make(map[string]bool, len(sf.Updates))
	ups = make([]recordUpdate, len(sf.Updates))
	for i, env := range sf.Updates {
		key, iface := definitionOf(Payload(env))
		if key == "" || seen[key] {
			return nil, false
		}
		seen[key] = true
		sp := sf.Spans[i]
		ups[i] = recordUpdate{Start: sp[0], End: sp[1], Digest: sha256.Sum256(sf.JSON[sp[0]:sp[1]]), Key: key, Iface: iface}
	}
	return ups, true
}

// dropsDefinitions says whether next lacks a policy or profile prev has:
// then endpoints that did not change may name what is gone.
func dropsDefinitions(prev, next *Snapshot) bool {
	for k := range prev.policies {
		if _, ok := next.policies[k]; !ok {
			return true
		}
	}
	for k := range prev.profiles {
		if _, ok := next.profiles[k]; !ok {
			return true
		}
	}
	return false
}

// updateCache holds the updates of the last valid version of a state file
// (`run`), by the digest of their bytes: the object each defines, decoded
// and checked. The next version decodes only the updates not in it.
type updateCache map[[32]byte]cachedUpdate

type cachedUpdate struct {
	key string
	msg gproto.Message
}

// cacheOf is the updateCache of sf, a file that passed NewSnapshot; nil
// when its updates do more than define one object each.
func cacheOf(sf *StateFile) updateCache {
	ups, ok := fileUpdates(sf)
	if !ok {
		return nil
	}
	c := make(updateCache, len(ups))
	for i, u := range ups {
		c[u.Digest] = cachedUpdate{key: u.Key, msg: Payload(sf.Updates[i])}
	}
	return c
}

// quickSnapshot is NewSnapshot of the state file data (named path), taking
// the updates cache holds as they are and decoding and checking only the
// others, which it adds to cache. ok is false when it cannot vouch for the
// result (a file it does not read, an update that does not decode or
// check, one that is no definition of one object or defines one twice, a
// broken reference): the caller reads the file in full, which reports what
// is wrong.
//
// The cache keeps the updates of earlier versions too (the same bytes
// coming back cost nothing), until it holds twice as many as the file:
// then it is pruned to this version's.
//
// prev, when not nil, is the last valid version: when it defines every
// policy and profile this one does not drop, only the updates decoded here
// are checked for references (the others passed with the same
// definitions), not every endpoint of the node.
func quickSnapshot(path string, data []byte, cache updateCache, prev *Snapshot) (s *Snapshot, next updateCache, ok bool) {
	ix, ok := indexStateFile(data)
	if !ok {
		return nil, nil, false
	}
	s = emptySnapshot()
	s.Config = ix.config
	digests := make([][32]byte, len(ix.spans))
	fresh := emptySnapshot() // the endpoints decoded here, for the reference check
	for i := range ix.spans {
		d := ix.digest(i)
		digests[i] = d
		c, ok := cache[d]
		if !ok {
			msg, ok := ix.decode(i)
			if !ok {
				return nil, nil, false
			}
			if c.key, _ = definitionOf(msg); c.key == "" {
				return nil, nil, false
			}
			c.msg = msg
		}
		if s.has(c.key) {
			return nil, nil, false
		}
		if ok {
			s.put(c.key, c.msg, i)
		} else if s.add(c.msg, i) != nil {
			return nil, nil, false
		} else {
			fresh.put(c.key, c.msg, i)
		}
		cache[d] = c
	}
	check := s
	if prev != nil && !dropsDefinitions(prev, s) {
		check = &Snapshot{ipsets: s.ipsets, policies: s.policies, profiles: s.profiles, weps: fresh.weps, heps: fresh.heps}
	}
	if check.checkReferences(path) != nil {
		return nil, nil, false
	}
	if len(cache) > 2*len(ix.spans)+64 {
		pruned := make(updateCache, len(digests))
		for _, d := range digests {
			pruned[d] = cache[d]
		}
		cache = pruned
	}
	return s, cache, true
}
