package server

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
)

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
		got, ok := parseTraceparent(in)
		if got != want || ok != (want != "") {
			t.Errorf("parseTraceparent(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
}

func TestPredictLogLine(t *testing.T) {
	logs := &syncBuffer{}
	ts := newTestServer(t, Config{Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	post(t, ts.URL+"/v1/models/churn:predict", "application/json", `{"instances":[{"tenureMonths":3,"supportTickets":4,"plan":"basic"}]}`,
		map[string]string{"X-Request-Id": "log-1", "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"})
	for _, line := range strings.Split(logs.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil || m["msg"] != "predict" {
			continue
		}
		if m["request_id"] != "log-1" || m["model"] != "churn" || m["version"] != 1.0 || m["tenant"] != "default" || m["trace_id"] != "4bf92f3577b34da6a3ce929d0e0e4736" || m["outcome"] != "ok" {
			t.Fatalf("predict log line %v", m)
		}
		return
	}
	t.Fatalf("no predict log line in:\n%s", logs.String())
}
