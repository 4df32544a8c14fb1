package control

import "testing"

func TestFormatNumbers(t *testing.T) {
	for _, tc := range []struct {
		got, want string
	}{
		{FormatSig(109.23, 4), "109.2"},
		{FormatSig(12345.6, 4), "12350"},
		{FormatSig(0.00123456, 4), "0.001235"},
		{FormatSig(1e6, 4), "1000000"},
		{FormatSig(0, 4), "0"},
		{FormatSig(-2.5e-7, 2), "-0.00000025"},
		{FormatNumber(1e6), "1000000"},
		{FormatNumber(1e-6), "0.000001"},
		{FormatNumber(0.25), "0.25"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}
