package testutil

import (
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	RunSpawner()
	os.Exit(m.Run())
}

// TestSpawnChargesTheChildOnly pins why the spawner exists: a command run
// from a process that has touched 256 MB reports its own peak RSS through
// the spawner, not the 256 MB it would inherit from a direct fork.
func TestSpawnChargesTheChildOnly(t *testing.T) {
	ballast := make([]byte, 256<<20)
	for i := range ballast {
		if i%4096 == 0 {
			ballast[i] = 1
		}
	}
	r := Spawn(t, []string{"SPAWN_TEST=seen"}, "sh", "-c", "echo $SPAWN_TEST")
	runtime.KeepAlive(ballast)
	if strings.TrimSpace(r.Out) != "seen" {
		t.Errorf("output %q, want %q (the environment given to Spawn)", r.Out, "seen")
	}
	if r.MaxRSSKiB <= 0 || r.MaxRSSKiB > 64<<10 {
		t.Errorf("sh's peak RSS through the spawner: %d KiB; want its own few MB, not this process's 256 MB", r.MaxRSSKiB)
	}
	if r.Wall <= 0 {
		t.Errorf("wall time %v", r.Wall)
	}
}

// TestSpawnReportsCPU: the child's CPU time comes back, user and system.
func TestSpawnReportsCPU(t *testing.T) {
	// A busy loop in user space, then reads that keep the kernel busy.
	r := Spawn(t, nil, "sh", "-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; head -c 50000000 /dev/zero > /dev/null")
	if r.User <= 0 || r.Sys <= 0 {
		t.Errorf("CPU time of a busy child: user %v, sys %v; want both above zero", r.User, r.Sys)
	}
	if r.User+r.Sys > 2*r.Wall+100*time.Millisecond {
		t.Errorf("CPU time %v of a one-threaded child that ran %v: not its own", r.User+r.Sys, r.Wall)
	}
}
