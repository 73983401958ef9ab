package dataplane

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/encoding/protowire"
	gproto "google.golang.org/protobuf/proto"

	"github.com/nftep/nftep/internal/gcidle"
	"github.com/nftep/nftep/internal/netnsutil"
	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/overlay"
	"github.com/nftep/nftep/proto"
	"github.com/nftep/nftep/routes"
)

// Result is what a one-shot command (Apply, DryRun) did; as JSON it is
// what `nftep apply --json` prints (docs/json.md).
type Result struct {
	// Table is the inet table's name.
	Table string `json:"table"`
	// Contents summarises the state file ("3 workload endpoints, …").
	Contents string `json:"contents"`
	// Ruleset is the desired tables in nft syntax (inet, then arp), from a
	// dry run; Apply leaves it empty (`nftep show` prints the kernel's).
	Ruleset string `json:"-"`
	// Tables is Ruleset as data (`nftep show --json`).
	Tables []TableJSON `json:"-"`
	// Operations is the number of objects the transactions added or
	// removed (0 for a dry run, or when the kernel already matched).
	Operations int `json:"operations"`
	// Statuses is every endpoint's status, workloads first.
	Statuses []EndpointStatus `json:"statuses"`
	// Incremental is true when Apply trusted the run directory's record of
	// the last apply and programmed only what changed since (see
	// docs/performance.md); false when it computed the whole node.
	Incremental bool `json:"incremental"`
}

// validated is a state file that passed every check, with the dry-run
// engine that proved it.
type validated struct {
	snap *Snapshot
	cfg  Config
	dry  *engine
}

// validateStateFile loads path and checks it completely without touching
// the kernel: syntax, each message's fields, references, the configuration,
// and the nft validation of the ruleset it produces (a dry run through the
// real managers). ifaces, when not nil, lists interfaces for the dry run's
// statuses.
func validateStateFile(path string, opts *Options, ifaces func() ([]any, error)) (*validated, error) {
	snap, cfg, err := loadSnapshot(path, opts)
	if err != nil {
		return nil, err
	}
	return validateSnapshot(path, snap, cfg, ifaces)
}

// validateSnapshot is validateStateFile's dry run of the loaded file.
func validateSnapshot(path string, snap *Snapshot, cfg Config, ifaces func() ([]any, error)) (*validated, error) {
	k := dryKernel{ifaces: ifaces}
	dry, err := newEngine(cfg, k, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		return nil, fmt.Errorf("state file %q: %w", path, err)
	}
	if ifaces != nil {
		if us, err := ifaces(); err == nil {
			for _, u := range us {
				dry.update(u)
			}
		}
	}
	for _, m := range snap.Messages() {
		dry.update(m)
	}
	if err := dry.compute(); err != nil {
		return nil, fmt.Errorf("state file %q: %w", path, err)
	}
	if _, err := dry.program(context.Background(), false, false); err != nil {
		return nil, fmt.Errorf("state file %q: the ruleset it describes is invalid: %w", path, err)
	}
	return &validated{snap: snap, cfg: cfg, dry: dry}, nil
}

// fileValidator validates the successive versions of one state file
// (`run`). It keeps the dry-run engine of the last valid version, so that a
// new version costs what changed, not the whole node: the messages that
// lead from the last valid version to the new one (Diff) go through that
// engine, which computes and plans only them. A version the dry run
// rejects leaves the engine holding part of it, so it is dropped, and the
// next version is validated from scratch.
type fileValidator struct {
	path string
	opts *Options
	last *validated
	// cache holds the updates of the last valid version: a new version
	// decodes only the updates whose bytes changed (quickSnapshot).
	cache updateCache
	// log, when set, gets a debug line of where a load's time went.
	log *slog.Logger
}

// fileChanges are the messages that lead from base, the version before, to
// a new version of the state file.
type fileChanges struct {
	base *Snapshot
	msgs []gproto.Message
}

