package dataplane

import (
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/gob"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
	gproto "google.golang.org/protobuf/proto"

	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/proto"
)

// The record of the last apply (RUN-DIR/applied.rec): what a one-shot
// `nftep apply` programmed, kept so that the next one programs only what
// changed instead of reading the tables back and computing the whole node.
//
// It holds each object of the state file applied (a digest and the
// message), what the nftables tables held after the commit (chain digests,
// set elements, reference counts: nft.TableRecord) and the ruleset
// generation then, and the status written. It is trusted only while
// nothing can have changed behind it: the same boot, network namespace
// and nftep build, the same configuration, and the ruleset generation
// unchanged since its commit (any commit by anyone moves it). Otherwise,
// or when anything about it does not add up, apply computes the whole node
// as without a record, and writes a new one.

// RecordFileName is the record of the last apply in the run directory.
const RecordFileName = "applied.rec"

// recordFormat changes whenever applyRecord or what it holds changes.
const recordFormat = 1

// applyRecord is the run directory's record of the last apply.
type applyRecord struct {
	Format int
	// Build identifies the nftep binary (its Go build ID): another build
	// may render differently.
	Build string
	// Namespace identifies the boot and the network namespace.
	Namespace string
	// Config is the digest of the configuration (see configDigest).
	Config [32]byte
	// INet and ARP are what the tables held after the commit (ARP is
	// nil without ARP suppression).
	INet, ARP *nft.TableRecord
	// Objects are the state file's objects by objectKey.
	Objects map[string]recordObject
	// Status is the status file written, as JSON.
	Status []byte
	// Routes are the workload interfaces routes were wanted on (the
	// routes record, see RoutesFileName).
	Routes map[string]int
}

// recordObject is one object of the state file: the digest of its message
// (deterministic protobuf encoding) and that encoding.
type recordObject struct {
	Digest [32]byte
	Msg    []byte
}

// Kinds of snapshot objects, the first part of an objectKey.
const (
	kindIPSet   = "ipset"
	kindPolicy  = "policy"
	kindProfile = "profile"
	kindWEP     = "wep"
	kindHEP     = "hep"
	kindRoute   = "route"
	kindVTEP    = "vtep"
	kindHost    = "host"
	kindPool    = "pool"
	kindEncap   = "encap"
)

// incrementalKinds are the kinds whose changes an incremental apply
// programs: the ones that come and go with workloads. A change of any other
// kind (host endpoints, cluster networking) computes the whole node.
var incrementalKinds = map[string]bool{kindIPSet: true, kindPolicy: true, kindProfile: true, kindWEP: true}

func objectKey(kind, id string) string { return kind + "\x00" + id }

func kindOf(key string) string {
	k, _, _ := strings.Cut(key, "\x00")
	return k
}

// objects returns every object of s as the message that defines it, by
// objectKey. An IP set is its IPSetUpdate with the members sorted.
func (s *Snapshot) objects() map[string]gproto.Message {
	out := make(map[string]gproto.Message, len(s.weps)+len(s.policies)+len(s.ipsets)+len(s.profiles)+16)
	for id, set := range s.ipsets {
		out[objectKey(kindIPSet, id)] = &proto.IPSetUpdate{Id: id, Type: set.typ, Members: slices.Sorted(maps.Keys(set.members))}
	}
	for _, kind := range []struct {
		name  string
		items map[string]snapItem
	}{{kindPolicy, s.policies}, {kindProfile, s.profiles}, {kindWEP, s.weps}, {kindHEP, s.heps},
		{kindRoute, s.clusterRoutes}, {kindVTEP, s.vteps}, {kindHost, s.hosts}, {kindPool, s.pools}} {
		for id, it := range kind.items {
			out[objectKey(kind.name, id)] = it.msg
		}
	}
	if s.encap != nil {
		out[objectKey(kindEncap, "")] = s.encap
	}
	return out
}

// snapshotFromObjects builds a Snapshot from objects (as objects returns them),
// with config.
func snapshotFromObjects(config map[string]string, objs map[string]gproto.Message) *Snapshot {
	s := emptySnapshot()
	s.Config = maps.Clone(config)
	for key, msg := range objs {
		_, id, _ := strings.Cut(key, "\x00")
		switch kindOf(key) {
		case kindIPSet:
			u := msg.(*proto.IPSetUpdate)
			set := &snapSet{typ: u.GetType(), members: make(map[string]bool, len(u.GetMembers()))}
			for _, m := range u.GetMembers() {
				set.members[m] = true
			}
			s.ipsets[id] = set
		case kindPolicy:
			s.policies[id] = snapItem{msg: msg}
		case kindProfile:
			s.profiles[id] = snapItem{msg: msg}
		case kindWEP:
			s.weps[id] = snapItem{msg: msg}
		case kindHEP:
			s.heps[id] = snapItem{msg: msg}
		case kindRoute:
			s.clusterRoutes[id] = snapItem{msg: msg}
		case kindVTEP:
			s.vteps[id] = snapItem{msg: msg}
		case kindHost:
			s.hosts[id] = snapItem{msg: msg}
		case kindPool:
			s.pools[id] = snapItem{msg: msg}
		case kindEncap:
			s.encap = msg.(*proto.Encapsulation)
		}
	}
	return s
}

