#!/usr/bin/env bash
# Check the shape of a `sluice lab` report (make lab-quick): the three
# experiments' sections, each with charts and findings, the CSV and JSON
# files beside it with numbers in them, and nothing that would make the
# page ask anything of the network. Not the numbers themselves.
#
#   scripts/check-lab-report.sh DIR/report.html
set -euo pipefail
report=${1:?usage: check-lab-report.sh REPORT.html}
dir=$(dirname "$report")
stem=$(basename "$report" .html)
fail() { echo "check-lab-report: $report: $*" >&2; exit 1; }
[ -s "$report" ] || fail "missing or empty"
for s in batching overload many machine; do
	grep -q "<section id=\"$s\"" "$report" || fail "no $s section"
done
n=$(grep -o '<svg ' "$report" | wc -l)
[ "$n" -ge 8 ] || fail "$n charts, want 8 (2 batching, 2 overload, 4 many models)"
f=$(grep -o 'class="findings"' "$report" | wc -l)
[ "$f" -eq 3 ] || fail "$f paragraphs of findings, want 3"
if grep -q -e '<script' -e 'NaN' "$report"; then fail "holds a script or a NaN"; fi
if grep -o -E '(https?:)?//[^"'"'"' <)]+' "$report" | grep -v -x 'http://www.w3.org/2000/svg' | grep -q .; then
	fail "refers to something outside the page: $(grep -o -E '(https?:)?//[^"'"'"' <)]+' "$report" | grep -v -x 'http://www.w3.org/2000/svg' | head -3 | tr '\n' ' ')"
fi
for k in batching overload many; do
	csv="$dir/$stem-$k.csv"
	[ -f "$csv" ] || fail "no $csv"
	[ "$(wc -l <"$csv")" -ge 2 ] || fail "$csv has no numbers"
done
json="$dir/$stem.json"
[ -s "$json" ] || fail "no $json"
head -c 1 "$json" | grep -q '{' || fail "$json is not a JSON object"
echo "check-lab-report: $report: 3 sections, $n charts, findings, CSV and JSON: ok"
