package app

import (
	"strings"
	"testing"
)

func TestCheckStore(t *testing.T) {
	tests := []struct {
		url       string
		initStore bool
		want      string // "" = accepted
	}{
		{"", false, ""},
		{"", true, ""},
		{"postgres://sluice@127.0.0.1:5432/sluice?sslmode=disable", false, ""},
		{"postgresql://sluice@db/sluice", false, ""},
		{"mysql://sluice@db/sluice", false, "want a PostgreSQL URL"},
		{"/var/lib/sluice.db", false, "want a PostgreSQL URL"},
		{"postgres://sluice:pw@db/sluice", true, "--init-store re-initialises damaged SQLite files"},
	}
	for _, tc := range tests {
		err := checkStore(tc.url, tc.initStore)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("checkStore(%q, %v) = %v, want accepted", tc.url, tc.initStore, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("checkStore(%q, %v) = %v, want %q", tc.url, tc.initStore, err, tc.want)
		case err != nil && strings.Contains(err.Error(), ":pw@"):
			t.Errorf("checkStore(%q) put the password in its error: %v", tc.url, err)
		}
	}
}
