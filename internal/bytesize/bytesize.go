// Package bytesize parses and formats memory sizes written as strings
// ("64MiB", "512KB"), the form model.yaml, cost.json and the worker's
// flags use.
package bytesize

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Units are the suffixes Parse accepts, matched exactly (case matters:
// "mb" and "Mib" are refused, so a typo never changes a size by 5%).
var units = []struct {
	suffix string
	bytes  int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9},
}

// Max is the largest size Parse accepts (1 TiB): more is a typo on any host
// Sluice runs on.
const Max int64 = 1 << 40

// Parse reads a whole number followed by one of KiB, MiB, GiB (powers of
// 1024) or KB, MB, GB (powers of 1000), with no space: "64MiB", "512KB".
// "0MiB" is 0. Negative, fractional, unitless and larger than Max sizes are
// errors.
func Parse(s string) (int64, error) {
	for _, u := range units {
		num, ok := strings.CutSuffix(s, u.suffix)
		if !ok {
			continue
		}
		if num == "" || strings.TrimLeft(num, "0123456789") != "" {
			break
		}
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil || n > math.MaxInt64/u.bytes || n*u.bytes > Max {
			return 0, fmt.Errorf("size %q is larger than the limit of 1TiB", s)
		}
		return n * u.bytes, nil
	}
	return 0, fmt.Errorf("size %q is not a size: use a whole number and one of KiB, MiB, GiB, KB, MB, GB, like \"64MiB\"", s)
}

// Format writes n in the largest unit that divides it exactly, binary
// first ("64MiB", then "5MB"), else in bytes ("1500B", which Parse does not
// read: no parsed size needs it). Parse(Format(n)) == n for every n Parse
// returns.
func Format(n int64) string {
	if n != 0 {
		for _, u := range []int{2, 1, 0, 5, 4, 3} { // GiB, MiB, KiB, GB, MB, KB
			if n%units[u].bytes == 0 {
				return strconv.FormatInt(n/units[u].bytes, 10) + units[u].suffix
			}
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}
