package server

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sluiceml/sluice/internal/errs"
)

// Pages of list answers: GET /v1/deployments/{m}/history and GET
// /v1/records take limit (default defaultPage) and cursor (the previous
// page's nextCursor, opaque to clients).
const (
	defaultPage    = 100
	maxHistoryPage = 1000 // records: records.MaxLimit (10000)
)

// pageLimit reads the limit query parameter: 1 to max, default def.
func pageLimit(r *http.Request, def, max int) (int, error) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 || n > max {
		return 0, errs.Field(errs.InvalidArgument, "limit", "must be between 1 and %d, got %q", max, errs.Clip(v))
	}
	return n, nil
}

// A cursor is base64url of "kind:a.b": which listing it belongs to and
// its position there, so a cursor of one listing is refused by another.
func encodeCursor(kind string, a, b int64) string {
	return base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "%s:%d.%d", kind, a, b))
}

func decodeCursor(r *http.Request, kind string) (a, b int64, ok bool, err error) {
	v := r.URL.Query().Get("cursor")
	if v == "" {
		return 0, 0, false, nil
	}
	bad := errs.Field(errs.InvalidArgument, "cursor", "is not a cursor of this listing: pass the nextCursor of the previous page as it was")
	raw, derr := base64.RawURLEncoding.DecodeString(v)
	if derr != nil {
		return 0, 0, false, bad
	}
	pos, found := strings.CutPrefix(string(raw), kind+":")
	as, bs, dot := strings.Cut(pos, ".")
	if !found || !dot {
		return 0, 0, false, bad
	}
	a, aerr := strconv.ParseInt(as, 10, 64)
	b, berr := strconv.ParseInt(bs, 10, 64)
	if aerr != nil || berr != nil || a < 0 || b < 0 {
		return 0, 0, false, bad
	}
	return a, b, true, nil
}

// Slow readers: every answer is written under a write deadline sized for
// it (writeGrace plus the time to send it at writeMinRate), so a client
// that stops reading holds its connection and the answer's memory that
// long, not forever. Long-running handlers (an upload's wait) set it only
// when they write, so their wait is not cut.
var (
	writeGrace   = 10 * time.Second
	writeMinRate = int64(256 << 10) // bytes per second
) // variables only so that a test can shorten them

func setWriteDeadline(w http.ResponseWriter, n int) {
	d := writeGrace + time.Duration(int64(n)*int64(time.Second)/writeMinRate)
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(d)) // unsupported by a test recorder: no bound needed there
}
