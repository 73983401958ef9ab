package sysctl_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nftep/nftep/sysctl"
)

// lines renders writes one per line, for readable diffs.
func lines(ws []sysctl.Write) string {
	var b strings.Builder
	for _, w := range ws {
		b.WriteString(w.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// Acceptance case 23 (docs/acceptance-cases.md), IPv4 and IPv6, in Felix's
// order.
const case23Both = `/proc/sys/net/ipv6/conf/cali12345-ab/accept_ra=0
/proc/sys/net/ipv4/conf/cali12345-ab/route_localnet=1
/proc/sys/net/ipv4/neigh/cali12345-ab/proxy_delay=0
/proc/sys/net/ipv4/conf/cali12345-ab/proxy_arp=1
/proc/sys/net/ipv4/conf/cali12345-ab/forwarding=1
/proc/sys/net/ipv4/conf/cali12345-ab/rp_filter=1
/proc/sys/net/ipv6/conf/cali12345-ab/proxy_ndp=1
/proc/sys/net/ipv6/conf/cali12345-ab/forwarding=1
`

func TestCase23WritesOnlyWhileUp(t *testing.T) {
	fake := sysctl.NewFake()
	fake.Preset(sysctl.DefaultRPFilterPath, "1\n")
	s := sysctl.NewInterfaces(fake, sysctl.Options{IPv4: true, IPv6: true})

	// 1. Wanted but not up: nothing is written, no error, still pending.
	s.SetInterface("cali12345-ab", false)
	if errs := s.Apply(); errs != nil {
		t.Fatalf("Apply before up: %v", errs)
	}
	if w := fake.TakeWrites(); len(w) != 0 {
		t.Fatalf("wrote while the interface was down:\n%s", lines(w))
	}
	if !s.Pending("cali12345-ab") {
		t.Errorf("Pending = false before the interface came up")
	}

	// 2. Up: exactly case 23, and no longer pending.
	s.OnIfaceStateChanged("cali12345-ab", true)
	if errs := s.Apply(); errs != nil {
		t.Fatalf("Apply: %v", errs)
	}
	if diff := cmp.Diff(case23Both, lines(fake.TakeWrites())); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
	if s.Pending("cali12345-ab") {
		t.Errorf("Pending = true after a successful Apply")
	}

	// 3. Nothing to do: nothing written.
	s.SetInterface("cali12345-ab", false)
	s.Apply()
	if w := fake.TakeWrites(); len(w) != 0 {
		t.Errorf("rewrote an unchanged interface:\n%s", lines(w))
	}

	// 4. Down and up again: everything is rewritten (a flap loses settings).
	s.OnIfaceStateChanged("cali12345-ab", false)
	s.OnIfaceStateChanged("cali12345-ab", true)
	s.Apply()
	if diff := cmp.Diff(case23Both, lines(fake.TakeWrites())); diff != "" {
		t.Errorf("writes after a flap (-want +got):\n%s", diff)
	}
}

func TestStepsPerFamily(t *testing.T) {
	v4 := `/proc/sys/net/ipv6/conf/cali1/accept_ra=0
/proc/sys/net/ipv4/conf/cali1/route_localnet=1
/proc/sys/net/ipv4/neigh/cali1/proxy_delay=0
/proc/sys/net/ipv4/conf/cali1/proxy_arp=1
/proc/sys/net/ipv4/conf/cali1/forwarding=1
/proc/sys/net/ipv4/conf/cali1/rp_filter=2
`
	v6 := `/proc/sys/net/ipv6/conf/cali1/accept_ra=0
/proc/sys/net/ipv6/conf/cali1/proxy_ndp=1
/proc/sys/net/ipv6/conf/cali1/forwarding=1
`
	if diff := cmp.Diff(v4, lines(sysctl.Steps("cali1", true, false, false, "2"))); diff != "" {
		t.Errorf("IPv4 steps (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(v6, lines(sysctl.Steps("cali1", false, true, false, "2"))); diff != "" {
		t.Errorf("IPv6 steps (-want +got):\n%s", diff)
	}
	if got := sysctl.Steps("cali1", false, false, false, "1"); got != nil {
		t.Errorf("no family: got %v, want nothing", got)
	}
}

func TestSpoofingTogglesRPFilter(t *testing.T) {
	fake := sysctl.NewFake()
	s := sysctl.NewInterfaces(fake, sysctl.Options{IPv4: true, DefaultRPFilter: "1"})
	s.OnIfaceStateChanged("cali1", true)
	const path = "/proc/sys/net/ipv4/conf/cali1/rp_filter"
	for i, spoof := range []bool{true, false, true} {
		s.SetInterface("cali1", spoof)
		if errs := s.Apply(); errs != nil {
			t.Fatalf("step %d: Apply: %v", i+1, errs)
		}
		want := "1"
		if spoof {
			want = "0"
		}
		if got, _ := fake.Value(path); got != want {
			t.Errorf("step %d (spoofing %v): rp_filter = %q, want %q", i+1, spoof, got, want)
		}
	}
}

func TestDefaultRPFilterFallsBackToOne(t *testing.T) {
	fake := sysctl.NewFake() // DefaultRPFilterPath cannot be read
	s := sysctl.NewInterfaces(fake, sysctl.Options{IPv4: true})
	s.SetInterface("cali1", false)
	s.OnIfaceStateChanged("cali1", true)
	s.Apply()
	if got, _ := fake.Value("/proc/sys/net/ipv4/conf/cali1/rp_filter"); got != "1" {
		t.Errorf("rp_filter = %q, want the fallback 1", got)
	}
}

func TestRetryUntilInterfaceExists(t *testing.T) {
	fake := sysctl.NewFake()
	fake.SetInterfaceMissing("cali1", true)
	s := sysctl.NewInterfaces(fake, sysctl.Options{IPv4: true, IPv6: true, DefaultRPFilter: "1"})
	s.SetInterface("cali1", false)
	s.SetInterface("cali2", false)
	s.OnIfaceStateChanged("cali1", true)
	s.OnIfaceStateChanged("cali2", true)

	// 1. cali1 is missing: its error says so and names the path; cali2 is done.
	errs := s.Apply()
	if len(errs) != 1 || errs["cali1"] == nil {
		t.Fatalf("Apply errors = %v, want one for cali1", errs)
	}
	err := errs["cali1"]
	if !errors.Is(err, sysctl.ErrInterfaceGone) || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("error %q: want ErrInterfaceGone and fs.ErrNotExist", err)
	}
	// accept_ra is optional, so the first fatal write is route_localnet.
	if !strings.Contains(err.Error(), "set /proc/sys/net/ipv4/conf/cali1/route_localnet=1") {
		t.Errorf("error %q does not name the write", err)
	}
	if !s.Pending("cali1") || s.Pending("cali2") {
		t.Errorf("Pending(cali1)=%v Pending(cali2)=%v, want true, false", s.Pending("cali1"), s.Pending("cali2"))
	}
	fake.TakeWrites()

	// 2. Still missing: retried, same error.
	if errs := s.Apply(); errs["cali1"] == nil {
		t.Errorf("second Apply: no error for the missing interface")
	}

	// 3. It appears: the retry writes everything.
	fake.SetInterfaceMissing("cali1", false)
	if errs := s.Apply(); errs != nil {
		t.Fatalf("Apply after the interface appeared: %v", errs)
	}
	if got := len(fake.TakeWrites()); got != 8 {
		t.Errorf("%d writes after the interface appeared, want 8", got)
	}
	if s.Pending("cali1") {
		t.Errorf("cali1 still pending")
	}
}

func TestWriteFailureIsNotGone(t *testing.T) {
	fake := sysctl.NewFake()
	fake.SetError("/proc/sys/net/ipv4/conf/cali1/proxy_arp", syscall.EPERM)
	s := sysctl.NewInterfaces(fake, sysctl.Options{IPv4: true, DefaultRPFilter: "1"})
	s.SetInterface("cali1", false)
	s.OnIfaceStateChanged("cali1", true)
	err := s.Apply()["cali1"]
	if !errors.Is(err, syscall.EPERM) || errors.Is(err, sysctl.ErrInterfaceGone) {
		t.Fatalf("error %v: want EPERM and not ErrInterfaceGone", err)
	}
	if want := "set /proc/sys/net/ipv4/conf/cali1/proxy_arp=1: operation not permitted"; err.Error() != want {
		t.Errorf("error = %q, want %q", err, want)
	}
	// Writes before the failure happened; the ones after it did not.
	if diff := cmp.Diff(`/proc/sys/net/ipv6/conf/cali1/accept_ra=0
/proc/sys/net/ipv4/conf/cali1/route_localnet=1
/proc/sys/net/ipv4/neigh/cali1/proxy_delay=0
`, lines(fake.TakeWrites())); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
}

func TestOptionalWritesMayFail(t *testing.T) {
	fake := sysctl.NewFake()
	// IPv6 disabled on the node: no ipv6 conf tree at all.
	fake.SetMissing("/proc/sys/net/ipv6", true)
	fake.SetError("/proc/sys/net/ipv4/neigh/cali1/proxy_delay", syscall.EACCES)
	s := sysctl.NewInterfaces(fake, sysctl.Options{IPv4: true, DefaultRPFilter: "1"})
	s.SetInterface("cali1", false)
	s.OnIfaceStateChanged("cali1", true)
	if errs := s.Apply(); errs != nil {
		t.Fatalf("Apply: %v; accept_ra and proxy_delay failures must not count", errs)
	}
	if s.Pending("cali1") {
		t.Errorf("cali1 still pending")
	}
}

func TestRemoveInterface(t *testing.T) {
	fake := sysctl.NewFake()
	s := sysctl.NewInterfaces(fake, sysctl.Options{IPv4: true, DefaultRPFilter: "1"})
	s.SetInterface("cali1", false)
	s.RemoveInterface("cali1")
	s.OnIfaceStateChanged("cali1", true)
	s.Apply()
	if w := fake.Writes(); len(w) != 0 {
		t.Errorf("wrote for a removed interface:\n%s", lines(w))
	}
}

func TestProcWriterTempRoot(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "proc/sys/net/ipv4/conf/cali1")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rp_filter"), []byte("2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	w := sysctl.NewProcWriter(root)
	const path = "/proc/sys/net/ipv4/conf/cali1/rp_filter"
	if err := w.Set(path, "0"); err != nil {
		t.Fatalf("Set: %v", err)
	}
	if got, err := w.Get(path); err != nil || got != "0" {
		t.Errorf("Get = %q, %v; want \"0\"", got, err)
	}
	if ok, err := w.Exists("/proc/sys/net/ipv4/conf/cali1"); !ok || err != nil {
		t.Errorf("Exists(cali1) = %v, %v", ok, err)
	}
	if ok, err := w.Exists("/proc/sys/net/ipv4/conf/cali2"); ok || err != nil {
		t.Errorf("Exists(cali2) = %v, %v", ok, err)
	}
	// The writer never creates files: a missing interface is an error.
	err := w.Set("/proc/sys/net/ipv4/conf/cali2/rp_filter", "0")
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Set on a missing file: %v, want fs.ErrNotExist", err)
	}
}

// TestProcWriterGet: Get reads the whole file whatever its length (it
// reads with plain system calls, several reads for a long file), and a
// missing file is fs.ErrNotExist.
func TestProcWriterGet(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "proc/sys/net/ipv4")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	w := sysctl.NewProcWriter(root)
	for _, n := range []int{0, 1, 127, 128, 129, 1000} {
		want := strings.Repeat("x", n)
		if err := os.WriteFile(filepath.Join(dir, "value"), []byte(want+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if got, err := w.Get("/proc/sys/net/ipv4/value"); err != nil || got != want {
			t.Errorf("Get of %d bytes = %d bytes, %v", n, len(got), err)
		}
	}
	if _, err := w.Get("/proc/sys/net/ipv4/missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Get of a missing file: %v, want fs.ErrNotExist", err)
	}
}

func TestProcWriterRejectsPathsOutsideProcSys(t *testing.T) {
	w := sysctl.NewProcWriter(t.TempDir())
	for _, p := range []string{
		"/etc/passwd",
		"/proc/sys/net/ipv4/conf/../../../../etc/passwd",
		"proc/sys/net/ipv4/conf/x/rp_filter",
		"/proc/sysfoo/x",
	} {
		if err := w.Set(p, "1"); err == nil || !strings.Contains(err.Error(), "invalid sysctl path") {
			t.Errorf("Set(%q) = %v, want an invalid path error", p, err)
		}
	}
}

// TestVerifyRepairsForeignWrites: a setting someone rewrote is found by
// Verify and written back by the next Apply; untouched interfaces, and
// ones that are down, are left alone.
func TestVerifyRepairsForeignWrites(t *testing.T) {
	fake := sysctl.NewFake()
	s := sysctl.NewInterfaces(fake, sysctl.Options{IPv4: true, IPv6: true, DefaultRPFilter: "1"})
	for _, name := range []string{"cali1", "cali2", "cali3"} {
		s.SetInterface(name, false)
		s.OnIfaceStateChanged(name, true)
	}
	s.Apply()
	if got := s.Verify(); len(got) != 0 {
		t.Fatalf("Verify right after Apply queued %v", got)
	}
	fake.Set("/proc/sys/net/ipv6/conf/cali2/accept_ra", "1")
	fake.Set("/proc/sys/net/ipv4/conf/cali3/proxy_arp", "0")
	s.OnIfaceStateChanged("cali3", false)
	if got := s.Verify(); !slices.Equal(got, []string{"cali2"}) {
		t.Errorf("Verify queued %v, want [cali2] (cali3 is down)", got)
	}
	s.Apply()
	if v, _ := fake.Value("/proc/sys/net/ipv6/conf/cali2/accept_ra"); v != "0" {
		t.Errorf("accept_ra of cali2 is %q after Apply, want 0", v)
	}
}

// TestVerifySomeSpreadsReads: VerifySome reads n interfaces at a time, in
// name order from where the last call stopped, wrapping around, skipping
// those that are down; a foreign write is found by the call whose slice
// holds its interface.
func TestVerifySomeSpreadsReads(t *testing.T) {
	fake := sysctl.NewFake()
	s := sysctl.NewInterfaces(fake, sysctl.Options{IPv4: true, DefaultRPFilter: "1"})
	for _, name := range []string{"cali1", "cali2", "cali3", "cali4", "cali5"} {
		s.SetInterface(name, false)
		s.OnIfaceStateChanged(name, true)
	}
	s.Apply()
	s.OnIfaceStateChanged("cali2", false)
	fake.Set("/proc/sys/net/ipv4/conf/cali1/proxy_arp", "0")
	fake.Set("/proc/sys/net/ipv4/conf/cali5/proxy_arp", "0")
	steps := [][]string{
		s.VerifySome(2), // cali1, cali3
		s.VerifySome(2), // cali4, cali5
		s.VerifySome(2), // cali1 again (pending now: skipped), cali3, cali4
	}
	want := [][]string{{"cali1"}, {"cali5"}, nil}
	for i := range want {
		if !slices.Equal(steps[i], want[i]) {
			t.Errorf("VerifySome call %d queued %v, want %v", i+1, steps[i], want[i])
		}
	}
	s.Apply()
	if got := s.Verify(); len(got) != 0 {
		t.Errorf("Verify after the repair queued %v", got)
	}

	// The names VerifySome keeps in order follow interfaces that come and
	// go: a new one is read, a removed one is not.
	s.SetInterface("cali0", false)
	s.OnIfaceStateChanged("cali0", true)
	s.Apply()
	fake.Set("/proc/sys/net/ipv4/conf/cali0/proxy_arp", "0")
	if got := s.Verify(); !slices.Equal(got, []string{"cali0"}) {
		t.Errorf("Verify after cali0 came queued %v, want [cali0]", got)
	}
	s.Apply()
	s.RemoveInterface("cali3")
	fake.Set("/proc/sys/net/ipv4/conf/cali3/proxy_arp", "0")
	if got := s.Verify(); len(got) != 0 {
		t.Errorf("Verify after cali3 went queued %v, want nothing", got)
	}
}

// batchCounter is a Fake that can batch, counting the batches (each a
// switch into the namespace for a ProcWriter).
type batchCounter struct {
	*sysctl.Fake
	batches int
}

func (b *batchCounter) Batch(fn func(sysctl.Writer) error) error {
	b.batches++
	return fn(b.Fake)
}

// TestApplyLooksOnlyAtInterfacesUp: wanted interfaces that are not up cost
// an Apply nothing, not even a switch into the namespace, and an interface
// removed or gone down while pending is not written.
func TestApplyLooksOnlyAtInterfacesUp(t *testing.T) {
	w := &batchCounter{Fake: sysctl.NewFake()}
	s := sysctl.NewInterfaces(w, sysctl.Options{IPv4: true, DefaultRPFilter: "1"})
	for i := range 1000 {
		s.SetInterface(fmt.Sprintf("cali%04d", i), false)
	}
	if errs := s.Apply(); errs != nil || w.batches != 0 || len(w.TakeWrites()) != 0 {
		t.Fatalf("Apply with every interface down: errors %v, %d batches", errs, w.batches)
	}

	s.OnIfaceStateChanged("cali0007", true)
	s.OnIfaceStateChanged("cali0008", true)
	s.OnIfaceStateChanged("cali0008", false)
	s.OnIfaceStateChanged("cali0009", true)
	s.RemoveInterface("cali0009")
	if errs := s.Apply(); errs != nil {
		t.Fatal(errs)
	}
	var ifaces []string
	for _, wr := range w.TakeWrites() {
		ifaces = append(ifaces, strings.Split(wr.Path, "/")[6])
	}
	if ifaces = slices.Compact(ifaces); !slices.Equal(ifaces, []string{"cali0007"}) || w.batches != 1 {
		t.Errorf("wrote %q in %d batches, want cali0007 in 1", ifaces, w.batches)
	}
	if s.Pending("cali0007") || !s.Pending("cali0008") {
		t.Errorf("pending: cali0007 %v (want false), cali0008 %v (want true)", s.Pending("cali0007"), s.Pending("cali0008"))
	}
	if s.Apply(); w.batches != 1 {
		t.Errorf("an Apply with nothing up and pending batched")
	}
}
