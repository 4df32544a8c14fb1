package server

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
)

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
