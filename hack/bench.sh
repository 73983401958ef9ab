#!/usr/bin/env bash
# Benchmarks nftep's nftables engine against `nft -f` loading the identical
# ruleset text, in fresh network namespaces, and prints the medians of
# COUNT runs with the ratios measured side by side in each run (the machine
# may be shared and noisy: only ratios from the same run are compared).
#
#   BenchmarkCold      cold start of the node-shaped table (W workloads: 2W
#                      chains of 12 rules, two W-element goto maps, 100
#                      policy chains): time and peak RSS, nftep vs nft -f
#   BenchmarkEndpoint  one endpoint added / changed / removed: nftep vs
#                      nft -f of the same delta vs the kernel floor
#   BenchmarkResync    read-back: generation unchanged, no drift, one
#                      foreign rule
#   BenchmarkModel     heap of the model; BenchmarkPlan, BenchmarkEncode: the
#                      diff and the batch encoding alone
#   Others             the benchmarks of routes (10,000 routes cold, one
#                      change, in-sync resync), endpoints (CompleteDeferredWork
#                      of 1,000 and 10,000 pending endpoints, one change) and
#                      policy (one endpoint change): medians of ns/op
#   E2E                the product end to end (cmd/nftep BenchmarkE2E): the
#                      nftep binary on a node of 110, 1,000 and 10,000
#                      workloads on real veths, per-endpoint and shared
#                      chains: cold apply vs its floor (nft -f, ip -batch,
#                      sysctl -p of what it programmed, same interfaces);
#                      one workload added / changed / removed by apply, by
#                      run (file replaced -> last commit) and by driver
#                      (frame -> last commit) vs the kernel floor; peak RSS;
#                      and (BenchmarkE2EIdle) the idle cost of run and
#                      driver at 10,000 over E2E_IDLE (default 180s).
#                      E2E_COUNT runs (default 3; 10,000 veths take minutes
#                      to create, the whole family about 25 minutes)
#   Targets            the product's targets in one table (hack/targets.awk):
#                      E2E's figures with BenchmarkParseStateFile,
#                      BenchmarkPolicyVsCalico and BenchmarkDriverChangeCPU
#                      (dataplane), each beside its floor or baseline, and
#                      BenchmarkValidation (nft): the kernel's validation of
#                      a table with a chain per endpoint, as laid out and
#                      reached from one hook only
#   Dispatch           BenchmarkDispatchThroughput (dataplane): iperf3 TCP
#                      throughput between two real pods on a node programmed
#                      with 10 and 10,000 endpoints, per-endpoint and shared
#                      chains; the ratio 10,000 / 10 should stay >= 0.95
#                      (skipped with a note when iperf3 is not installed)
#
# Needs: root (network namespaces, nf_tables), Go, nft (Debian package
# nftables), nsenter (util-linux), ip (iproute2); for Dispatch, iperf3 and
# ss (iproute2).
#
# Environment: COUNT (default 5) runs of each benchmark; BENCH, a regexp of
# benchmarks to run (default all of the above); RAW=1 also prints Go's raw
# benchmark lines; NFTEP_IPERF_SECONDS (default 5) is the length of each
# iperf3 run of Dispatch.
set -o errexit -o nounset -o pipefail

cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
	echo "bench.sh: needs root (network namespaces and nf_tables); try: sudo make bench" >&2
	exit 1
fi
for cmd in go nft nsenter ip; do
	if ! command -v "$cmd" >/dev/null; then
		echo "bench.sh: $cmd not found" >&2
		exit 1
	fi
done

COUNT=${COUNT:-5}
BENCH=${BENCH:-Cold|Endpoint|Resync|Model|Plan|Encode|Others|Dispatch|E2E|Targets}
raw=$(mktemp)
trap 'rm -f "$raw"' EXIT

echo "nftep engine benchmarks: kernel $(uname -r), $(nft --version), $(go env GOVERSION), $(nproc) CPUs; $COUNT runs each"
bin=$(mktemp -d)
trap 'rm -f "$raw"; rm -rf "$bin"' EXIT
go test -c -o "$bin/nft.test" ./nft