// load reads and validates the file. changes is empty when the version
// was validated from scratch (the first, after a rejected one, or after a
// configuration change): then the loop computes its own Diff.
func (fv *fileValidator) load() (*validated, fileChanges, error) {
	prev := fv.last
	fv.last = nil // restored below once the new version passed
	var prevSnap *Snapshot
	if prev != nil {
		prevSnap = prev.snap
	}
	t := newPhases()
	if fv.log != nil {
		defer func() { fv.log.Debug("state file validated: where the time went", "phases", t.String()) }()
	}
	snap, cfg, cache, err := fv.read(prevSnap)
	t.mark("read")
	if err != nil {
		fv.last = prev // untouched: the engine saw nothing of this version
		return nil, fileChanges{}, err
	}
	if prev == nil || !cfg.Equal(prev.cfg) {
		v, err := validateSnapshot(fv.path, snap, cfg, nil)
		fv.last = v
		if err == nil {
			fv.cache = cache
		}
		return v, fileChanges{}, err
	}
	msgs := Diff(prev.snap, snap)
	t.mark("diff")
	for _, m := range msgs {
		prev.dry.update(m)
	}
	if err := prev.dry.compute(); err != nil {
		return nil, fileChanges{}, fmt.Errorf("state file %q: %w", fv.path, err)
	}
	t.mark("dry compute")
	if _, err := prev.dry.program(context.Background(), false, false); err != nil {
		return nil, fileChanges{}, fmt.Errorf("state file %q: the ruleset it describes is invalid: %w", fv.path, err)
	}
	t.mark("dry program")
	v := &validated{snap: snap, cfg: cfg, dry: prev.dry}
	fv.last = v
	fv.cache = cache
	return v, fileChanges{base: prev.snap, msgs: msgs}, nil
}

// read reads the file and checks everything but the ruleset it describes
// (loadSnapshot). With prev, the last valid version, it tries the updates
// cache first (quickSnapshot).
func (fv *fileValidator) read(prev *Snapshot) (*Snapshot, Config, updateCache, error) {
	data, release, err := mapStateFile(fv.path)
	if err != nil {
		return nil, Config{}, nil, err
	}
	// What is returned is decoded out of data, or copied.
	defer release()
	if prev != nil && fv.cache != nil {
		if snap, cache, ok := quickSnapshot(fv.path, data, fv.cache, prev); ok {
			if cfg, err := fv.opts.parseConfig(snap.Config); err == nil {
				return snap, cfg, cache, nil
			}
		}
	}
	sf, err := ParseStateFile(fv.path, data)
	if err != nil {
		return nil, Config{}, nil, err
	}
	snap, cfg, err := parsedSnapshot(sf, fv.opts)
	if err != nil {
		return nil, Config{}, nil, err
	}
	return snap, cfg, cacheOf(sf), nil
}

// loadSnapshot reads the state file at path and checks everything but the
// ruleset it describes: syntax, each message's fields, references and the
// configuration.
func loadSnapshot(path string, opts *Options) (*Snapshot, Config, error) {
	sf, err := LoadStateFile(path)
	if err != nil {
		return nil, Config{}, err
	}
	return parsedSnapshot(sf, opts)
}

// parsedSnapshot is loadSnapshot of the parsed file sf.
func parsedSnapshot(sf *StateFile, opts *Options) (*Snapshot, Config, error) {
	path := sf.Path
	snap, err := NewSnapshot(sf)
	if err != nil {
		return nil, Config{}, err
	}
	cfg, err := opts.parseConfig(snap.Config)
	if err != nil {
		return nil, Config{}, &StateFileError{File: path, Index: -1, Field: "config", Err: err}
	}
	return snap, cfg, nil
}

// DryRun validates the state file at path and returns the ruleset and
// statuses it would produce, without programming anything. Interface states
// come from the network namespace (read only) when it can be listed, so
// that statuses look like Apply's.
func DryRun(opts Options, path string) (*Result, error) {
	k := opts.kernel()
	v, err := validateStateFile(path, &opts, k.Interfaces)
	if err != nil {
		return nil, err
	}
	return &Result{
		Table:    v.cfg.Render.TableName,
		Contents: v.snap.Counts(),
		Ruleset:  v.dry.ruleset(),
		Tables:   v.dry.tablesJSON(),
		Statuses: convertStatuses(v.dry.eps.Statuses()),
	}, nil
}

