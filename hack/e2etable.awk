#!/usr/bin/awk -f
# Prints the end-to-end table from BenchmarkE2E and BenchmarkE2EIdle lines
# (cmd/nftep/e2e_bench_test.go): the median of each metric over the runs.
# Used by hack/bench.sh; also by hand: ./hack/e2etable.awk raw.txt
function median(list,   n, a, i, j, t) {
	n = split(list, a, " ")
	for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] + 0 > t + 0; j--) a[j + 1] = a[j]; a[j + 1] = t }
	return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
function f(v) { return (v == "") ? "-" : (v >= 100) ? sprintf("%.0f", v) : (v >= 10) ? sprintf("%.1f", v) : sprintf("%.2f", v) }
function m(k, unit) { return ((k SUBSEP unit) in vals) ? median(vals[k SUBSEP unit]) : "" }
/^BenchmarkE2E/ {
	name = $1; sub(/-[0-9]+$/, "", name)
	if (!(name in seen)) { seen[name] = 1; order[++names] = name }
	for (i = 3; i + 1 <= NF; i += 2) vals[name SUBSEP $(i + 1)] = vals[name SUBSEP $(i + 1)] " " $i
}
END {
	printf "%-9s %-6s | %8s %8s %8s %8s %8s %6s | %9s %9s %6s\n", "workloads", "chains", "apply s", "floor s", "nft -f", "ip", "sysctl", "ratio", "apply MB", "nft MB", "ratio"
	for (k = 1; k <= names; k++) { n = order[k]; if (n !~ /^BenchmarkE2E\//) continue
		split(n, p, "/"); w = p[2]; sub(/workloads=/, "", w); c = (p[3] ~ /true/) ? "shared" : "per-ep"
		printf "%-9s %-6s | %8s %8s %8s %8s %8s %6s | %9s %9s %6s\n", w, c, f(m(n, "cold-s")), f(m(n, "floor-s")), f(m(n, "floor-nft-s")), f(m(n, "floor-ip-s")), f(m(n, "floor-sysctl-s")), f(m(n, "cold/floor")), f(m(n, "cold-rss-MB")), f(m(n, "nft-rss-MB")), f(m(n, "rss/nft"))
	}
	print "   (cold apply: parse, render, nft, arp, routes, sysctls, records; the floor, in the same run: nft -f of the ruleset nftep made,"
	print "    ip -batch of its routes and neighbours, sysctl -p of its interface settings, in a namespace with the same interfaces;"
	print "    ratio = median of the runs' apply/floor; RSS ratio against nft -f)"
	print ""
	printf "%-9s %-6s | %-20s | %-20s | %-20s | %-20s | %6s\n", "", "", "apply ms", "run ms", "driver ms", "floor of the delta ms", "1-rule"
	printf "%-9s %-6s | %6s %6s %6s | %6s %6s %6s | %6s %6s %6s | %6s %6s %6s | %6s\n", "workloads", "chains", "add", "change", "remove", "add", "change", "remove", "add", "change", "remove", "add", "change", "remove", "ms"
	for (k = 1; k <= names; k++) { n = order[k]; if (n !~ /^BenchmarkE2E\//) continue
		split(n, p, "/"); w = p[2]; sub(/workloads=/, "", w); c = (p[3] ~ /true/) ? "shared" : "per-ep"
		printf "%-9s %-6s | %6s %6s %6s | %6s %6s %6s | %6s %6s %6s | %6s %6s %6s | %6s\n", w, c,
			f(m(n, "apply-add-ms")), f(m(n, "apply-change-ms")), f(m(n, "apply-remove-ms")),
			f(m(n, "run-add-ms")), f(m(n, "run-change-ms")), f(m(n, "run-remove-ms")),
			f(m(n, "driver-add-ms")), f(m(n, "driver-change-ms")), f(m(n, "driver-remove-ms")),
			f(m(n, "floor-add-ms")), f(m(n, "floor-change-ms")), f(m(n, "floor-remove-ms")), f(m(n, "floor-ms"))
	}
	print "   (one workload; apply: the whole process; run: state file replaced -> last commit; driver: frame written -> last commit;"
	print "    floor of the delta: nft -f of the step's ruleset delta plus ip -batch of its route and neighbour, in the twin namespace;"
	print "    1-rule: the kernel's commit of a one-rule batch in the same table, the lower bound of any change to it)"
	print ""
	printf "%-9s %-6s | %9s %9s %9s   (peak RSS, MB)\n", "workloads", "chains", "apply", "run", "driver"
	for (k = 1; k <= names; k++) { n = order[k]; if (n !~ /^BenchmarkE2E\//) continue
		split(n, p, "/"); w = p[2]; sub(/workloads=/, "", w); c = (p[3] ~ /true/) ? "shared" : "per-ep"
		printf "%-9s %-6s | %9s %9s %9s\n", w, c, f(m(n, "apply-rss-MB")), f(m(n, "run-rss-MB")), f(m(n, "driver-rss-MB"))
	}
	for (k = 1; k <= names; k++) { n = order[k]; if (n !~ /^BenchmarkE2EIdle\//) continue
		w = n; sub(/.*workloads=/, "", w)
		print ""
		printf "idle at %s workloads, per minute: run %s CPU s, %s wakeups, %s preemptions; driver %s CPU s, %s wakeups, %s preemptions\n", w,
			f(m(n, "run-cpu-s/min")), f(m(n, "run-wakeups/min")), f(m(n, "run-preemptions/min")),
			f(m(n, "driver-cpu-s/min")), f(m(n, "driver-wakeups/min")), f(m(n, "driver-preemptions/min"))
		printf "settled after the start in: run %s s, driver %s s\n", f(m(n, "run-settle-s")), f(m(n, "driver-settle-s"))
		printf "resident at rest (peak since the start), MB: run %s (%s), driver %s (%s)\n",
			f(m(n, "run-rest-rss-MB")), f(m(n, "run-peak-rss-MB")), f(m(n, "driver-rest-rss-MB")), f(m(n, "driver-peak-rss-MB"))
	}
}
