package httpapi

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"hash/fnv"
	"net/http"
	"strconv"
	"strings"

	"github.com/eventkit-go/eventstore"
)

// gzipMinBytes is the smallest body worth compressing.
const gzipMinBytes = 1024

// sendValue answers 200 with v encoded as JSON. HTML characters are not
// escaped, so event data comes back as saved (compacted).
func (h *handler) sendValue(w http.ResponseWriter, r *http.Request, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		h.fail(w, r, err)
		return
	}
	body := buf.Bytes() // ends with a newline, as every JSON body here
	h.send(w, r, body, acceptsGzip(r) && len(body) >= gzipMinBytes)
}

// send writes a 200 JSON response, gzip-compressed when gz is set.
func (h *handler) send(w http.ResponseWriter, r *http.Request, body []byte, gz bool) {
	hd := w.Header()
	hd.Set("Content-Type", "application/json")
	hd.Set("Vary", "Accept-Encoding")
	if gz {
		body = h.compress(body)
		hd.Set("Content-Encoding", "gzip")
	}
	hd.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

func (h *handler) compress(body []byte) []byte {
	var buf bytes.Buffer
	buf.Grow(len(body)/4 + 64)
	zw, _ := h.gzips.Get().(*gzip.Writer)
	if zw == nil {
		zw, _ = gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	} else {
		zw.Reset(&buf)
	}
	// Writes to a bytes.Buffer cannot fail.
	_, _ = zw.Write(body)
	_ = zw.Close()
	h.gzips.Put(zw)
	return buf.Bytes()
}

// sendProjection answers a projection query: the result with its ETag and
// Last-Modified, or 304 when If-None-Match matches.
func (h *handler) sendProjection(w http.ResponseWriter, r *http.Request, p eventstore.Projection) {
	data := p.Data
	if len(data) == 0 {
		data = json.RawMessage("{}")
	}
	id, _ := json.Marshal(p.ID) // a string: cannot fail
	body := make([]byte, 0, len(data)+len(id)+49)
	body = append(body, `{"projectionId":`...)
	body = append(body, id...)
	body = append(body, `,"createdAt":`...)
	body = strconv.AppendInt(body, p.CreatedAt.UnixMilli(), 10)
	body = append(body, `,"updatedAt":`...)
	body = strconv.AppendInt(body, p.UpdatedAt.UnixMilli(), 10)
	body = append(body, `,"data":`...)
	body = append(body, data...)
	body = append(body, "}\n"...)

	gz := acceptsGzip(r) && len(body) >= gzipMinBytes
	tag := entityTag(p)
	// A strong tag names one representation: the gzipped one gets its own.
	sent := `"` + tag + `"`
	if gz {
		sent = `"` + tag + `-gzip"`
	}
	hd := w.Header()
	hd.Set("ETag", sent)
	hd.Set("Last-Modified", p.UpdatedAt.UTC().Format(http.TimeFormat))
	if noneMatch(r.Header.Values("If-None-Match"), tag) {
		hd.Set("Vary", "Accept-Encoding")
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.send(w, r, body, gz)
}

// entityTag derives the opaque tag of a projection instance from its name,
// id, position and update time; the position changes whenever the
// projection does.
func entityTag(p eventstore.Projection) string {
	f := fnv.New64a()
	_, _ = f.Write([]byte(p.Name))
	_, _ = f.Write([]byte{0})
	_, _ = f.Write([]byte(p.ID))
	b := make([]byte, 0, 48)
	b = strconv.AppendUint(b, f.Sum64(), 36)
	b = append(b, '-')
	b = strconv.AppendInt(b, p.Position, 36)
	b = append(b, '-')
	b = strconv.AppendInt(b, p.UpdatedAt.UnixMicro(), 36)
	return string(b)
}

// noneMatch reports whether an If-None-Match header (values may hold
// comma-separated lists) matches tag, or its "-gzip" form, by weak
// comparison, or is "*".
func noneMatch(values []string, tag string) bool {
	for _, v := range values {
		for {
			v = strings.TrimLeft(v, " \t,")
			if v == "" {
				break
			}
			if v[0] == '*' {
				return true
			}
			v = strings.TrimPrefix(v, "W/")
			if len(v) < 2 || v[0] != '"' {
				break // not an entity tag: ignore the rest
			}
			end := strings.IndexByte(v[1:], '"')
			if end < 0 {
				break
			}
			opaque := v[1 : 1+end]
			if opaque == tag || opaque == tag+"-gzip" {
				return true
			}
			v = v[2+end:]
		}
	}
	return false
}

// acceptsGzip reports whether Accept-Encoding allows gzip: listed (or "*"
// listed and gzip not refused) with a non-zero q value.
func acceptsGzip(r *http.Request) bool {
	star := false
	for _, v := range r.Header.Values("Accept-Encoding") {
		for _, part := range strings.Split(v, ",") {
			name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
			name = strings.ToLower(strings.TrimSpace(name))
			if name != "gzip" && name != "x-gzip" && name != "*" {
				continue
			}
			ok := qNonZero(params)
			if name == "*" {
				star = ok
				continue
			}
			return ok
		}
	}
	return star
}

// qNonZero reports whether the parameters of a coding hold no q=0.
func qNonZero(params string) bool {
	for _, p := range strings.Split(params, ";") {
		k, v, found := strings.Cut(strings.TrimSpace(p), "=")
		if !found || !strings.EqualFold(strings.TrimSpace(k), "q") {
			continue
		}
		q, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		return err != nil || q > 0
	}
	return true
}