// Apply reconciles the kernel once with the state file at path (`nftep
// apply`): the file is validated completely first, so a bad file changes
// nothing; then the tables are programmed in one transaction each, routes
// and sysctls written, and the run directory updated. An existing table is
// read back and repaired, whoever changed it.
func Apply(ctx context.Context, opts Options, path string) (*Result, error) {
	if err := EnsureRunDir(opts.RunDir); err != nil {
		return nil, err
	}
	data, release, err := mapStateFile(path)
	if err != nil {
		return nil, err
	}
	// Nothing returned refers to data: messages, statuses and records are
	// decoded or copied out of it.
	defer release()
	log := opts.logger()
	res, err := applyIncremental(ctx, &opts, path, data, log)
	var ni *notIncremental
	if !errors.As(err, &ni) {
		return res, err
	}
	log.Debug("computing the whole node", "because", ni.why)
	// The collector's headroom is most of a small node's peak memory
	// here; past frugalUntil of live heap it costs more time than it
	// saves memory (gcidle.Frugal).
	defer gcidle.Frugal(frugalUntil)()
	sf, err := ParseStateFile(path, data)
	if err != nil {
		return nil, err
	}
	snap, _, err := parsedSnapshot(sf, &opts)
	if err != nil {
		return nil, err
	}
	removeRecord(opts.RunDir)
	l := newLoop(opts, "apply", path)
	// No dry run first: nothing is written before the real engine has
	// computed the whole node and planned (so checked) both tables'
	// transactions (engine.plan); a file that fails there writes nothing.
	if us, err := l.kernel.Interfaces(); err != nil {
		l.log.Warn("cannot list interfaces: endpoints will show as down", "error", err)
	} else {
		for _, u := range us {
			l.ifaces.record(u)
		}
	}
	defer func() {
		l.retry.Stop()
		l.routeTimer.Stop()
		l.resync.Stop()
		if l.eng != nil {
			l.eng.close()
		}
	}()
	l.onSnapshot(ctx, snap, nil, nil)
	if l.computeErr != nil {
		return nil, fmt.Errorf("state file %q: %w", path, l.computeErr)
	}
	if nft.IsInvalid(l.applyErr) {
		return nil, fmt.Errorf("state file %q: the ruleset it describes is invalid: %w", path, l.applyErr)
	}
	if l.nftFailed {
		// One more try, reading the table back first: a lost
		// acknowledgement, or a table someone else holds half-changed.
		l.apply(ctx, true)
	}
	if l.applyErr != nil {
		return nil, fmt.Errorf("apply %q: %w", path, l.applyErr)
	}
	res = &Result{
		Table:    l.eng.cfg.Render.TableName,
		Contents: snap.Counts(),
		Statuses: convertStatuses(l.eng.eps.Statuses()),
	}
	if lt, ok := l.eng.inet.(interface{ LastTransaction() *nft.Transaction }); ok && lt.LastTransaction() != nil {
		res.Operations = lt.LastTransaction().NumOperations()
	}
	if l.routesErr != nil {
		return res, fmt.Errorf("apply %q: the ruleset is programmed, but routes failed: %w", path, l.routesErr)
	}
	if opts.RunDir != "" && !l.eng.sysctlsFailing() {
		var owned map[string]int
		if l.eng.routes != nil {
			owned = l.eng.routes.Owned()
		}
		ups, plain := fileUpdates(sf)
		if !plain {
			log.Debug("no record of this apply: the state file's updates do more than define one object each; the next apply computes the whole node")
		} else if rec, err := newRecord(&opts, l.kernel, l.eng, snap.Config, sf.JSON, ups, l.status(), owned); err != nil {
			log.Debug("no record of this apply: the next one computes the whole node", "error", err)
		} else if err := writeRecord(opts.RunDir, rec); err != nil {
			log.Warn("cannot write the record of the apply", "error", err)
		}
	}
	return res, nil
}

// frugalUntil is the live heap up to which a whole apply runs the
// collector at GOGC=25 (gcidle.Frugal): a 1,000-workload node's is about
// 15 MB, a 10,000-workload node's 70 to 150 MB.
const frugalUntil = 48 << 20

// Run keeps the kernel reconciled with the state file at path (`nftep
// run`) until ctx is done: file changes (checked every PollInterval, or at
// once on reload), interface events, periodic resyncs. A file that fails
// validation is logged and leaves the running ruleset as it was; so does a
// failed apply, which is retried with backoff.
func Run(ctx context.Context, opts Options, path string, reload <-chan struct{}) error {
	if err := EnsureRunDir(opts.RunDir); err != nil {
		return err
	}
	// A daemon changes routes and sysctls the ruleset generation does not
	// follow: the record of the last apply no longer holds.
	removeRecord(opts.RunDir)
	l := newLoop(opts, "run", path)
	l.watch, l.daemon, l.gc = true, true, gcidle.New()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	monDone := l.watchInterfaces(ctx)
	go watchStateFile(ctx, l, path, opts.PollInterval, reload)
	err := l.run(ctx)
	cancel()
	<-monDone
	return err
}

