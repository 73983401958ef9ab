package testutil

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A spawner measures a command's peak memory honestly. A child's ru_maxrss
// starts from the peak RSS of the process that forked it: Go forks with
// CLONE_VM|CLONE_VFORK, so the child shares the parent's memory until it
// execs, and the kernel records the parent's peak as the child's
// (exec_mmap: setmax_mm_hiwater_rss). Forked from a benchmark that holds
// hundreds of MB, `nft -f` or nftep would be charged for memory they never
// used. So benchmarks start them from a spawner: the test binary itself,
// re-executed in a mode of its own (RunSpawner in TestMain), a small fresh
// process whose ~10 MB is all its child inherits.

// spawnEnv makes the test binary a spawner: it runs the command given as a
// JSON list of arguments and reports its wall time and peak RSS.
const spawnEnv = "NFTEP_BENCH_SPAWN"

// spawnPrefix starts the spawner's report, its last line of output.
const spawnPrefix = "BENCHSPAWN "

// Spawned is what the spawner reports of the command it ran.
type Spawned struct {
	Out       string        // stdout and stderr
	Wall      time.Duration // from the start to the exit, measured by the spawner
	MaxRSSKiB int64         // the command's ru_maxrss
	// User and Sys are the command's CPU time (the kernel's work on its
	// netlink batches runs in its threads and counts as Sys, but for what
	// the kernel defers to its workers, such as freeing a commit's
	// objects).
	User, Sys time.Duration
}

type spawnReport struct {
	WallNs    int64 `json:"wall_ns"`
	MaxRSSKiB int64 `json:"maxrss_kib"`
	UserNs    int64 `json:"user_ns"`
	SysNs     int64 `json:"sys_ns"`
}

// RunSpawner is for TestMain: when the test binary was started as a
// spawner, it runs the command, reports, and exits; otherwise it returns
// at once.
func RunSpawner() {
	args := os.Getenv(spawnEnv)
	if args == "" {
		return
	}
	var argv []string
	if err := json.Unmarshal([]byte(args), &argv); err != nil || len(argv) == 0 {
		fmt.Fprintf(os.Stderr, "%s=%q: not a JSON list of arguments\n", spawnEnv, args)
		os.Exit(2)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, spawnEnv+"=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	fmt.Print(out.String())
	if err != nil {
		fmt.Fprintf(os.Stderr, "%v: %v\n", argv, err)
		os.Exit(1)
	}
	ps := cmd.ProcessState
	rep, _ := json.Marshal(spawnReport{WallNs: wall.Nanoseconds(), MaxRSSKiB: MaxRSSKiB(ps),
		UserNs: ps.UserTime().Nanoseconds(), SysNs: ps.SystemTime().Nanoseconds()})
	fmt.Printf("\n%s%s\n", spawnPrefix, rep)
	os.Exit(0)
}

// Spawn runs argv, with env added to the environment, through the spawner
// (this test binary: its TestMain must call RunSpawner first).
func Spawn(tb testing.TB, env []string, argv ...string) Spawned {
	tb.Helper()
	args, _ := json.Marshal(argv)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(append(os.Environ(), env...), spawnEnv+"="+string(args))
	out, err := cmd.CombinedOutput()
	if err != nil {
		tb.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
	}
	text := string(out)
	i := strings.LastIndex(text, "\n"+spawnPrefix)
	if i < 0 {
		tb.Fatalf("%s: the spawner did not report\n%s", strings.Join(argv, " "), out)
	}
	var rep spawnReport
	if err := json.Unmarshal([]byte(strings.TrimSpace(text[i+1+len(spawnPrefix):])), &rep); err != nil {
		tb.Fatalf("%s: the spawner's report: %v", strings.Join(argv, " "), err)
	}
	return Spawned{Out: text[:i], Wall: time.Duration(rep.WallNs), MaxRSSKiB: rep.MaxRSSKiB,
		User: time.Duration(rep.UserNs), Sys: time.Duration(rep.SysNs)}
}

// MaxRSSKiB is an exited process's peak RSS (ru_maxrss, KiB on Linux).
func MaxRSSKiB(ps *os.ProcessState) int64 {
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		return ru.Maxrss
	}
	return 0
}
