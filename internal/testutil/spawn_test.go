package testutil

import (
	"os"
	"runtime"
	"strings"
	"testing"
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
