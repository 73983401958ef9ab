package sysctl

import (
	"fmt"
	"io/fs"
	"strings"
	"sync"
)

// Write is one sysctl write: path and value.
type Write struct {
	Path  string
	Value string
}

// String renders the write like `sysctl -w` output with the full path.
func (w Write) String() string { return w.Path + "=" + w.Value }

// Fake is an in-memory Writer for tests. It keeps file contents, records
// every successful Set in order, and fails writes on demand. Every path
// exists unless it or one of its parent directories is marked missing.
// It is safe for concurrent use.
type Fake struct {
	mu      sync.Mutex
	values  map[string]string
	writes  []Write
	missing map[string]bool
	errs    map[string]error
}

var _ Writer = (*Fake)(nil)

// NewFake returns an empty Fake.
func NewFake() *Fake {
	return &Fake{values: map[string]string{}, missing: map[string]bool{}, errs: map[string]error{}}
}

// Set is part of Writer. It fails with fs.ErrNotExist under a missing
// directory and with the injected error of SetError; otherwise it stores the
// value and appends the write to Writes.
func (f *Fake) Set(path, value string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := checkPath(path); err != nil {
		return fmt.Errorf("set %s=%s: %w", path, value, err)
	}
	if f.isMissing(path) {
		return fmt.Errorf("set %s=%s: open %s: %w", path, value, path, fs.ErrNotExist)
	}
	if err := f.errs[path]; err != nil {
		return fmt.Errorf("set %s=%s: %w", path, value, err)
	}
	f.values[path] = value
	f.writes = append(f.writes, Write{path, value})
	return nil
}

// Get is part of Writer. A path never written nor preset reads as not existing.
func (f *Fake) Get(path string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.values[path]
	if !ok || f.isMissing(path) {
		return "", fmt.Errorf("read %s: %w", path, fs.ErrNotExist)
	}
	return v, nil
}

// Exists is part of Writer.
func (f *Fake) Exists(path string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return !f.isMissing(path), nil
}

func (f *Fake) isMissing(path string) bool {
	for p := path; p != "/" && p != "."; p = parent(p) {
		if f.missing[p] {
			return true
		}
	}
	return false
}

func parent(p string) string {
	i := strings.LastIndexByte(p, '/')
	if i <= 0 {
		return "/"
	}
	return p[:i]
}

// Preset stores a value without recording a write, like a kernel default
// (for example DefaultRPFilterPath).
func (f *Fake) Preset(path, value string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.values[path] = value
}

// Value returns the current contents of path and whether it was set.
func (f *Fake) Value(path string) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.values[path]
	return v, ok
}

// SetMissing marks path (a file or directory) as missing, or present again.
func (f *Fake) SetMissing(path string, missing bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if missing {
		f.missing[path] = true
	} else {
		delete(f.missing, path)
	}
}

// SetInterfaceMissing marks the conf and neigh directories of interface name
// as missing (or present again), as the kernel does when it is deleted.
func (f *Fake) SetInterfaceMissing(name string, missing bool) {
	for _, d := range []string{"ipv4/conf", "ipv6/conf", "ipv4/neigh", "ipv6/neigh"} {
		f.SetMissing("/proc/sys/net/"+d+"/"+name, missing)
	}
}

// SetError makes every Set of path fail with err (nil clears it).
func (f *Fake) SetError(path string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil {
		delete(f.errs, path)
	} else {
		f.errs[path] = err
	}
}

// Writes returns every successful write since the Fake was made or since
// the last TakeWrites, in order, without forgetting them.
func (f *Fake) Writes() []Write {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Write(nil), f.writes...)
}

// TakeWrites returns the writes since the last TakeWrites (the "last
// transaction") and forgets them; stored values are kept.
func (f *Fake) TakeWrites() []Write {
	f.mu.Lock()
	defer f.mu.Unlock()
	w := f.writes
	f.writes = nil
	return w
}
