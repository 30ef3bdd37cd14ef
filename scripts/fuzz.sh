#!/usr/bin/env bash
# fuzz.sh: run every Go fuzz target of the module, one after the other.
#
#   FUZZTIME=10s scripts/fuzz.sh      each target for FUZZTIME (default 10s; make test
#                                     runs 5s, make fuzz 2m)
#
# Targets are found, not listed: every package whose _test.go files declare a
# `func FuzzXxx` is asked for its targets with `go test -list`, and each runs
# as `go test -run '^$' -fuzz '^FuzzXxx$' -fuzztime $FUZZTIME PKG`. A target
# that fails (a crasher, or a seed that no longer passes) does not stop the
# others; the script ends with the list of failures, the path of each
# crasher go test wrote (PKG/testdata/fuzz/FuzzXxx/HASH: commit it to keep the
# case as a regression seed) and exit status 1.
#
#   FUZZ=regexp       run only the targets whose name matches (grep -E)
#   FUZZPKGS=...      package patterns to search (default ./...; test/ is never
#                     searched: its TestMain starts MariaDB)
#   FUZZPARALLEL=N    fuzzing workers per target (default: go test's, GOMAXPROCS)
#   FUZZMINIMIZETIME  time spent minimizing each new input (default 10s; go test's
#                     60s is most of a run for the slow session targets)
#   GO=go             the go command
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
FUZZTIME=${FUZZTIME:-10s}
FUZZ=${FUZZ:-}
FUZZMINIMIZETIME=${FUZZMINIMIZETIME:-10s}
read -r -a pkgs <<<"${FUZZPKGS:-./...}"
parallel=()
if [[ -n ${FUZZPARALLEL:-} ]]; then
	parallel=(-parallel "$FUZZPARALLEL")
fi

# Packages with a fuzz target: the grep keeps go test -list (which builds
# and runs each test binary) to those few, listed by one go test, which
# prints each package's names before its "ok" line. A package that does
# not build fails the script here.
declare -A dirs
fuzzpkgs=()
while read -r pkg dir; do
	[[ -n $pkg ]] || continue
	case $dir in "$PWD"/test | "$PWD"/test/*) continue ;; esac
	if grep -qE '^func Fuzz[A-Z0-9_]' "$dir"/*_test.go 2>/dev/null; then
		fuzzpkgs+=("$pkg")
		dirs[$pkg]=$dir
	fi
done <<<"$("$GO" list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}} {{.Dir}}{{end}}' "${pkgs[@]}")"

targets=()
if [[ ${#fuzzpkgs[@]} -gt 0 ]]; then
	listing=$("$GO" test -list '^Fuzz' "${fuzzpkgs[@]}")
	names=()
	while read -r word pkg _; do
		case $word in
		Fuzz*) names+=("$word") ;;
		ok)
			for name in "${names[@]}"; do
				if [[ -z $FUZZ ]] || grep -qE -- "$FUZZ" <<<"$name"; then
					targets+=("$pkg ${dirs[$pkg]} $name")
				fi
			done
			names=()
			;;
		esac
	done <<<"$listing"
fi

if [[ ${#targets[@]} -eq 0 ]]; then
	echo "fuzz.sh: no fuzz target found${FUZZ:+ matching $FUZZ}" >&2
	exit 1
fi

echo "fuzz.sh: ${#targets[@]} targets, $FUZZTIME each"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
failed=()
start=$SECONDS
for t in "${targets[@]}"; do
	read -r pkg dir name <<<"$t"
	echo "=== $name ($pkg)"
	if "$GO" test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" -fuzzminimizetime "$FUZZMINIMIZETIME" "${parallel[@]}" "$pkg" 2>&1 | tee "$log"; then
		continue
	fi
	# Go's fuzzing engine, on a machine too busy to run its workers, can
	# end a run with a bare "context deadline exceeded" at -fuzztime: no
	# failing input, nothing of the target's. Run such a target once more.
	if grep -q '^    context deadline exceeded$' "$log" && ! grep -q 'Failing input written' "$log"; then
		echo "fuzz.sh: $name: the fuzzing engine timed out without an input (a busy machine); once more"
		if "$GO" test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" -fuzzminimizetime "$FUZZMINIMIZETIME" "${parallel[@]}" "$pkg" 2>&1 | tee "$log"; then
			continue
		fi
	fi
	# go test prints "Failing input written to testdata/fuzz/FuzzXxx/HASH",
	# relative to the package directory.
	crasher=$(sed -n 's/.*Failing input written to \(testdata\/fuzz\/[^ ]*\).*/\1/p' "$log" | head -1)
	rel=./${dir#"$PWD"/}
	if [[ -n $crasher ]]; then
		failed+=("$name: crasher $rel/$crasher (re-run: $GO test -run '^$name\$/^${crasher##*/}\$' $rel)")
	else
		failed+=("$name ($rel): failed, see its output above")
	fi
done

echo "fuzz.sh: ${#targets[@]} targets in $((SECONDS - start))s"
if [[ ${#failed[@]} -gt 0 ]]; then
	echo "fuzz.sh: FAILED:"
	printf '  %s\n' "${failed[@]}"
	exit 1
fi
echo "fuzz.sh: ok"