// watchInterfaces lists the interfaces into the loop's cache, then runs
// the interface monitor until ctx is done. A monitor that cannot run ends
// the loop with an error: without interface events, statuses, routes and
// sysctls would silently go stale.
//
// The monitor's first report of each interface repeats the listing (it
// lists what exists when it subscribes); those repeats are dropped on the
// monitor's goroutine (listedRepeats). Queued to the loop, each would have
// marked the state dirty, and at 10,000 workloads the 20,000 of them,
// held back while the loop applied the start-up state, woke an idle
// daemon thousands of times just after its first apply.
func (l *loop) watchInterfaces(ctx context.Context) <-chan struct{} {
	var listed []any
	if us, err := l.kernel.Interfaces(); err == nil {
		listed = us
		for _, u := range us {
			l.ifaces.record(u)
		}
	}
	repeats := newListedRepeats(listed)
	done := make(chan struct{})
	go func() {
		defer close(done)
		emit := func(u any) {
			if !repeats.drop(u) {
				l.send(ctx, u)
			}
		}
		if err := l.kernel.WatchInterfaces(ctx, emit); err != nil {
			l.send(ctx, evFatal{err})
		}
	}()
	return done
}

// listedRepeats recognises the interface updates that repeat a listing
// the loop already recorded: per interface, the first state update and the
// first address update, when they equal the listing's. Whatever comes
// after those, or differs, is news and goes to the loop. It is used from
// the monitor's goroutine only.
type listedRepeats struct {
	state map[string]routes.InterfaceStateUpdate
	addrs map[string][]netip.Addr
}

func newListedRepeats(listed []any) *listedRepeats {
	r := &listedRepeats{state: map[string]routes.InterfaceStateUpdate{}, addrs: map[string][]netip.Addr{}}
	for _, u := range listed {
		switch u := u.(type) {
		case routes.InterfaceStateUpdate:
			r.state[u.Name] = u
		case routes.InterfaceAddrsUpdate:
			if u.Addrs != nil {
				r.addrs[u.Name] = u.Addrs
			}
		}
	}
	return r
}

// drop reports whether u only repeats the listing.
func (r *listedRepeats) drop(u any) bool {
	switch u := u.(type) {
	case routes.InterfaceStateUpdate:
		listed, ok := r.state[u.Name]
		if !ok {
			return false
		}
		delete(r.state, u.Name)
		return listed == u
	case routes.InterfaceAddrsUpdate:
		listed, ok := r.addrs[u.Name]
		if !ok {
			return false
		}
		delete(r.addrs, u.Name)
		return u.Addrs != nil && slices.Equal(listed, u.Addrs)
	}
	return false
}

// fileStamp identifies a version of a file cheaply.
type fileStamp struct {
	mtime time.Time
	size  int64
	ino   uint64
	ctime int64
}

func stampOf(fi os.FileInfo) fileStamp {
	s := fileStamp{mtime: fi.ModTime(), size: fi.Size()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		s.ino, s.ctime = st.Ino, st.Ctim.Nano()
	}
	return s
}

