#!/usr/bin/env bash
# Runs every fuzz target of the module, one at a time, for FUZZTIME each
# (default 60s), and prints a line per target: its package, name, time,
# executions and result. `make fuzz FUZZTIME=10m` is the long run; make test
# runs a short pass (FUZZTIME=3s). Targets are found by name (func FuzzX in a
# _test.go file), so a new one is run without being listed here.
#
# Minimisation of each new input is cut to one execution: several targets
# (dataplane's) run the managers for every input, and minimising would
# spend the time budget there instead of searching.
set -o errexit -o nounset -o pipefail
cd "$(dirname "$0")/.."

fuzztime=${FUZZTIME:-60s}
parallel=${FUZZPARALLEL:-1}
status=0
summary=()
while IFS=: read -r file name; do
	pkg=./$(dirname "$file")
	log=$(mktemp)
	if go test "$pkg" -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" -fuzzminimizetime 1x -parallel "$parallel" </dev/null >"$log" 2>&1; then
		result=ok
	else
		result=FAILED
		status=1
		cat "$log"
	fi
	execs=$(grep -oE "execs: [0-9]+" "$log" | tail -1 | cut -d" " -f2 || true)
	summary+=("$(printf '%-12s %-28s %-6s %12s execs  %s' "$pkg" "$name" "$fuzztime" "${execs:--}" "$result")")
	rm -f "$log"
done < <(grep -rlE --include='*_test.go' '^func Fuzz' . | sort | while read -r f; do
	grep -oE '^func Fuzz[A-Za-z0-9_]+' "$f" | sed "s|^func |${f#./}:|"
done)

echo "fuzz targets:"
printf '  %s\n' "${summary[@]}"
exit "$status"
