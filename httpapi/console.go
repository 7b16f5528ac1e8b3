package httpapi

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"sync"

	"github.com/eventkit-go/eventstore"
)

// ConsolePath is where the handler serves the console, the page through
// which a person looks inside the store with a browser (unless
// Options.DisableConsole). The page and its files hold no data and load
// without credentials; the page asks for a key pair once, keeps it in the
// browser tab's sessionStorage (never a cookie or the URL) and sends it
// with every API call it makes, as any client does.
const ConsolePath = "/console/"

// ConsoleCSP is the Content-Security-Policy of every console response:
// scripts and styles from the handler's own origin only (no inline
// script or style, no eval), calls to the handler's origin only, nothing
// framed or framing, and Trusted Types required, so that no string ever
// becomes HTML through innerHTML and its kin: the page builds its
// elements with the DOM and writes what the store holds as text.
const ConsoleCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'; require-trusted-types-for 'script'; trusted-types 'none'"

//go:embed console
var consoleFS embed.FS

// consoleAsset is one embedded file of the console, with its gzip form.
type consoleAsset struct {
	body, gz    []byte
	contentType string
	etag        string
}

// consoleAssets reads the embedded files once; what it returns is never
// changed.
var consoleAssets = sync.OnceValue(func() map[string]*consoleAsset {
	types := map[string]string{
		".html": "text/html; charset=utf-8",
		".js":   "text/javascript; charset=utf-8",
		".css":  "text/css; charset=utf-8",
		".svg":  "image/svg+xml",
	}
	out := map[string]*consoleAsset{}
	_ = fs.WalkDir(consoleFS, "console", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := consoleFS.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(body)
		a := &consoleAsset{body: body, contentType: types[path.Ext(p)], etag: hex.EncodeToString(sum[:12])}
		if a.contentType == "" {
			a.contentType = "application/octet-stream"
		}
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		_, _ = zw.Write(body)
		_ = zw.Close()
		if buf.Len() < len(body) {
			a.gz = buf.Bytes()
		}
		out[strings.TrimPrefix(p, "console/")] = a
		return nil
	})
	return out
})

// serveConsole serves the console's files under ConsolePath, and
// redirects the path without its slash to it. Everything else of the
// path is 404.
func (h *handler) serveConsole(w http.ResponseWriter, r *http.Request) {
	r.Pattern = ConsolePath
	hd := w.Header()
	hd.Set("Content-Security-Policy", ConsoleCSP)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Cross-Origin-Opener-Policy", "same-origin")
	hd.Set("Cross-Origin-Resource-Policy", "same-origin")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hd.Set("Allow", "GET, HEAD")
		h.fail(w, r, fmt.Errorf("%w: %s %s allows GET, HEAD", errMethod, r.Method, clip(r.URL.Path)))
		return
	}
	if r.URL.Path == strings.TrimSuffix(ConsolePath, "/") {
		// Relative, so that it stays under the prefix the handler is
		// mounted at.
		hd.Set("Location", "console/")
		w.WriteHeader(http.StatusMovedPermanently)
		return
	}
	name := strings.TrimPrefix(r.URL.Path, ConsolePath)
	if name == "" {
		name = "index.html"
	}
	a, ok := consoleAssets()[name]
	if !ok || r.URL.RawQuery != "" {
		h.fail(w, r, apiErr(eventstore.ErrNotFound, "the console has no file %s", clip(r.URL.Path)))
		return
	}
	// The files change with the binary: the browser asks again each time,
	// and a 304 answers when they are the same.
	hd.Set("Cache-Control", "no-cache")
	hd.Set("Vary", "Accept-Encoding")
	body, tag := a.body, a.etag
	if a.gz != nil && acceptsGzip(r) {
		body, tag = a.gz, a.etag+"-gzip"
		hd.Set("Content-Encoding", "gzip")
	}
	hd.Set("ETag", `"`+tag+`"`)
	if noneMatch(r.Header.Values("If-None-Match"), a.etag) {
		hd.Del("Content-Encoding")
		w.WriteHeader(http.StatusNotModified)
		return
	}
	hd.Set("Content-Type", a.contentType)
	hd.Set("Content-Length", fmt.Sprint(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}
