package dataplane

import (
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nftep/nftep/internal/binrec"
	"github.com/nftep/nftep/nft"
)

// The record of the last apply (RUN-DIR/applied.rec): what a one-shot
// `nftep apply` programmed, kept so that the next one programs only what
// changed instead of reading the tables back and computing the whole node.
//
// It holds the state file applied (as JSON) with the digest of each
// update's bytes and the object it defines, what the nftables tables held
// after the commit (chain digests, set elements, reference counts:
// nft.TableRecord) and the ruleset generation then, and the status
// written. Its binary form (package binrec) is read and written in a few
// milliseconds at 10,000 workloads. It is trusted only while
// nothing can have changed behind it: the same boot, network namespace
// and nftep build, the same configuration, and the ruleset generation
// unchanged since its commit (any commit by anyone moves it). Otherwise,
// or when anything about it does not add up, apply computes the whole node
// as without a record, and writes a new one.

// RecordFileName is the record of the last apply in the run directory.
const RecordFileName = "applied.rec"

// recordFormat changes whenever applyRecord or its binary form changes.
const recordFormat = 4

// recordMagic starts the record file.
const recordMagic = "nftep applied.rec"

// applyRecord is the run directory's record of the last apply.
type applyRecord struct {
	// Build identifies the nftep binary (its Go build ID): another build
	// may render differently.
	Build string
	// Namespace identifies the boot and the network namespace.
	Namespace string
	// Config is the digest of the configuration (see configDigest).
	Config [32]byte
	// INet and ARP are what the tables held after the commit (ARP is
	// nil without ARP suppression). A record read back (decodeRecord)
	// has them only once awaitTables has returned nil: they are read in
	// the background.
	INet, ARP *nft.TableRecord
	// Status is the status file written, as JSON without its endpoints,
	// which are Endpoints.
	Status    []byte
	Endpoints []EndpointStatus
	// Routes are the workload interfaces routes were wanted on (the
	// routes record, see RoutesFileName).
	Routes map[string]int
	// File is the state file applied, as JSON (see StateFile.JSON), and
	// Updates are its updates in file order, each the definition of one
	// object.
	File    []byte
	Updates []recordUpdate

	// inetFrom and arpFrom are where a record being written takes INet
	// and ARP from: the tables themselves (nft.Table.AppendRecord), so
	// that their records need not be built first. INet and ARP are set
	// only in a record read back (decodeRecord).
	inetFrom, arpFrom recordSource

	// hasINet and hasARP say which tables the record holds, before INet
	// and ARP are read: decodeRecord reads them beside the caller's work,
	// and tablesRead is closed when they are (see awaitTables).
	hasINet, hasARP bool
	tablesRead      chan struct{}
	tablesErr       error
}

// awaitTables waits until the record's tables are read (and prepared for
// nft.Table.Trust), and returns why they could not be.
func (rec *applyRecord) awaitTables() error {
	if rec.tablesRead != nil {
		<-rec.tablesRead
	}
	return rec.tablesErr
}

// recordSource is the part of *nft.Table that writes its record.
type recordSource interface {
	CanRecord() error
	AppendRecord(w *binrec.Writer) error
}

