package placement

import (
	"testing"
	"time"
)

func TestColdWait(t *testing.T) {
	for _, tt := range []struct {
		name        string
		left        time.Duration
		hasDeadline bool
		load        time.Duration
		src         LoadSource
		want        bool
	}{
		{"no deadline waits", 0, false, time.Hour, LoadMeasured, true},
		{"deadline covers load and margin", 1300 * time.Millisecond, true, time.Second, LoadMeasured, true},
		{"deadline covers the load but not the margin", 1100 * time.Millisecond, true, time.Second, LoadMeasured, false},
		{"short deadline refused", 100 * time.Millisecond, true, time.Second, LoadDeclared, false},
		{"tiny load: the 20ms floor", 25 * time.Millisecond, true, time.Millisecond, LoadEstimated, true},
		{"tiny load under the floor", 15 * time.Millisecond, true, time.Millisecond, LoadMeasured, false},
		{"passed deadline", -time.Second, true, 0, LoadMeasured, false},
		{"unknown load time: waits what the deadline allows", 300 * time.Millisecond, true, 0, LoadUnknown, true},
		{"unknown load time, no time left", 10 * time.Millisecond, true, 0, LoadUnknown, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := ColdWait(tt.left, tt.hasDeadline, tt.load, tt.src); got != tt.want {
				t.Fatalf("ColdWait(%v, %v, %v, %s) = %v, want %v", tt.left, tt.hasDeadline, tt.load, tt.src, got, tt.want)
			}
		})
	}
}

func TestLoadEstimate(t *testing.T) {
	var fast LoadRate // 10 MB in 100 ms over two loads: 100 MB/s
	fast.Add(4_000_000, 40*time.Millisecond)
	fast.Add(6_000_000, 60*time.Millisecond)
	fast.Add(0, time.Second) // unknown size: no information
	fast.Add(1_000_000, 0)   // took nothing: no information
	if fast.Loads != 2 || fast.BytesPerSecond() != 100e6 {
		t.Fatalf("LoadRate = %+v (%g B/s), want 2 loads at 100 MB/s", fast, fast.BytesPerSecond())
	}
	for _, tt := range []struct {
		name     string
		measured time.Duration
		hint     time.Duration
		bytes    int64
		rate     LoadRate
		want     time.Duration
		src      LoadSource
	}{
		{"its own last load first", 7 * time.Millisecond, time.Second, 1 << 30, fast, 7 * time.Millisecond, LoadMeasured},
		{"then the declared load time", 0, 300 * time.Millisecond, 1 << 30, fast, 300 * time.Millisecond, LoadDeclared},
		{"then the size at the runtime's measured speed", 0, 0, 50_000_000, fast, 500 * time.Millisecond, LoadEstimated},
		{"a tiny artifact: at least a millisecond", 0, 0, 10, fast, time.Millisecond, LoadEstimated},
		{"no load of the runtime measured: unknown, not a second", 0, 0, 50_000_000, LoadRate{}, 0, LoadUnknown},
		{"size unknown: unknown", 0, 0, 0, fast, 0, LoadUnknown},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, src := LoadEstimate(tt.measured, tt.hint, tt.bytes, tt.rate)
			if got != tt.want || src != tt.src {
				t.Fatalf("LoadEstimate = %v (%s), want %v (%s)", got, src, tt.want, tt.src)
			}
		})
	}
}

func TestRetryLoad(t *testing.T) {
	for _, tt := range []struct {
		name     string
		failedAt time.Time
		memory   time.Duration
		want     bool
	}{
		{"never failed", time.Time{}, 0, true},
		{"just failed", t0.Add(-time.Second), 0, false},
		{"failed long ago", t0.Add(-FailureMemory), 0, true},
		{"custom memory", t0.Add(-2 * time.Second), time.Second, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := RetryLoad(tt.failedAt, t0, tt.memory); got != tt.want {
				t.Fatalf("RetryLoad = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestRoom(t *testing.T) {
	w := Worker{ID: "w1", Budget: 100 * mib, Used: 90 * mib, Loaded: []Resident{
		idle("a@1", 30*mib, 0, 5),
		with(idle("hot@1", 40*mib, 0, 5), func(r *Resident) { r.Hot = true }),
		idle("m@1", 20*mib, 0, 5),
	}}
	if got := (Policy{}).Room(w, "m@1", Priceless, false, t0); got != 40*mib {
		t.Fatalf("Room = %d MiB, want 40 (10 free + a's 30; hot and the version itself stay)", got/mib)
	}
}

func TestNoRoomAndBytes(t *testing.T) {
	got := NoRoom("fraud@3", []string{"w1", "w2"}, 2<<30, 512<<20)
	want := "no worker of shard [w1 w2] can hold fraud@3: needs 2.0GiB, free after evicting what may go for it (idle or called less, past the minimum residency) 512MiB"
	if got != want {
		t.Fatalf("NoRoom = %q\nwant    %q", got, want)
	}
	for n, s := range map[int64]string{0: "0B", 1023: "1023B", 4 << 10: "4KiB", 8 << 20: "8MiB", 3 << 29: "1.5GiB", -5: "-5B"} {
		if got := Bytes(n); got != s {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, s)
		}
	}
}
