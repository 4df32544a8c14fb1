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
		want        bool
	}{
		{"no deadline waits", 0, false, time.Hour, true},
		{"deadline covers load and margin", 1300 * time.Millisecond, true, time.Second, true},
		{"deadline covers the load but not the margin", 1100 * time.Millisecond, true, time.Second, false},
		{"short deadline refused", 100 * time.Millisecond, true, time.Second, false},
		{"tiny load: the 20ms floor", 25 * time.Millisecond, true, time.Millisecond, true},
		{"tiny load under the floor", 15 * time.Millisecond, true, time.Millisecond, false},
		{"passed deadline", -time.Second, true, 0, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := ColdWait(tt.left, tt.hasDeadline, tt.load); got != tt.want {
				t.Fatalf("ColdWait(%v, %v, %v) = %v, want %v", tt.left, tt.hasDeadline, tt.load, got, tt.want)
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
	if got := (Policy{}).Room(w, "m@1", Priceless, t0); got != 40*mib {
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
