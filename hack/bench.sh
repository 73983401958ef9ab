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
#
# Needs: root (network namespaces, nf_tables), Go, nft (Debian package
# nftables), nsenter (util-linux), ip (iproute2).
#
# Environment: COUNT (default 5) runs of each benchmark; BENCH, a regexp of
# benchmarks to run (default all of the above); RAW=1 also prints Go's raw
# benchmark lines.
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
BENCH=${BENCH:-Cold|Endpoint|Resync|Model|Plan|Encode|Others}
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
