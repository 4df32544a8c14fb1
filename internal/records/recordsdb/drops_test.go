package recordsdb

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/records"
)

// fullDisk is a Store on a full disk: every write fails as SQLite's does
// when the file system answers ENOSPC.
type fullDisk struct{ records.Store }

func (fullDisk) Write(ctx context.Context, ops []records.Op) error {
	return fmt.Errorf("records: insert %s: %w", ops[0].Record.RequestID, syscall.ENOSPC)
}

// Records lost to a full buffer or a failed write are counted by reason and
// reported by Warning (for readiness) until WarnFor after the last loss.
func TestWriterCountsAndReportsDrops(t *testing.T) {
	clk := &clock{t: t0}
	w := records.NewWriter(fullDisk{openTest(t)}, records.Config{Buffer: 2, BatchSize: 100, FlushEvery: time.Hour, Now: clk.Now})
	if got := w.Warning(); got != "" {
		t.Errorf("Warning before any drop = %q", got)
	}
	for i := range 3 {
		w.Add(records.Record{RequestID: fmt.Sprint("req-", i), Tenant: "acme"})
	}
	if w.Overflows() != 1 || !strings.Contains(w.Warning(), "1 because the buffer was full") {
		t.Errorf("after an overflow: overflows %d, Warning %q", w.Overflows(), w.Warning())
	}
	stop := runWriter(t, w)
	if err := stop(); err == nil {
		t.Error("Run's last flush on a full disk returned nil")
	}
	warn := w.Warning()
	if w.Failed() != 2 || !strings.Contains(warn, "2 because writing failed") || !strings.Contains(warn, "no space left") {
		t.Errorf("after a failed write: failed %d, Warning %q", w.Failed(), warn)
	}
	for _, secret := range []string{"req-", "acme", "/"} {
		if strings.Contains(warn, secret) {
			t.Errorf("Warning %q carries %q (readyz is public)", warn, secret)
		}
	}
	clk.Advance(records.WarnFor + time.Second)
	if got := w.Warning(); got != "" {
		t.Errorf("Warning %s after the last drop = %q, want none", records.WarnFor, got)
	}
}
