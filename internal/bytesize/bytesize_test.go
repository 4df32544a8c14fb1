package bytesize

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in      string
		want    int64
		wantErr string
	}{
		{in: "64MiB", want: 64 << 20},
		{in: "512KiB", want: 512 << 10},
		{in: "2GiB", want: 2 << 30},
		{in: "512KB", want: 512_000},
		{in: "5MB", want: 5_000_000},
		{in: "3GB", want: 3_000_000_000},
		{in: "0MiB", want: 0},
		{in: "1024GiB", want: 1 << 40},
		{in: "1025GiB", wantErr: "larger than the limit"},
		{in: "99999999999999999999MiB", wantErr: "larger than the limit"},
		{in: "64", wantErr: "not a size"},
		{in: "64mb", wantErr: "not a size"},
		{in: "64Mib", wantErr: "not a size"},
		{in: "64 MiB", wantErr: "not a size"},
		{in: "-1MiB", wantErr: "not a size"},
		{in: "1.5GiB", wantErr: "not a size"},
		{in: "MiB", wantErr: "not a size"},
		{in: "64B", wantErr: "not a size"},
		{in: "", wantErr: "not a size"},
		{in: "+5MiB", wantErr: "not a size"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := Parse(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Parse(%q) = %d, %v; want error containing %q", tt.in, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Parse(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestFormat(t *testing.T) {
	for n, want := range map[int64]string{0: "0B", 64 << 20: "64MiB", 3 << 30: "3GiB", 1536: "1536B", 1000: "1KB", 2048: "2KiB", 5_000_000: "5MB", 1500: "1500B"} {
		if got := Format(n); got != want {
			t.Errorf("Format(%d) = %q, want %q", n, got, want)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"64MiB", "1KB", "-1GiB", "1.5MB", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := Parse(s)
		if err != nil {
			return
		}
		if n < 0 || n > Max {
			t.Fatalf("Parse(%q) = %d outside [0, Max]", s, n)
		}
		if n > 0 {
			if back, err := Parse(Format(n)); err != nil || back != n {
				t.Fatalf("Parse(Format(%d)) = %d, %v", n, back, err)
			}
		}
	})
}
