package server

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/sluiceml/sluice/web"
)

// consoleCSP keeps every request of the console on this server: scripts,
// styles, images and fetches from 'self' only, no inline script, no frame
// around it. A page that tried to reach another host would be refused by
// the browser (and the browser test would see the error).
const consoleCSP = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// consoleFile is one embedded file of the console, read once.
type consoleFile struct {
	body  []byte
	ctype string
	etag  string
}

// consoleHandler serves the console (package web) at /ui/: a file of it by
// its name, and index.html for every other path under /ui/ (the console
// routes /ui/models/NAME, /ui/workers, … itself). It needs no key: the
// files are the same for everyone, and every figure the console shows
// comes from the /v1 API with the caller's key.
func consoleHandler() http.Handler {
	files := map[string]consoleFile{}
	_ = fs.WalkDir(web.Console(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(web.Console(), p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		ct := mime.TypeByExtension(path.Ext(p))
		if ct == "" {
			ct = http.DetectContentType(b)
		}
		files[p] = consoleFile{body: b, ctype: ct, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	index := files["index.html"]
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET")
			http.Error(w, "use GET", http.StatusMethodNotAllowed)
			return
		}
		if r.URL.Path == "/ui" {
			http.Redirect(w, r, "/ui/", http.StatusMovedPermanently)
			return
		}
		name := strings.TrimPrefix(r.URL.Path, "/ui/")
		f, ok := files[name]
		if !ok || name == "" {
			f = index
		}
		h := w.Header()
		h.Set("Content-Type", f.ctype)
		h.Set("Content-Security-Policy", consoleCSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache") // revalidated by ETag: a new binary serves new files at once
		h.Set("ETag", f.etag)
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(f.body))
	})
}