// watchStateFile validates the state file at start and whenever it changes
// (seen through inotify on its directory, and by polling its mtime, size,
// inode and ctime, which also catches editors that replace the file), or on
// reload, and sends the loop the result.
//
// every is the poll's period; when it is not positive, the poll is only a
// safety net for what inotify cannot see: none while inotify watches a
// directory on a local file system (it sees every change there, and an
// idle daemon should not wake for nothing), every minute on a network or
// FUSE file system (changes made by another host or by the file system's
// server make no event), every second without inotify or once its watch
// ended (the directory was removed or moved: the watch is then set up
// again as soon as it can be).
func watchStateFile(ctx context.Context, l *loop, path string, every time.Duration, reload <-chan struct{}) {
	var last fileStamp
	missing := false
	fv := &fileValidator{path: path, opts: &l.opts, log: l.log}
	load := func() {
		v, changes, err := fv.load()
		if err != nil {
			l.send(ctx, evFileError{err})
			return
		}
		l.send(ctx, evSnapshot{snap: v.snap, base: changes.base, changes: changes.msgs})
	}
	// The watch is in place before the first read: a change made between
	// the read and the watch would otherwise wait for the next poll.
	dir := filepath.Dir(path)
	w := watchDir(l, dir)
	defer w.close()
	if fi, err := os.Stat(path); err == nil {
		last = stampOf(fi)
	}
	load()
	// check loads the file when its stamp moved, and reports it missing
	// once.
	check := func() {
		fi, err := os.Stat(path)
		if err != nil {
			if !missing {
				missing = true
				l.send(ctx, evFileError{fmt.Errorf("state file %q: %w", path, err)})
			}
			return
		}
		missing = false
		if st := stampOf(fi); st != last {
			last = st
			load()
		}
	}
	// period is the poll's period for the watch w (0: no poll).
	period := func() time.Duration {
		switch {
		case every > 0:
			return every
		case w == nil:
			return DefaultPollInterval
		case remoteFS(dir):
			return DefaultInotifyPollInterval
		}
		return 0
	}
	poll := time.NewTimer(time.Hour)
	defer poll.Stop()
	arm := func() {
		poll.Stop()
		if d := period(); d > 0 {
			poll.Reset(d)
		}
	}
	arm()
	for {
		var changed, ended <-chan struct{}
		if w != nil {
			changed, ended = w.changed, w.ended
		}
		select {
		case <-ctx.Done():
			return
		case <-reload:
			load()
		case <-changed:
			// Something in the file's directory changed: look now rather
			// than at the next poll.
			check()
			arm()
		case <-ended:
			l.log.Warn("the state file's directory is no longer watched (removed or moved?): checking the file every second until it can be watched again", "dir", dir)
			w.close()
			w = nil
			arm()
		case <-poll.C:
			if w == nil && every <= 0 {
				// Watch again (a directory created anew): polling every
				// second is only for while that cannot be done.
				if w = watchDir(l, dir); w != nil {
					l.log.Info("watching the state file's directory again", "dir", dir)
				}
			}
			check()
			arm()
		}
	}
}

// dirWatch is an inotify watch of a directory (watchDir).
type dirWatch struct {
	// changed receives when an entry of the directory is written,
	// created, renamed or removed (coalesced: one receive may stand for
	// many events).
	changed chan struct{}
	// ended is closed when the watch ends: the directory itself was
	// removed or moved away, or reading the events failed.
	ended chan struct{}
	f     *os.File
	once  sync.Once
}

// close ends the watch (its reader returns).
func (w *dirWatch) close() {
	if w != nil {
		w.once.Do(func() { w.f.Close() })
	}
}

// watchDir watches dir with inotify: a replaced state file is seen within
// milliseconds, and an idle daemon need not poll. It returns nil when
// inotify cannot watch dir (not available, no such directory).
func watchDir(l *loop, dir string) *dirWatch {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		l.log.Debug("no inotify: the state file is polled", "error", err)
		return nil
	}
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_CLOSE_WRITE|unix.IN_MOVED_TO|unix.IN_MOVED_FROM|unix.IN_CREATE|unix.IN_DELETE|unix.IN_ATTRIB|unix.IN_DELETE_SELF|unix.IN_MOVE_SELF); err != nil {
		unix.Close(fd)
		l.log.Debug("no inotify watch: the state file is polled", "dir", dir, "error", err)
		return nil
	}
	w := &dirWatch{
		changed: make(chan struct{}, 1),
		ended:   make(chan struct{}),
		f:       os.NewFile(uintptr(fd), "inotify"), // non-blocking: reads park in Go's poller
	}
	go func() {
		defer close(w.ended)
		buf := make([]byte, 64<<10)
		for {
			n, err := w.f.Read(buf)
			if err != nil {
				return // closed, or broken: the caller polls
			}
			gone := false
			for off := 0; off+unix.SizeofInotifyEvent <= n; {
				ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
				// The directory itself went (IN_IGNORED follows, and no
				// more events come): what replaces it is not watched.
				gone = gone || ev.Mask&(unix.IN_DELETE_SELF|unix.IN_MOVE_SELF|unix.IN_IGNORED|unix.IN_UNMOUNT) != 0
				off += unix.SizeofInotifyEvent + int(ev.Len)
			}
			select {
			case w.changed <- struct{}{}:
			default:
			}
			if gone {
				return
			}
		}
	}()
	return w
}

