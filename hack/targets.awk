#!/usr/bin/awk -f
# Prints the performance targets of the product (docs/performance.md,
# "Targets") as one table: each figure the median of its runs, beside its
# floor or baseline from the same run, and whether it is met. Reads Go
# benchmark lines of BenchmarkE2E, BenchmarkE2EIdle (cmd/nftep),
# BenchmarkParseStateFile, BenchmarkPolicyVsCalico,
# BenchmarkDriverChangeCPU (dataplane) and BenchmarkValidation (nft). Used
# by hack/bench.sh; by hand:
# ./hack/targets.awk raw.txt
function median(list,   n, a, i, j, t) {
	n = split(list, a, " ")
	if (n == 0) return ""
	for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] + 0 > t + 0; j--) a[j + 1] = a[j]; a[j + 1] = t }
	return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
function f(v) { return (v == "") ? "-" : (v >= 100) ? sprintf("%.0f", v) : (v >= 10) ? sprintf("%.1f", v) : sprintf("%.3g", v) }
function m(k, unit) { return ((k SUBSEP unit) in vals) ? median(vals[k SUBSEP unit]) : "" }
function verdict(v, limit, above) {
	if (v == "" || limit == "") return "not measured"
	if (above) return (v + 0 >= limit + 0) ? "met" : "missed"
	return (v + 0 <= limit + 0) ? "met" : "missed"
}
function row(what, value, base, target, state) {
	printf "%-80s %12s %12s %12s  %s\n", what, value, base, target, state
}
/^Benchmark/ {
	name = $1; sub(/-[0-9]+$/, "", name)
	if (!(name in seen)) { seen[name] = 1; order[++names] = name }
	for (i = 3; i + 1 <= NF; i += 2) vals[name SUBSEP $(i + 1)] = vals[name SUBSEP $(i + 1)] " " $i
}
END {
	printf "%-80s %12s %12s %12s  %s\n", "target", "measured", "floor/base", "target", ""
	for (k = 1; k <= names; k++) { n = order[k]; if (n !~ /^BenchmarkE2E\/workloads=/) continue
		split(n, p, "/"); w = p[2]; sub(/workloads=/, "", w); c = (p[3] ~ /true/) ? "shared" : "per-endpoint"
		lim = (c == "shared") ? 1.0 : 0.75
		r = m(n, "cold/floor")
		row(sprintf("cold apply, %s, %s: s (floor)", w, c), f(m(n, "cold-s")), f(m(n, "floor-s")), "", "")
		row(sprintf("  cold apply / floor"), f(r), "", "<= " lim, verdict(r, lim))
		r = m(n, "rss/nft")
		row(sprintf("  peak RSS / nft -f's (MB: nftep, nft -f)"), f(r), f(m(n, "cold-rss-MB")) "/" f(m(n, "nft-rss-MB")), "<= 0.5", verdict(r, 0.5))
	}
	for (k = 1; k <= names; k++) { n = order[k]; if (n !~ /^BenchmarkE2E\/workloads=/) continue
		split(n, p, "/"); w = p[2]; sub(/workloads=/, "", w); c = (p[3] ~ /true/) ? "shared" : "per-endpoint"
		fl = m(n, "floor-ms")
		for (s = 1; s <= 3; s++) {
			st = (s == 1) ? "add" : (s == 2) ? "change" : "remove"
			v = m(n, "apply-" st "-ms")
			inc = m(n, "apply-" st "-incremental")
			row(sprintf("one endpoint %s, %s, %s: apply ms%s", st, w, c, (inc == 1) ? " (incr.)" : ""), f(v), "", (w == 10000) ? "<= 250" : "", (w == 10000) ? verdict(v, 250) : "")
			v = m(n, "run-" st "-ms")
			row(sprintf("  run: file replaced -> commit, ms (one-rule commit)"), f(v), f(fl), (w == 10000) ? "<= 50" : "", (w == 10000) ? verdict(v, 50) : "")
			v = m(n, "driver-" st "-ms")
			sf = m(n, "floor-" st "-ms")
			lim = (sf == "") ? "" : sf + 2
			row(sprintf("  driver: frame -> commit, ms (floor: the delta by nft, ip)"), f(v), f(sf), (lim == "") ? "" : "<= " f(lim), (w == 10000) ? verdict(v, lim) : "")
			row(sprintf("    the same beside a one-rule commit (kernel bound)"), f(v), f(fl), "", "")
		}
	}
	for (k = 1; k <= names; k++) { n = order[k]; if (n !~ /^BenchmarkParseStateFile\/workloads=10000\/(json|yaml)$/) continue
		fmt = n; sub(/.*\//, "", fmt)
		v = m(n, "MB/s")
		row("state file decode, 10,000 workloads, " fmt ": MB/s", f(v), "", (fmt == "json") ? ">= 100" : "measured", (fmt == "json") ? verdict(v, 100, 1) : "")
	}
	for (k = 1; k <= names; k++) { n = order[k]; if (n !~ /^BenchmarkE2EIdle\//) continue
		w = n; sub(/.*workloads=/, "", w)
		for (d = 1; d <= 2; d++) {
			mode = (d == 1) ? "run" : "driver"
			v = m(n, mode "-wakeups/min")
			row(sprintf("idle %s at %s workloads: wakeups/min", mode, w), f(v), "", "<= 60", verdict(v, 60))
			row(sprintf("  preemptions/min (not wakeups)"), f(m(n, mode "-preemptions/min")), "", "", "")
			row(sprintf("  resident at rest, MB (peak since the start: %s)", f(m(n, mode "-peak-rss-MB"))), f(m(n, mode "-rest-rss-MB")), "", "measured", "")
		}
	}
	for (k = 1; k <= names; k++) { n = order[k]; if (n !~ /^BenchmarkPolicyVsCalico\/policies=[0-9]+\/(resync=no-drift|change=member-add|change=rule)$/) continue
		split(n, p, "/"); pol = p[2]; sub(/policies=/, "", pol); cs = p[3]
		unit = (cs ~ /no-drift/) ? "resync/calico" : (cs ~ /member/) ? "member-add/calico" : "rule-change/calico"
		lim = (cs ~ /rule/) ? 0.5 : 0.1
		v = m(n, unit)
		row(sprintf("policy vs Calico, %s policies, %s: ratio", pol, cs), f(v), "1 (Calico)", "<= " lim, verdict(v, lim))
	}
	for (k = 1; k <= names; k++) { n = order[k]; if (n !~ /^BenchmarkValidation\/workloads=/) continue
		split(n, p, "/"); w = p[2]; sub(/workloads=/, "", w); h = p[3]; sub(/hooks=/, "", h)
		row(sprintf("kernel validation, %s, per-endpoint, %s: ms", w, (h == 2) ? "nftep's layout" : "one hook each"),
			f(m(n, "validate-ms")), f(m(n, "unvalidated-ms")), "", (h == 2) ? "(base: commit without it)" : "(the least any layout does)")
	}
	for (k = 1; k <= names; k++) { n = order[k]; if (n !~ /^BenchmarkDriverChangeCPU\/endpoints=/) continue
		split(n, p, "/"); e = p[2]; sub(/endpoints=/, "", e); ch = p[3]; sub(/chains=/, "", ch)
		row(sprintf("behind Felix, %s, %s, %s: CPU ms (user+sys; net of idle)", e, ch, p[4]), f(m(n, "cpu-ms/change")), f(m(n, "user-ms/change")) "+" f(m(n, "sys-ms/change")) " (" f(m(n, "user-net-ms/change")) "+" f(m(n, "sys-net-ms/change")) ")", "user const.", "")
	}
}
