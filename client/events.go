package client

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/sluiceml/sluice/internal/api"
)

// StreamEvent is one server-sent event of GET /v1/events: its id ("" for a
// reset), kind (api.EventKind…) and JSON data (an api.Event… object).
type StreamEvent struct {
	ID   string          `json:"id,omitempty"`
	Kind string          `json:"event"`
	Data json.RawMessage `json:"data"`
}

// maxEventLine bounds one line of the stream (an event's data is one line).
const maxEventLine = 1 << 20

// EventsQuery is what Events asks for.
type EventsQuery struct {
	Models      []string // the ?models= filter (nil: every model the key may read)
	LastEventID string   // replay the kept events after this one first ("": none)
	Opened      func()   // called once the server accepted the stream (nil: none)
}

// Events streams GET /v1/events and calls fn with each event until the
// stream ends (nil), ctx ends (nil) or fn returns an error (that error).
// It is never retried: the caller reconnects with the last event's ID.
func (c *Client) Events(ctx context.Context, q EventsQuery, fn func(StreamEvent) error) error {
	path := "/v1/events"
	if len(q.Models) > 0 {
		path += "?models=" + url.QueryEscape(strings.Join(q.Models, ","))
	}
	last := q.LastEventID
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.Base+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	if last != "" {
		req.Header.Set("Last-Event-ID", last)
	}
	if c.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.APIKey)
	}
	hc := &http.Client{Transport: c.HTTP.Transport} // no overall timeout: a stream lasts
	resp, err := hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("GET %s: %w", req.URL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		e := &Error{Status: resp.StatusCode, RetryAfter: resp.Header.Get("Retry-After")}
		var eb api.ErrorBody
		if json.Unmarshal(b, &eb) == nil && eb.Error.Code != "" {
			e.Detail = eb.Error
		} else {
			e.Detail = api.ErrorDetail{Code: fmt.Sprintf("http_%d", resp.StatusCode), Message: strings.TrimSpace(string(b))}
		}
		return e
	}
	if q.Opened != nil {
		q.Opened()
	}
	err = ReadEvents(resp.Body, fn)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// ReadEvents reads a text/event-stream from r and calls fn with each
// event (comments, "retry:" and events without a kind skipped; several
// data lines joined by a newline, as the format says). It returns nil at
// the end of r, else the first error of r or fn.
func ReadEvents(r io.Reader, fn func(StreamEvent) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxEventLine)
	var e StreamEvent
	var data []byte
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if e.Kind != "" {
				e.Data = append(json.RawMessage(nil), data...)
				if err := fn(e); err != nil {
					return err
				}
			}
			e, data = StreamEvent{}, data[:0]
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "id":
			e.ID = value
		case "event":
			e.Kind = value
		case "data":
			if len(data) > 0 {
				data = append(data, '\n')
			}
			data = append(data, value...)
		}
	}
	return sc.Err()
}

// Stats returns a model's per-minute figures of the last window ("1h";
// "": the server's default) (GET /v1/models/{name}/stats).
func (c *Client) Stats(ctx context.Context, model, window string) (*api.ModelStats, error) {
	path := "/v1/models/" + url.PathEscape(model) + "/stats"
	if window != "" {
		path += "?window=" + url.QueryEscape(window)
	}
	var out api.ModelStats
	if err := c.getJSON(ctx, path, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