// remoteFS reports whether dir is on a file system whose changes inotify
// may not see: a network file system (another host's writes make no local
// event) or FUSE (the server's own changes make none).
func remoteFS(dir string) bool {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return true // unknown: keep the safety net
	}
	switch uint32(st.Type) {
	case unix.NFS_SUPER_MAGIC, unix.SMB_SUPER_MAGIC, unix.SMB2_SUPER_MAGIC, unix.CIFS_SUPER_MAGIC,
		unix.FUSE_SUPER_MAGIC, unix.V9FS_MAGIC, unix.CEPH_SUPER_MAGIC, unix.AFS_SUPER_MAGIC,
		unix.AFS_FS_MAGIC, unix.CODA_SUPER_MAGIC, unix.NCP_SUPER_MAGIC, unix.OCFS2_SUPER_MAGIC:
		return true
	}
	return false
}

// RunDriver is Felix's external dataplane driver (`nftep driver`): it reads
// ToDataplane frames from in (fd 3) and writes FromDataplane frames to out
// (fd 4): endpoint statuses after each successful apply, and a
// ProcessStatusUpdate every ProcessStatusInterval. It follows Felix's
// start-of-day: the first ConfigUpdate builds the dataplane (and programs
// the static, fail-closed table if none exists); messages are then only
// recorded until InSync, which programs everything; later updates are
// applied in batches. It returns nil when Felix closes in (EOF) or ctx is
// done, and an error when a pipe breaks or Felix breaks the protocol.
func RunDriver(ctx context.Context, opts Options, in io.Reader, out io.Writer) error {
	if err := EnsureRunDir(opts.RunDir); err != nil {
		return err
	}
	// A daemon changes routes and sysctls the ruleset generation does not
	// follow: the record of the last apply no longer holds.
	removeRecord(opts.RunDir)
	l := newLoop(opts, "driver", "felix")
	l.watch, l.daemon, l.gc = true, true, gcidle.New()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	fw := newFelixWriter(out)
	l.sink = fw.sendStatus
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		if err := fw.run(); err != nil {
			l.send(ctx, evFatal{fmt.Errorf("write to Felix (fd 4): %w", err)})
		}
	}()
	procTick := newFdTicker(orDefault(opts.ProcessStatusInterval, DefaultProcessStatusInterval), fw.processStatus)

	monDone := l.watchInterfaces(ctx)
	go readFelix(ctx, l, in)

	err := l.run(ctx)
	cancel()
	procTick.Stop()
	fw.close()
	<-writerDone
	<-monDone
	return err
}

// FelixPipes returns the pipes Felix gives its driver: fd 3 (ToDataplane,
// from Felix) and fd 4 (FromDataplane, to Felix). It checks that both are
// open pipes (or files, sockets or /dev/null, for replays): started by hand the
// driver would otherwise read whatever took those numbers. The Go runtime
// itself opens files there when they are free (its cgroup CPU-limit files,
// its epoll descriptor), hence the file-system check.
func FelixPipes() (in, out *os.File, err error) {
	notOurs := func(fd int, why string) error {
		return fmt.Errorf("fd %d is not a pipe from Felix (%s): the driver is started by Felix, with its pipes on fd 3 and 4", fd, why)
	}
	for _, fd := range []int{3, 4} {
		var st syscall.Stat_t
		if err := syscall.Fstat(fd, &st); err != nil {
			return nil, nil, notOurs(fd, err.Error())
		}
		switch st.Mode & syscall.S_IFMT {
		case syscall.S_IFIFO, syscall.S_IFSOCK, syscall.S_IFCHR:
			continue
		case syscall.S_IFREG:
			var fs unix.Statfs_t
			if err := unix.Fstatfs(fd, &fs); err != nil {
				return nil, nil, notOurs(fd, err.Error())
			}
			switch fs.Type {
			case unix.SYSFS_MAGIC, unix.CGROUP_SUPER_MAGIC, unix.CGROUP2_SUPER_MAGIC, unix.PROC_SUPER_MAGIC:
				return nil, nil, notOurs(fd, "it is not open; the Go runtime put a kernel file there")
			}
			continue
		}
		return nil, nil, notOurs(fd, "it is not open")
	}
	return os.NewFile(3, "felix-to-driver"), os.NewFile(4, "driver-to-felix"), nil
}

// felixReadBuffer is the size of readFelix's buffer: a burst Felix writes
// at once is read in few reads, and the frames it holds tell the loop
// whether more of the burst is already here (see readFelix).
const felixReadBuffer = 64 << 10

