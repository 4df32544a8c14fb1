package server

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"strings"
	"testing"

	"github.com/sluiceml/sluice/internal/errs"
)

func TestDecodeContent(t *testing.T) {
	body := []byte(`{"inputs":[]}`)
	var gz, zl, fl bytes.Buffer
	g := gzip.NewWriter(&gz)
	g.Write(body)
	g.Close()
	z := zlib.NewWriter(&zl)
	z.Write(body)
	z.Close()
	f, _ := flate.NewWriter(&fl, flate.BestSpeed)
	f.Write(body)
	f.Close()
	bomb := func(n int) []byte {
		var b bytes.Buffer
		w := gzip.NewWriter(&b)
		w.Write(bytes.Repeat([]byte("x"), n))
		w.Close()
		return b.Bytes()
	}
	limit := int64(len(body))
	cases := []struct {
		name     string
		coding   []string
		in       []byte
		limit    int64
		want     []byte
		code     errs.Code
		contains string
	}{
		{"none", nil, body, limit, body, "", ""},
		{"identity", []string{"identity"}, body, limit, body, "", ""},
		{"gzip", []string{"gzip"}, gz.Bytes(), limit, body, "", ""},
		{"gzip, any case", []string{" GZIP "}, gz.Bytes(), limit, body, "", ""},
		{"deflate as zlib (HTTP's deflate; tritonclient's zlib.compress)", []string{"deflate"}, zl.Bytes(), limit, body, "", ""},
		{"deflate as a raw stream", []string{"deflate"}, fl.Bytes(), limit, body, "", ""},
		{"exactly the bound", []string{"gzip"}, bomb(100), 100, bytes.Repeat([]byte("x"), 100), "", ""},
		{"one byte past the bound", []string{"gzip"}, bomb(101), 100, nil, errs.PayloadTooLarge, "decompresses past 100 bytes"},
		{"a zip bomb", []string{"gzip"}, bomb(64 << 20), 1 << 20, nil, errs.PayloadTooLarge, "decompresses past 1048576 bytes"},
		{"not gzip", []string{"gzip"}, body, limit, nil, errs.InvalidArgument, "Content-Encoding: gzip: the body is not gzip data"},
		{"truncated gzip", []string{"gzip"}, gz.Bytes()[:len(gz.Bytes())-6], limit, nil, errs.InvalidArgument, "the body does not decompress"},
		{"two codings", []string{"gzip", "deflate"}, gz.Bytes(), limit, nil, errs.UnsupportedMedia, "one coding at most"},
		{"two in one header", []string{"gzip, gzip"}, gz.Bytes(), limit, nil, errs.UnsupportedMedia, "one coding at most"},
		{"br", []string{"br"}, body, limit, nil, errs.UnsupportedMedia, `Content-Encoding: "br" is not supported (use gzip, deflate or none)`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := decodeContent(c.coding, c.in, c.limit)
			if c.code == "" {
				if err != nil || !bytes.Equal(got, c.want) {
					t.Fatalf("got %q, %v; want %q", got, err, c.want)
				}
				return
			}
			e := errs.As(err)
			if err == nil || e.Code != c.code || !strings.Contains(e.Error(), c.contains) {
				t.Fatalf("got %v; want %s containing %q", err, c.code, c.contains)
			}
		})
	}
}
