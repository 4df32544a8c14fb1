package telemetry

import "testing"

func TestParseTraceparent(t *testing.T) {
	cases := map[string]string{
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01": "4bf92f3577b34da6a3ce929d0e0e4736",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00": "4bf92f3577b34da6a3ce929d0e0e4736",
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01": "", // all-zero trace id
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01": "", // all-zero parent
		"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01": "", // version ff is invalid
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01": "", // uppercase
		"00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01":  "", // short
		"garbage": "",
	}
	for in, want := range cases {
		got, ok := ParseTraceparent(in)
		if got != want || ok != (want != "") {
			t.Errorf("ParseTraceparent(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
}