// readFelix reads Felix's frames and hands the messages the dataplane uses
// to the loop, in order. It must drain the pipe promptly: Felix blocks
// while the pipe is full. After a frame, when its buffer holds no further
// complete frame, it tells the loop that Felix's input is drained
// (evDrained): the loop then applies at once, as Felix's own dataplane
// applies once its input channel is empty.
func readFelix(ctx context.Context, l *loop, in io.Reader) {
	br := bufio.NewReaderSize(in, felixReadBuffer)
	r := proto.NewReader(br)
	for n := 0; ; n++ {
		env, err := r.ReadToDataplane()
		if errors.Is(err, io.EOF) {
			l.send(ctx, evEOF{})
			return
		}
		if err != nil {
			l.send(ctx, evFatal{fmt.Errorf("read from Felix (fd 3), frame %d: %w", n, err)})
			return
		}
		if msg := Payload(env); msg != nil {
			l.send(ctx, msg)
		} else {
			// A payload felix.proto does not declare: the loop reports it
			// once per field number.
			l.send(ctx, evUnknownPayload{fields: unknownFieldNumbers(env)})
		}
		if !frameBuffered(br) {
			l.send(ctx, evDrained{})
		}
		l.frames.Add(1) // after the send: see testKnobs.idle
		if l.opts.test.idle != nil {
			// Have the loop report again, now that the count is up.
			l.send(ctx, evWake{})
		}
	}
}

// frameBuffered reports whether br holds a complete frame, header and
// body, so that reading it needs no read from the pipe.
func frameBuffered(br *bufio.Reader) bool {
	n := br.Buffered()
	if n < proto.HeaderSize {
		return false
	}
	hdr, err := br.Peek(proto.HeaderSize) // buffered: does not block
	if err != nil {
		return false
	}
	return binary.LittleEndian.Uint64(hdr) <= uint64(n-proto.HeaderSize)
}

// unknownFieldNumbers returns the field numbers of m's unknown fields, in
// order, each once.
func unknownFieldNumbers(m gproto.Message) []int {
	var out []int
	b := m.ProtoReflect().GetUnknown()
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			break
		}
		b = b[n:]
		if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			break
		}
		b = b[n:]
		if !slices.Contains(out, int(num)) {
			out = append(out, int(num))
		}
	}
	return out
}

// felixWriter serialises FromDataplane frames to Felix from one goroutine,
// numbering them, so that the loop never blocks on the pipe for long. The
// same goroutine sends the ProcessStatusUpdates: an idle driver wakes for
// them alone, so each is one goroutine's wake, not a ticker goroutine's
// handing a frame to this one.
type felixWriter struct {
	ch    chan *proto.FromDataplane
	start time.Time

	// mu serialises the writes of run and of the ProcessStatusUpdate
	// ticker, which writes from its own goroutine (see fdTicker).
	mu   sync.Mutex
	w    *proto.Writer
	seq  uint64
	werr error
}

func newFelixWriter(out io.Writer) *felixWriter {
	return &felixWriter{w: proto.NewWriter(out), ch: make(chan *proto.FromDataplane, 4096), start: time.Now()}
}

func (f *felixWriter) send(m *proto.FromDataplane) {
	defer func() { _ = recover() }() // a send after close during shutdown is dropped
	f.ch <- m
}

func (f *felixWriter) close() { close(f.ch) }

// write writes m with the next sequence number, unless a write failed.
func (f *felixWriter) write(m *proto.FromDataplane) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.werr != nil {
		return
	}
	m.SequenceNumber = f.seq
	f.seq++
	f.werr = f.w.WriteMessage(m)
}

// processStatus writes a ProcessStatusUpdate (the driver's heartbeat).
func (f *felixWriter) processStatus() {
	f.write(&proto.FromDataplane{Payload: &proto.FromDataplane_ProcessStatusUpdate{ProcessStatusUpdate: &proto.ProcessStatusUpdate{
		IsoTimestamp: time.Now().UTC().Format(time.RFC3339),
		Uptime:       time.Since(f.start).Seconds(),
	}}})
}

