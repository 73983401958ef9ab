// Package testutil holds what the tests of several packages share and
// testify (require, assert) does not offer: the recorded real-Felix streams
// (FelixRecording), indented expected text (Dedent), golden files (Golden,
// with -update), a TCP connection between network namespaces (Connect) and
// a buffer a writer and a polling test can share (SyncBuffer). To wait for
// a condition, use require.Eventually.
package testutil

import (
	"bytes"
	"errors"
	"flag"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nftep/nftep/internal/netnstest"
)

var update = flag.Bool("update", false, "rewrite the golden files (testdata/*) with what the tests produce")

// Dedent removes a leading newline and the tabs that begin every non-blank
// line of s, so that expected text can be indented like the code around
// it; tabs further in (nft's own indentation) are kept, and blank lines
// become empty.
func Dedent(s string) string {
	s = strings.TrimPrefix(s, "\n")
	lines := strings.Split(s, "\n")
	indent := -1
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		n := len(l) - len(strings.TrimLeft(l, "\t"))
		if indent < 0 || n < indent {
			indent = n
		}
	}
	for i, l := range lines {
		switch {
		case strings.TrimSpace(l) == "":
			lines[i] = ""
		case indent > 0:
			lines[i] = l[indent:]
		}
	}
	return strings.Join(lines, "\n")
}

// Golden compares got with the file at path (relative to the test's
// package, as a rule testdata/<case>.<ext>). With `go test -update` it
// writes got to the file instead, creating the directory if needed.
func Golden(t testing.TB, path, got string) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("golden file: %v (go test -update writes it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s differs (-want +got; go test -update rewrites it):\n%s", path, diff)
	}
}

// Connect listens on the TCP address addr in namespace to and dials it from
// namespace from, waiting at most timeout; it returns the dial's error (a
// timeout when a drop rule ate the SYN). A dial error that is not a
// timeout is logged.
func Connect(t testing.TB, from, to *netnstest.NS, addr string, timeout time.Duration) error {
	t.Helper()
	var ln net.Listener
	if err := to.Do(func() (err error) { ln, err = net.Listen("tcp", addr); return err }); err != nil {
		t.Fatalf("listen on %s: %v", addr, err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	var conn net.Conn
	err := from.Do(func() (err error) {
		conn, err = net.DialTimeout("tcp", addr, timeout)
		return err
	})
	if err == nil {
		conn.Close()
	} else if !errors.Is(err, os.ErrDeadlineExceeded) && !strings.Contains(err.Error(), "timeout") {
		t.Logf("dial %s: %v (not a timeout)", addr, err)
	}
	return err
}

// SyncBuffer is a bytes.Buffer that a writer (a logger, a process's output)
// and a polling test can share.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Len returns how many bytes were written so far.
func (s *SyncBuffer) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Len()
}

// Bytes returns a copy of what was written so far.
func (s *SyncBuffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.b.Bytes())
}

// Take returns what was written so far and forgets it.
func (s *SyncBuffer) Take() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.b.String()
	s.b.Reset()
	return out
}
