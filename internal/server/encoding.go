package server

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"io"
	"strings"

	"github.com/sluiceml/sluice/internal/errs"
)

// decodeContent undoes a request body's Content-Encoding (OIP REST:
// Triton's client compresses with gzip or deflate): the decoded bytes are
// bounded by limit, the same --max-body-bytes as any body, so a small
// body that inflates past it (a zip bomb) is refused with 413 once limit
// bytes came out, never read further. "deflate" is the zlib format, as
// HTTP says and clients send it; a raw DEFLATE stream is taken too.
// "identity" or none leaves the body as it is.
func decodeContent(values []string, body []byte, limit int64) ([]byte, error) {
	var codings []string
	for _, v := range values {
		for _, c := range strings.Split(v, ",") {
			if c = strings.ToLower(strings.TrimSpace(c)); c != "" && c != "identity" {
				codings = append(codings, c)
			}
		}
	}
	if len(codings) > 1 {
		return nil, errs.Field(errs.UnsupportedMedia, "Content-Encoding", "%q: one coding at most (gzip or deflate)", errs.Clip(strings.Join(values, ", ")))
	}
	if len(codings) == 0 {
		return body, nil
	}
	var zr io.Reader
	switch codings[0] {
	case "gzip", "x-gzip":
		g, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			return nil, errs.Wrap(errs.InvalidArgument, err, "Content-Encoding: gzip: the body is not gzip data")
		}
		g.Multistream(false)
		zr = g
	case "deflate":
		if isZlib(body) {
			z, err := zlib.NewReader(bytes.NewReader(body))
			if err != nil {
				return nil, errs.Wrap(errs.InvalidArgument, err, "Content-Encoding: deflate: the body is not zlib data")
			}
			zr = z
		} else {
			zr = flate.NewReader(bytes.NewReader(body))
		}
	default:
		return nil, errs.Field(errs.UnsupportedMedia, "Content-Encoding", "%q is not supported (use gzip, deflate or none)", errs.Clip(codings[0]))
	}
	out, err := io.ReadAll(io.LimitReader(zr, limit+1))
	if err != nil {
		return nil, errs.Wrap(errs.InvalidArgument, err, "Content-Encoding: %s: the body does not decompress", codings[0])
	}
	if int64(len(out)) > limit {
		return nil, errs.New(errs.PayloadTooLarge, "request body decompresses past %d bytes (server flag --max-body-bytes bounds the decompressed body too)", limit)
	}
	return out, nil
}

// isZlib reports a zlib header (RFC 1950): deflate method, a window of at
// most 32 KiB, and the check bits.
func isZlib(b []byte) bool {
	return len(b) >= 2 && b[0]&0x0f == 8 && b[0]>>4 <= 7 && (uint16(b[0])<<8|uint16(b[1]))%31 == 0
}