run() { # regexp benchtime
	if [[ "$1" =~ $BENCH ]]; then
		"$bin/nft.test" -test.run='^$' -test.bench="^Benchmark($1)\$" -test.benchmem \
			-test.count="$COUNT" -test.benchtime="$2" -test.timeout=2h | grep '^Benchmark' | tee -a "$raw" >/dev/null
	fi
}
run Cold 1x
run Endpoint 5x
run Resync 5x
run Model 3x
run Plan 20x
run Encode 3x

if [ "${RAW:-}" = 1 ]; then
	cat "$raw"
fi

# Medians: one row per benchmark, the metrics as name=median.
awk '
function median(list,   n, a, i, j, t) {
	n = split(list, a, " ")
	for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] + 0 > t + 0; j--) a[j + 1] = a[j]; a[j + 1] = t }
	return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
{
	name = $1; sub(/-[0-9]+$/, "", name)
	if (!(name in seen)) { seen[name] = 1; order[++names] = name }
	for (i = 3; i + 1 <= NF; i += 2) {
		key = name SUBSEP $(i + 1)
		if (!(key in vals)) units[name] = units[name] " " $(i + 1)
		vals[key] = vals[key] " " $i
		runs[key]++
	}
}
function m(name, unit) { return median(vals[name SUBSEP unit]) }
function fmt(v) { return (v >= 100) ? sprintf("%.0f", v) : (v >= 10) ? sprintf("%.1f", v) : sprintf("%.3g", v) }
END {
	print ""
	print "== cold start: nftep (model build + Apply in a child process) vs nft -f of the same text"
	printf "%-16s %10s %10s %8s %8s %10s %10s %8s\n", "workloads", "nftep s", "nft -f s", "ratio", "(proc)", "nftep MB", "nft MB", "ratio"
	for (k = 1; k <= names; k++) { n = order[k]; if (n !~ /^BenchmarkCold\//) continue
		w = n; sub(/.*workloads=/, "", w)
		printf "%-16s %10s %10s %8s %8s %10s %10s %8s\n", w, fmt(m(n, "nftep-apply-s")), fmt(m(n, "nft-s")), fmt(m(n, "apply/nft")), fmt(m(n, "proc/nft")), fmt(m(n, "nftep-rss-MB")), fmt(m(n, "nft-rss-MB")), fmt(m(n, "rss/nft"))
	}
	print "   (targets at 10,000: time ratio <= 0.75, peak RSS ratio <= 0.25; proc = the whole child process, model build included)"
	print ""
	print "== one endpoint: nftep Apply vs nft -f of the same delta vs the kernel floor (a one-rule batch), ms"
	printf "%-26s %10s %10s %10s %8s %9s\n", "", "nftep", "nft -f", "floor", "ratio", "messages"
	for (k = 1; k <= names; k++) { n = order[k]; if (n !~ /^BenchmarkEndpoint\//) continue
		w = n; sub(/^BenchmarkEndpoint\//, "", w)
		printf "%-26s %10s %10s %10s %8s %9s\n", w, fmt(m(n, "nftep-ms")), fmt(m(n, "nft-ms")), fmt(m(n, "floor-ms")), fmt(m(n, "nftep/nft")), m(n, "messages")
	}
	print "   (target: ratio <= 1.0; messages must not grow with the table)"
	print ""
	print "== resync, ms (and allocations)"
	for (k = 1; k <= names; k++) { n = order[k]; if (n !~ /^BenchmarkResync\//) continue
		w = n; sub(/^BenchmarkResync\//, "", w)
		printf "%-40s %10s ms %12s B/op %10s allocs/op\n", w, fmt(m(n, "ns/op") / 1e6), m(n, "B/op"), m(n, "allocs/op")
	}
	print "   (target at 10,000 without drift: <= 1000 ms)"
	print ""
	print "== model, planning and encoding (no kernel)"
	for (k = 1; k <= names; k++) { n = order[k]; if (n !~ /^Benchmark(Model|Plan|Encode)\//) continue
		w = n; sub(/^Benchmark/, "", w)
		extra = (n ~ /Model/) ? sprintf("heap %s MB", fmt(m(n, "model-heap-MB"))) : ""
		printf "%-40s %10s ms %12s B/op %10s allocs/op  %s\n", w, fmt(m(n, "ns/op") / 1e6), m(n, "B/op"), m(n, "allocs/op"), extra
	}
}' "$raw"

# The managers' and the route table's own benchmarks, medians per benchmark.
if [[ "Others" =~ $BENCH ]]; then
	echo
	echo "== routes, endpoint manager, policy manager (medians of $COUNT runs)"
	go test -run='^$' -bench=. -benchmem -count="$COUNT" ./routes ./endpoints ./policy 2>&1 |
		grep '^Benchmark' |
		awk '
		function median(list,   n, a, i, j, t) {
			n = split(list, a, " ")
			for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] + 0 > t + 0; j--) a[j + 1] = a[j]; a[j + 1] = t }
			return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
		}
		{
			name = $1; sub(/-[0-9]+$/, "", name)
			if (!(name in ns)) order[++names] = name
			ns[name] = ns[name] " " $3
			for (i = 5; i + 1 <= NF; i += 2) if ($(i + 1) == "B/op") by[name] = by[name] " " $i; else if ($(i + 1) == "allocs/op") al[name] = al[name] " " $i
		}
		END {
			for (k = 1; k <= names; k++) { n = order[k]
				printf "%-58s %12.3f ms %12s B/op %10s allocs/op\n", n, median(ns[n]) / 1e6, median(by[n]), median(al[n])
			}
			print "   (endpoints: 10,000 pending should cost about 10x 1,000 (linear); one change must not grow with the table)"
		}'
fi

# Dispatch stays flat: a pod's throughput must not depend on how many
# endpoints the node holds. One iperf3 run per benchmark iteration
# (-benchtime=1x). The test binary runs COUNT times with -test.count=1
# rather than once with -test.count=COUNT (which repeats each sub-benchmark
# back to back), so the four configurations alternate and a slow spell of
# the machine hits them alike.
if [[ "Dispatch" =~ $BENCH ]]; then
	echo
	if ! command -v iperf3 >/dev/null || ! command -v ss >/dev/null; then
		echo "== dispatch throughput: skipped, iperf3 or ss not found (Debian: apt-get install iperf3 iproute2)"
	else
		echo "== dispatch throughput: iperf3 TCP pod to pod, $(iperf3 --version | head -n 1), ${NFTEP_IPERF_SECONDS:-5} s per run (medians of $COUNT runs)"
		go test -c -o "$bin/dataplane.test" ./dataplane
		for _ in $(seq "$COUNT"); do
			"$bin/dataplane.test" -test.run='^$' -test.bench='^BenchmarkDispatchThroughput$' \
				-test.benchtime=1x -test.timeout=1h | grep '^Benchmark'
		done >"$bin/dispatch.raw"
		if [ "${RAW:-}" = 1 ]; then
			cat "$bin/dispatch.raw"
		fi
		awk '
		function median(list,   n, a, i, j, t) {
			n = split(list, a, " ")
			for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] + 0 > t + 0; j--) a[j + 1] = a[j]; a[j + 1] = t }
			return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
		}
		{
			name = $1; sub(/-[0-9]+$/, "", name); sub(/^BenchmarkDispatchThroughput\//, "", name)
			split(name, part, "/"); mode = part[1]; eps = part[2]; sub(/^endpoints=/, "", eps)
			if (!((mode, eps) in gb)) { if (!(mode in seen)) { seen[mode] = 1; modes[++nm] = mode }; if (!(eps in seeneps)) { seeneps[eps] = 1; sizes[++ns] = eps } }
			for (i = 3; i + 1 <= NF; i++) if ($(i + 1) == "Gbit/s") {
				gb[mode, eps] = gb[mode, eps] " " $i
				run[mode, eps, ++runs[mode, eps]] = $i
			}
		}
		END {
			printf "%-14s %10s %12s %12s %12s\n", "mode", "endpoints", "Gbit/s", "ratio to 10", "(paired)"
			for (k = 1; k <= nm; k++) {
				base = median(gb[modes[k], "10"])
				for (e = 1; e <= ns; e++) {
					if (!((modes[k], sizes[e]) in gb)) continue
					v = median(gb[modes[k], sizes[e]])
					# The paired ratio: the median of each run'"'"'s own
					# ratio (the two sizes measured a few seconds apart).
					paired = ""
					for (r = 1; r <= runs[modes[k], sizes[e]] && r <= runs[modes[k], "10"]; r++)
						if (run[modes[k], "10", r] > 0) paired = paired " " run[modes[k], sizes[e], r] / run[modes[k], "10", r]
					printf "%-14s %10s %12.2f %12s %12s\n", modes[k], sizes[e], v, (base > 0) ? sprintf("%.3f", v / base) : "-", (paired != "") ? sprintf("%.3f", median(paired)) : "-"
				}
			}
			print "   (target: ratio >= 0.95 at 10000 in both modes; paired = median of the per-run ratios)"
		}' "$bin/dispatch.raw"
	fi
fi

# The product end to end: the binary, real veths, medians of E2E_COUNT runs.
if [[ "E2E" =~ $BENCH ]]; then
	E2E_COUNT=${E2E_COUNT:-3}
	echo
	echo "== end to end: the nftep binary on real veths (medians of $E2E_COUNT runs; idle: one run of ${E2E_IDLE:-180s})"
	go test -c -o "$bin/nftep.test" ./cmd/nftep
	(cd cmd/nftep && "$bin/nftep.test" -test.run='^$' -test.bench='^BenchmarkE2E$' -test.benchtime=1x \
		-test.count="$E2E_COUNT" -test.timeout=3h | grep '^Benchmark') >"$bin/e2e.raw"
	(cd cmd/nftep && NFTEP_E2E_IDLE=${E2E_IDLE:-180s} "$bin/nftep.test" -test.run='^$' -test.bench='^BenchmarkE2EIdle$' \
		-test.benchtime=1x -test.count=1 -test.timeout=1h | grep '^Benchmark') >>"$bin/e2e.raw"
	if [ "${RAW:-}" = 1 ]; then
		cat "$bin/e2e.raw"
	fi
	./hack/e2etable.awk "$bin/e2e.raw"
fi

# The product's targets in one table (docs/performance.md, "Targets"):
# the end-to-end figures above with the state file's decoding, the policy
# dimension against Calico's benchmark, the driver's CPU per change
# behind a recorded Felix stream, each beside its floor or baseline, and
# the kernel's validation of a table with a chain per endpoint
# (BenchmarkValidation).
if [[ "Targets" =~ $BENCH ]]; then
	echo
	echo "== targets (medians; each beside its floor or baseline from the same run)"
	go test -c -o "$bin/dataplane.test" ./dataplane
	(cd dataplane &&
		"$bin/dataplane.test" -test.run='^$' -test.bench='^BenchmarkParseStateFile$' -test.count="$COUNT" -test.benchtime=5x &&
		"$bin/dataplane.test" -test.run='^$' -test.bench='^BenchmarkPolicyVsCalico$' -test.count=3 -test.benchtime=5x -test.timeout=1h &&
		"$bin/dataplane.test" -test.run='^$' -test.bench='^BenchmarkDriverChangeCPU$' -test.count=3 -test.benchtime=10x -test.timeout=2h &&
		"$bin/nft.test" -test.run='^$' -test.bench='^BenchmarkValidation$' -test.count=3 -test.benchtime=15x -test.timeout=1h) |
		grep '^Benchmark' >"$bin/targets.raw"
	if [ -f "$bin/e2e.raw" ]; then
		cat "$bin/e2e.raw" >>"$bin/targets.raw"
	fi
	if [ "${RAW:-}" = 1 ]; then
		cat "$bin/targets.raw"
	fi
	./hack/targets.awk "$bin/targets.raw"
fi