// run writes a ProcessStatusUpdate, then what is sent until close (the
// periodic ProcessStatusUpdates come from a ticker that writes through
// processStatus); after a write error it keeps draining, so that senders
// never block, and returns the error.
func (f *felixWriter) run() error {
	f.processStatus()
	for m := range f.ch {
		f.write(m)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.werr
}

// sendStatus wraps an endpoint status report in its envelope.
func (f *felixWriter) sendStatus(m gproto.Message) {
	env := &proto.FromDataplane{}
	switch m := m.(type) {
	case *proto.WorkloadEndpointStatusUpdate:
		env.Payload = &proto.FromDataplane_WorkloadEndpointStatusUpdate{WorkloadEndpointStatusUpdate: m}
	case *proto.WorkloadEndpointStatusRemove:
		env.Payload = &proto.FromDataplane_WorkloadEndpointStatusRemove{WorkloadEndpointStatusRemove: m}
	case *proto.HostEndpointStatusUpdate:
		env.Payload = &proto.FromDataplane_HostEndpointStatusUpdate{HostEndpointStatusUpdate: m}
	case *proto.HostEndpointStatusRemove:
		env.Payload = &proto.FromDataplane_HostEndpointStatusRemove{HostEndpointStatusRemove: m}
	default:
		return
	}
	f.send(env)
}

// CleanupResult says what Cleanup removed.
type CleanupResult struct {
	// Tables are the tables that existed and were deleted ("inet nftep").
	Tables []string
	// Removed says what each CleanupOwner removed, by owner name.
	Removed map[string][]string
}

// CleanupOwner is a part of nftep that programs kernel objects beyond the
// tables and the workload routes (the overlay's tunnel devices, FDB
// entries and cluster routes): Cleanup asks each to remove its own, after
// the tables and routes. Cleanup returns what it removed, for the message.
type CleanupOwner struct {
	Name    string
	Cleanup func(ctx context.Context, ns *netnsutil.NS, cfg Config) (removed []string, err error)
}

// cleanupOwners are the CleanupOwners Cleanup calls, in order. A package
// that programs more of the node adds its owner here.
var cleanupOwners = []CleanupOwner{
	{Name: "overlay", Cleanup: func(_ context.Context, ns *netnsutil.NS, _ Config) ([]string, error) {
		h, err := ns.Netlink()
		if err != nil {
			return nil, err
		}
		return overlay.Cleanup(h)
	}},
}

// Cleanup removes what nftep created (`nftep cleanup`): its inet and arp
// tables, the routes it owns (every route on a workload interface, and
// routes of its protocol), and the run directory's files. config is the
// Felix configuration (interface prefixes, route protocol, table name);
// nil means the defaults. Interface sysctls are left alone: the interfaces
// belong to the CNI plugin. This is the only way nftep's rules go away:
// the daemons never delete them on exit.
func Cleanup(ctx context.Context, opts Options, config map[string]string) (*CleanupResult, error) {
	cfg, err := opts.parseConfig(config)
	if err != nil {
		return nil, err
	}
	k := opts.kernel()
	res := &CleanupResult{}
	removeRecord(opts.RunDir)
	var errs []error
	for _, fam := range []nft.Family{nft.FamilyINet, nft.FamilyARP} {
		name := string(fam) + " " + cfg.Render.TableName
		exists, err := k.TableExists(ctx, fam, cfg.Render.TableName)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !exists {
			continue
		}
		t, err := k.NewTable(fam, cfg.Render.TableName)
		if err == nil {
			err = t.Delete(ctx)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("delete table %s: %w", name, err))
			continue
		}
		res.Tables = append(res.Tables, name)
	}
	// A route table that wants nothing removes everything it owns; no
	// grace period, since nothing is about to claim those routes.
	remove := true
	rt, err := k.NewRoutes(routes.Config{
		Protocol:             cfg.RouteProtocol,
		InterfacePrefixes:    cfg.Render.InterfacePrefixes,
		RemoveExternalRoutes: &remove,
		GracePeriod:          -1,
		ResyncInterval:       -1,
	})
	if err != nil {
		errs = append(errs, err)
	} else if rt != nil {
		rt.QueueResync()
		if err := rt.Apply(); err != nil {
			errs = append(errs, fmt.Errorf("remove routes: %w", err))
		}
		rt.Close()
	}
	for _, o := range cleanupOwners {
		ns := opts.Namespace
		if ns == nil {
			ns = netnsutil.Current()
		}
		removed, err := o.Cleanup(ctx, ns, cfg)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", o.Name, err))
		}
		if len(removed) > 0 {
			if res.Removed == nil {
				res.Removed = map[string][]string{}
			}
			res.Removed[o.Name] = removed
		}
	}
	if opts.RunDir != "" {
		for _, f := range []string{StatusFileName, RulesetFileName, RulesetJSONFileName, RoutesFileName, RecordFileName} {
			if err := os.Remove(filepath.Join(opts.RunDir, f)); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return res, errors.Join(errs...)
}