// recordUpdate is one update of the state file applied: where it is in
// the file, the digest of its bytes, the object it defines, and for a
// workload endpoint its interface.
type recordUpdate struct {
	Start, End int
	Digest     [32]byte
	Key        string
	Iface      string
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
// or it cannot be read. The record's strings, File and Status share the
// file's mapping (see mapFile), which is never unmapped: only a one-shot
// `nftep apply` reads a record, and the mapping ends with the process.
// (The next record replaces the file by a rename, so the mapped one does
// not change under it.)
func readRecord(dir string) *applyRecord {
	if dir == "" {
		return nil
	}
	path := filepath.Join(dir, RecordFileName)
	data, _, err := mapFile(path, 1<<30)
	if errors.Is(err, errNotMapped) {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return nil
	}
	rec, err := decodeRecord(data)
	if err != nil {
		return nil
	}
	return rec
}

// writeRecord replaces the record of the last apply, streaming it into the
// file (see binrec.NewStream). It is not synced to disk: a record torn by a
// crash fails its checksum, and the next apply computes the whole node.
func writeRecord(dir string, rec *applyRecord) error {
	return writeFileAtomicWith(filepath.Join(dir, RecordFileName), func(f io.Writer) error {
		w := binrec.NewStream(f)
		encodeRecordHead(w, rec)
		if err := encodeRecordBody(w, rec); err != nil {
			return err
		}
		return w.Err()
	})
}

// encodeRecordHead writes the part of rec's binary form known before the
// apply's commit: who made it, and the state file (megabytes: see
// startRecord).
func encodeRecordHead(w *binrec.Writer, rec *applyRecord) {
	w.String(recordMagic)
	w.Uint(recordFormat)
	w.String(rec.Build)
	w.String(rec.Namespace)
	w.Fixed(rec.Config[:])
	w.Bytes(rec.File)
}

// encodeRecordBody writes the rest of rec's binary form, what the commit
// made (the statuses, the updates, the tables), and seals it. The tables
// come last: they are most of the record, and the next apply reads them
// beside its work on the rest (decodeRecord).
func encodeRecordBody(w *binrec.Writer, rec *applyRecord) error {
	w.Bytes(rec.Status)
	w.Uint(uint64(len(rec.Endpoints)))
	for _, e := range rec.Endpoints {
		w.String(e.Kind)
		w.String(e.ID)
		w.String(e.Status)
		w.String(e.Reason)
	}
	w.Uint(uint64(len(rec.Routes)))
	for name, index := range rec.Routes {
		w.String(name)
		w.Int(int64(index))
	}
	w.Uint(uint64(len(rec.Updates)))
	for _, u := range rec.Updates {
		w.Uint(uint64(u.Start))
		w.Uint(uint64(u.End - u.Start))
		w.Small(u.Digest[:])
		w.String(u.Key)
		w.String(u.Iface)
	}
	w.Bool(rec.inetFrom != nil)
	w.Bool(rec.arpFrom != nil)
	for _, from := range []recordSource{rec.inetFrom, rec.arpFrom} {
		if from != nil {
			if err := from.AppendRecord(w); err != nil {
				return err
			}
		}
	}
	w.Seal()
	return nil
}

// decodeRecord reads what encodeRecordHead and encodeRecordBody wrote. The
// tables, most of the record (at 10,000 workloads, 20,000 chains and
// 40,000 elements: tens of milliseconds), are read in the background and
// prepared for nft.Table.Trust: the caller's work before it trusts them
// does not need them (see awaitTables).
func decodeRecord(data []byte) (*applyRecord, error) {
	r := binrec.Open(data)
	r.Alias = true
	if r.String() != recordMagic || r.Uint() != recordFormat {
		return nil, errors.New("not a record of this format")
	}
	rec := &applyRecord{Build: r.String(), Namespace: r.String()}
	r.Fixed(rec.Config[:])
	rec.File = r.Bytes()
	rec.Status = r.Bytes()
	rec.Endpoints = make([]EndpointStatus, r.Len())
	for i := range rec.Endpoints {
		rec.Endpoints[i] = EndpointStatus{Kind: r.String(), ID: r.String(), Status: r.String(), Reason: r.String()}
	}
	n := r.Len()
	rec.Routes = make(map[string]int, n)
	for range n {
		name := r.String()
		rec.Routes[name] = int(r.Int())
	}
	rec.Updates = make([]recordUpdate, r.Len())
	for i := range rec.Updates {
		u := &rec.Updates[i]
		u.Start = int(r.Uint())
		u.End = u.Start + int(r.Uint())
		r.Fixed(u.Digest[:])
		u.Key, u.Iface = r.String(), r.String()
		if u.End > len(rec.File) {
			return nil, errors.New("an update out of the file")
		}
	}
	rec.hasINet, rec.hasARP = r.Bool(), r.Bool()
	if r.Err != nil {
		return nil, r.Err
	}
	rec.tablesRead = make(chan struct{})
	go func() {
		defer close(rec.tablesRead)
		rec.tablesErr = readRecordTables(r, rec)
	}()
	return rec, nil
}

// readRecordTables reads the rest of a record, its tables, from r into rec
// and prepares them for Trust.
func readRecordTables(r *binrec.Reader, rec *applyRecord) error {
	for _, t := range []struct {
		has  bool
		into **nft.TableRecord
	}{{rec.hasINet, &rec.INet}, {rec.hasARP, &rec.ARP}} {
		if !t.has {
			continue
		}
		tr, err := nft.ReadTableRecord(r)
		if err != nil {
			return err
		}
		tr.Prepare()
		*t.into = tr
	}
	return r.Done()
}

// removeRecord removes the record of the last apply: what it says no
// longer holds.
func removeRecord(dir string) {
	if dir != "" {
		_ = os.Remove(filepath.Join(dir, RecordFileName))
	}
}

// newRecord builds the record of an apply that just succeeded with eng,
// of the state file file (as JSON) with the updates ups and the config
// map config; an error when something of it is not known (then no record
// is written, and the next apply computes the whole node).
func newRecord(opts *Options, k Kernel, eng *engine, config map[string]string, file []byte, ups []recordUpdate, status *Status, routesOwned map[string]int) (*applyRecord, error) {
	rec, err := newRecordHead(opts, k, config, file)
	if err != nil {
		return nil, err
	}
	return rec, rec.fill(eng, ups, status, routesOwned)
}

// newRecordHead is the part of newRecord known before the commit (see
// encodeRecordHead).
func newRecordHead(opts *Options, k Kernel, config map[string]string, file []byte) (*applyRecord, error) {
	build, ns := thisBuild(), namespaceIdentity(k)
	if build == "" || ns == "" {
		return nil, errors.New("no build ID or namespace identity")
	}
	return &applyRecord{Build: build, Namespace: ns, Config: configDigest(opts, config), File: file}, nil
}

// fill completes a record's head with what the apply made.
func (rec *applyRecord) fill(eng *engine, ups []recordUpdate, status *Status, routesOwned map[string]int) error {
	rec.Routes, rec.Updates = routesOwned, ups
	var err error
	if rec.inetFrom, err = tableRecordSource(eng.inet); err != nil {
		return err
	}
	if eng.arp != nil {
		if rec.arpFrom, err = tableRecordSource(eng.arp); err != nil {
			return err
		}
	}
	head := *status
	head.Endpoints = nil
	if rec.Status, err = json.Marshal(&head); err != nil {
		return err
	}
	rec.Endpoints = status.Endpoints
	return nil
}

// tableRecordSource returns t as the source of its record, or why it
// cannot be one.
func tableRecordSource(t Table) (recordSource, error) {
	rs, ok := t.(recordSource)
	if !ok {
		return nil, errors.New("the table keeps no record")
	}
	if err := rs.CanRecord(); err != nil {
		return nil, err
	}
	return rs, nil
}

// pendingRecord is the record of an incremental apply being written while
// the kernel commits: its head, the state file (megabytes), goes into a
// temporary file beside the record meanwhile; the rest, once the commit is
// done, and the file replaces the record. At 10,000 workloads the copy of
// the file is about as long as the rest of the record.
type pendingRecord struct {
	head *applyRecord
	path string
	f    *os.File
	w    *binrec.Writer
	done chan error // the head's write
	over bool
}

// staleAfter is how old a temporary record file must be to be taken for
// one a killed apply left (a live one is written in well under a second).
const staleAfter = time.Minute

// startRecord starts writing head (newRecordHead) into dir. Temporary
// record files that killed applies left there are removed first: the run
// directory is usually on tmpfs, where each would hold megabytes of memory
// until the next boot.
func startRecord(dir string, head *applyRecord) (*pendingRecord, error) {
	path := filepath.Join(dir, RecordFileName)
	removeStaleTemps(dir, "."+RecordFileName+".", time.Now().Add(-staleAfter))
	f, err := os.CreateTemp(dir, "."+RecordFileName+".*")
	if err != nil {
		return nil, fmt.Errorf("write %q: %w", path, err)
	}
	p := &pendingRecord{head: head, path: path, f: f, w: binrec.NewStream(f), done: make(chan error, 1)}
	go func() {
		encodeRecordHead(p.w, head)
		p.w.Flush()
		p.done <- p.w.Err()
	}()
	return p, nil
}

// finish fills the record's head with what the apply made (see
// applyRecord.fill), writes the rest, and puts the record in place.
func (p *pendingRecord) finish(eng *engine, ups []recordUpdate, status *Status, routesOwned map[string]int) error {
	err := <-p.done
	p.over = true
	rec := p.head
	if err == nil {
		if ferr := rec.fill(eng, ups, status, routesOwned); ferr != nil {
			p.f.Close()
			os.Remove(p.f.Name())
			return &noRecordError{ferr}
		}
		err = encodeRecordBody(p.w, rec)
	}
	if err == nil {
		err = p.w.Err()
	}
	if cerr := p.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(p.f.Name(), p.path)
	}
	if err != nil {
		os.Remove(p.f.Name())
		return fmt.Errorf("write %q: %w", p.path, err)
	}
	return nil
}

// noRecordError is finish's error when the apply cannot be recorded (what
// the tables hold is not known, say): no fault, the next apply computes
// the whole node.
type noRecordError struct{ err error }

func (e *noRecordError) Error() string { return "no record of this apply: " + e.err.Error() }
func (e *noRecordError) Unwrap() error { return e.err }

// removeStaleTemps removes dir's files named prefix* last written before
// before.
func removeStaleTemps(dir, prefix string, before time.Time) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), prefix) || !e.Type().IsRegular() {
			continue
		}
		if info, err := e.Info(); err == nil && info.ModTime().Before(before) {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// abort drops the record being written (waiting for its head's write,
// which reads the state file's bytes). After finish, it does nothing.
func (p *pendingRecord) abort() {
	if p == nil || p.over {
		return
	}
	<-p.done
	p.over = true
	p.f.Close()
	os.Remove(p.f.Name())
}