// newMessage returns an empty message of the kind of key, to decode a
// recorded one into.
func newMessage(key string) (gproto.Message, error) {
	switch kindOf(key) {
	case kindIPSet:
		return &proto.IPSetUpdate{}, nil
	case kindPolicy:
		return &proto.ActivePolicyUpdate{}, nil
	case kindProfile:
		return &proto.ActiveProfileUpdate{}, nil
	case kindWEP:
		return &proto.WorkloadEndpointUpdate{}, nil
	case kindHEP:
		return &proto.HostEndpointUpdate{}, nil
	case kindRoute:
		return &proto.RouteUpdate{}, nil
	case kindVTEP:
		return &proto.VXLANTunnelEndpointUpdate{}, nil
	case kindHost:
		return &proto.HostMetadataUpdate{}, nil
	case kindPool:
		return &proto.IPAMPoolUpdate{}, nil
	case kindEncap:
		return &proto.Encapsulation{}, nil
	}
	return nil, fmt.Errorf("unknown kind of object %q", key)
}

// encodeObjects encodes and digests objs for the record.
func encodeObjects(objs map[string]gproto.Message) (map[string]recordObject, error) {
	out := make(map[string]recordObject, len(objs))
	opts := gproto.MarshalOptions{Deterministic: true}
	for key, msg := range objs {
		b, err := opts.Marshal(msg)
		if err != nil {
			return nil, fmt.Errorf("encode %s: %w", strings.ReplaceAll(key, "\x00", " "), err)
		}
		out[key] = recordObject{Digest: sha256.Sum256(b), Msg: b}
	}
	return out, nil
}

// decodeObject decodes the recorded object key.
func decodeObject(key string, o recordObject) (gproto.Message, error) {
	m, err := newMessage(key)
	if err != nil {
		return nil, err
	}
	if err := gproto.Unmarshal(o.Msg, m); err != nil {
		return nil, fmt.Errorf("record: object %s: %w", strings.ReplaceAll(key, "\x00", " "), err)
	}
	return m, nil
}

// configDigest identifies the configuration a state file's config map
// gives under opts: what ParseConfig reads.
func configDigest(opts *Options, kv map[string]string) [32]byte {
	h := sha256.New()
	merged := opts.overlay(kv)
	for _, k := range slices.Sorted(maps.Keys(merged)) {
		fmt.Fprintf(h, "%q=%q\n", k, merged[k])
	}
	fmt.Fprintf(h, "table=%q\n", opts.Table)
	var d [32]byte
	copy(d[:], h.Sum(nil))
	return d
}

var (
	buildOnce sync.Once
	buildID   string
)

// thisBuild identifies the running binary by its Go build ID (the ELF
// note the linker writes), "" when it cannot be read: then no record is
// trusted, and none written.
func thisBuild() string {
	buildOnce.Do(func() {
		exe, err := os.Executable()
		if err != nil {
			return
		}
		f, err := elf.Open(exe)
		if err != nil {
			return
		}
		defer f.Close()
		sec := f.Section(".note.go.buildid")
		if sec == nil {
			return
		}
		data, err := sec.Data()
		if err != nil || len(data) < 16 {
			return
		}
		// namesz, descsz, type, "Go\0\0", then the ID.
		buildID = string(bytes.TrimRight(data[16:], "\x00"))
	})
	return buildID
}

// namespaceIdentity names the boot and the network namespace k programs:
// the boot ID and the namespace's cookie (SO_NETNS_COOKIE, unique per
// namespace for the whole boot, unlike its inode number). "" when either
// cannot be read.
func namespaceIdentity(k Kernel) string {
	rk, ok := k.(*realKernel)
	if !ok {
		return ""
	}
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	var cookie uint64
	err = rk.ns.Do(func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		v, err := unix.GetsockoptUint64(fd, unix.SOL_SOCKET, unix.SO_NETNS_COOKIE)
		cookie = v
		return err
	})
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%s/%d", strings.TrimSpace(string(boot)), cookie)
}

// readRecord reads the record of the last apply; nil when there is none
// or it cannot be read.
func readRecord(dir string) *applyRecord {
	if dir == "" {
		return nil
	}
	f, err := os.Open(filepath.Join(dir, RecordFileName))
	if err != nil {
		return nil
	}
	defer f.Close()
	var rec applyRecord
	if gob.NewDecoder(f).Decode(&rec) != nil || rec.Format != recordFormat {
		return nil
	}
	return &rec
}

// writeRecord replaces the record of the last apply.
func writeRecord(dir string, rec *applyRecord) error {
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(rec); err != nil {
		return fmt.Errorf("encode the record of the apply: %w", err)
	}
	return WriteFileAtomic(filepath.Join(dir, RecordFileName), buf.Bytes())
}

// removeRecord removes the record of the last apply: what it says no
// longer holds.
func removeRecord(dir string) {
	if dir != "" {
		_ = os.Remove(filepath.Join(dir, RecordFileName))
	}
}

// newRecord builds the record of an apply that just succeeded with eng and
// the snapshot snap; nil when something of it is not known (then no record
// is written, and the next apply computes the whole node).
func newRecord(opts *Options, k Kernel, eng *engine, snap *Snapshot, objs map[string]recordObject, status *Status, routesOwned map[string]int) (*applyRecord, error) {
	build, ns := thisBuild(), namespaceIdentity(k)
	if build == "" || ns == "" {
		return nil, errors.New("no build ID or namespace identity")
	}
	rec := &applyRecord{
		Format:    recordFormat,
		Build:     build,
		Namespace: ns,
		Config:    configDigest(opts, snap.Config),
		Objects:   objs,
		Routes:    routesOwned,
	}
	var err error
	if rec.INet, err = tableRecord(eng.inet); err != nil {
		return nil, err
	}
	if eng.arp != nil {
		if rec.ARP, err = tableRecord(eng.arp); err != nil {
			return nil, err
		}
	}
	if rec.Status, err = json.Marshal(status); err != nil {
		return nil, err
	}
	return rec, nil
}

func tableRecord(t Table) (*nft.TableRecord, error) {
	rt, ok := t.(interface {
		Record() (*nft.TableRecord, error)
	})
	if !ok {
		return nil, errors.New("the table keeps no record")
	}
	return rt.Record()
}
