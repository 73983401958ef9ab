package metrics

import (
	"bytes"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"syscall"
	"time"
)

// runtimeFamilies returns the Go runtime's and the process's standard
// metrics, read now, under the names Prometheus's Go clients give them
// (go_*, process_*), so that the usual dashboards and alerts work.
func runtimeFamilies() []*family {
	var fams []*family
	gauge := func(name, help string, v float64) {
		fams = append(fams, oneSeries(name, help, kindGauge, v))
	}
	counter := func(name, help string, v float64) {
		fams = append(fams, oneSeries(name, help, kindCounter, v))
	}

	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	gauge("go_goroutines", "Number of goroutines that currently exist.", float64(runtime.NumGoroutine()))
	threads, _ := runtime.ThreadCreateProfile(nil)
	gauge("go_threads", "Number of OS threads created.", float64(threads))
	gauge("go_sched_gomaxprocs_threads", "The current runtime.GOMAXPROCS setting.", float64(runtime.GOMAXPROCS(0)))
	info := &family{name: "go_info", help: "Information about the Go environment.", kind: kindGauge, labels: []string{"version"}, series: map[string]*series{}}
	info.with(runtime.Version()).set(1)
	fams = append(fams, info)

	gauge("go_memstats_alloc_bytes", "Bytes of allocated heap objects.", float64(ms.Alloc))
	counter("go_memstats_alloc_bytes_total", "Bytes allocated for heap objects, freed or not.", float64(ms.TotalAlloc))
	gauge("go_memstats_sys_bytes", "Bytes of memory obtained from the OS.", float64(ms.Sys))
	counter("go_memstats_mallocs_total", "Heap objects allocated.", float64(ms.Mallocs))
	counter("go_memstats_frees_total", "Heap objects freed.", float64(ms.Frees))
	gauge("go_memstats_heap_alloc_bytes", "Bytes of allocated heap objects.", float64(ms.HeapAlloc))
	gauge("go_memstats_heap_sys_bytes", "Bytes of heap memory obtained from the OS.", float64(ms.HeapSys))
	gauge("go_memstats_heap_idle_bytes", "Bytes in idle (unused) heap spans.", float64(ms.HeapIdle))
	gauge("go_memstats_heap_inuse_bytes", "Bytes in in-use heap spans.", float64(ms.HeapInuse))
	gauge("go_memstats_heap_released_bytes", "Bytes of heap memory returned to the OS.", float64(ms.HeapReleased))
	gauge("go_memstats_heap_objects", "Allocated heap objects.", float64(ms.HeapObjects))
	gauge("go_memstats_stack_inuse_bytes", "Bytes in stack spans.", float64(ms.StackInuse))
	gauge("go_memstats_stack_sys_bytes", "Bytes of stack memory obtained from the OS.", float64(ms.StackSys))
	gauge("go_memstats_gc_sys_bytes", "Bytes of memory in garbage collection metadata.", float64(ms.GCSys))
	gauge("go_memstats_next_gc_bytes", "Heap size at which the next garbage collection is due.", float64(ms.NextGC))
	gauge("go_memstats_last_gc_time_seconds", "When the last garbage collection finished, in seconds since the Unix epoch.", float64(ms.LastGC)/1e9)

	// GOGC and GOMEMLIMIT as in effect: an idle daemon turns the
	// proportional collector off under a memory limit (internal/gcidle),
	// and these show it.
	rm := []metrics.Sample{{Name: "/gc/gogc:percent"}, {Name: "/gc/gomemlimit:bytes"}}
	metrics.Read(rm)
	if rm[0].Value.Kind() == metrics.KindUint64 {
		// The runtime reports GOGC=off (-1) as a uint64.
		gauge("go_gc_gogc_percent", "Heap size target percentage (GOGC; -1 when the collector is off).", float64(int64(rm[0].Value.Uint64())))
	}
	if rm[1].Value.Kind() == metrics.KindUint64 {
		gauge("go_gc_gomemlimit_bytes", "Go runtime memory limit (GOMEMLIMIT).", float64(rm[1].Value.Uint64()))
	}

	var gc debug.GCStats
	gc.PauseQuantiles = make([]time.Duration, 5)
	debug.ReadGCStats(&gc)
	pauses := &family{name: "go_gc_duration_seconds", help: "Stop-the-world pause of garbage collections: minimum, quartiles and maximum of the recent ones.",
		kind: kindSummary, quantiles: []float64{0, 0.25, 0.5, 0.75, 1}, series: map[string]*series{}}
	s := pauses.with()
	s.sum, s.count = gc.PauseTotal.Seconds(), uint64(gc.NumGC)
	s.fixedQuantiles = make([]float64, 5)
	for i, d := range gc.PauseQuantiles {
		s.fixedQuantiles[i] = d.Seconds()
	}
	fams = append(fams, pauses)

	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		counter("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", cpu.Seconds())
	}
	if fds, err := os.ReadDir("/proc/self/fd"); err == nil {
		// Less the one that reads the directory.
		gauge("process_open_fds", "Number of open file descriptors.", float64(len(fds)-1))
	}
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil {
		gauge("process_max_fds", "Maximum number of open file descriptors.", float64(lim.Cur))
	}
	if syscall.Getrlimit(syscall.RLIMIT_AS, &lim) == nil {
		// Unlimited is RLIM_INFINITY, 2^64-1, as Prometheus's Go client
		// reports it too.
		gauge("process_virtual_memory_max_bytes", "Maximum amount of virtual memory available in bytes.", float64(lim.Cur))
	}
	if st, ok := procStat(); ok {
		gauge("process_virtual_memory_bytes", "Virtual memory size in bytes.", float64(st.vsize))
		gauge("process_resident_memory_bytes", "Resident memory size in bytes.", float64(st.rssPages*uint64(os.Getpagesize())))
		if boot, ok := bootTime(); ok {
			gauge("process_start_time_seconds", "Start time of the process since unix epoch in seconds.", boot+float64(st.startTicks)/userHZ)
		}
	}
	return fams
}

func oneSeries(name, help string, k kind, v float64) *family {
	f := &family{name: name, help: help, kind: k, series: map[string]*series{}}
	f.with().value = v
	return f
}

// userHZ is the unit of /proc/[pid]/stat's times (USER_HZ: 100 on every
// Linux architecture Go supports).
const userHZ = 100

type stat struct {
	startTicks, vsize, rssPages uint64
}

// procStat reads the fields of /proc/self/stat that the process metrics
// need (proc(5)): starttime (22), vsize (23) and rss (24).
func procStat() (stat, bool) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return stat{}, false
	}
	// The command (field 2) is in parentheses and may contain spaces:
	// fields are counted after its closing one.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return stat{}, false
	}
	f := bytes.Fields(b[i+1:]) // f[0] is field 3
	if len(f) < 22 {
		return stat{}, false
	}
	num := func(field int) uint64 {
		n, _ := strconv.ParseUint(string(f[field-3]), 10, 64)
		return n
	}
	return stat{startTicks: num(22), vsize: num(23), rssPages: num(24)}, true
}

// bootTime reads btime, the boot time in seconds since the epoch, from
// /proc/stat.
func bootTime() (float64, bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, false
	}
	for line := range bytes.Lines(b) {
		if v, ok := bytes.CutPrefix(line, []byte("btime ")); ok {
			n, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 10, 64)
			return float64(n), err == nil
		}
	}
	return 0, false
}
