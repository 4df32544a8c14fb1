package worker

import "testing"

func TestBudgetFrom(t *testing.T) {
	const meminfo = "MemTotal:       16307060 kB\nMemFree:         1234 kB\n"
	tests := []struct {
		name       string
		cgroup, mi string
		n          int
		want       int64
		source     string
	}{
		{name: "cgroup limit", cgroup: "4294967296\n", mi: meminfo, n: 1, want: 4 << 30, source: "cgroup memory.max"},
		{name: "cgroup limit shared", cgroup: "4294967296\n", mi: meminfo, n: 4, want: 1 << 30, source: "cgroup memory.max / 4 workers"},
		{name: "no cgroup limit", cgroup: "max\n", mi: meminfo, n: 0, want: 16307060 << 10, source: "host MemTotal"},
		{name: "no cgroup file", mi: meminfo, n: 2, want: (16307060 << 10) / 2, source: "host MemTotal / 2 workers"},
		{name: "nothing readable", cgroup: "", mi: "", n: 2},
		{name: "odd meminfo", mi: "MemTotal: lots\n", n: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, src := budgetFrom(tt.cgroup, tt.mi, tt.n)
			if got != tt.want || src != tt.source {
				t.Fatalf("budgetFrom = %d, %q; want %d, %q", got, src, tt.want, tt.source)
			}
		})
	}
}
