package httpapi

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/eventkit-go/eventstore"
)

// DefaultMaxResponseBuffer is the part of a response body held in memory
// when Options.MaxResponseBuffer is zero: 1 MiB.
const DefaultMaxResponseBuffer = 1 << 20

// maxFeedEvents bounds the events of one feed answer, as one
// Store.ReadFeed does.
const maxFeedEvents = 20_000

// bodyWriter writes a 200 JSON response. It holds the body in memory up
// to its limit and then answers it whole, with Content-Length, as send
// does; past the limit it sends the headers and streams the rest (chunked,
// gzip-compressed as it goes when the client accepts it), so a response
// never holds more than the limit, whatever its size.
type bodyWriter struct {
	h     *handler
	w     http.ResponseWriter
	r     *http.Request
	limit int
	buf   bytes.Buffer
	dst   interface{ Write([]byte) (int, error) } // set once streaming
	zw    *gzip.Writer
	err   error // the first write error: the client went away
}

func (h *handler) newBodyWriter(w http.ResponseWriter, r *http.Request) *bodyWriter {
	return &bodyWriter{h: h, w: w, r: r, limit: h.maxResponse}
}

// streaming reports whether the headers are sent.
func (b *bodyWriter) streaming() bool { return b.dst != nil }

// Write implements io.Writer. After a write error it drops everything.
func (b *bodyWriter) Write(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.dst == nil {
		b.buf.Write(p)
		if b.buf.Len() <= b.limit {
			return len(p), nil
		}
		b.start()
		p, b.buf = b.buf.Bytes(), bytes.Buffer{}
	}
	if b.r.Method == http.MethodHead {
		return len(p), nil
	}
	if _, err := b.dst.Write(p); err != nil {
		b.err = err
		return 0, err
	}
	return len(p), nil
}

// start sends the headers of a streamed response.
func (b *bodyWriter) start() {
	hd := b.w.Header()
	hd.Set("Content-Type", "application/json")
	hd.Set("Vary", "Accept-Encoding")
	b.dst = b.w
	if acceptsGzip(b.r) {
		hd.Set("Content-Encoding", "gzip")
		zw, _ := b.h.gzips.Get().(*gzip.Writer)
		if zw == nil {
			zw, _ = gzip.NewWriterLevel(b.w, gzip.BestSpeed)
		} else {
			zw.Reset(b.w)
		}
		b.zw, b.dst = zw, zw
	}
	b.w.WriteHeader(http.StatusOK)
}

// finish completes the response: whole with Content-Length when it fits
// the limit, else the end of the stream.
func (b *bodyWriter) finish() {
	if b.dst == nil {
		body := b.buf.Bytes()
		b.h.send(b.w, b.r, body, acceptsGzip(b.r) && len(body) >= gzipMinBytes)
		return
	}
	if b.zw != nil {
		if err := b.zw.Close(); err == nil {
			b.h.gzips.Put(b.zw)
		}
		b.zw = nil
	}
}

// fail answers err when nothing is sent yet. A streamed response cannot
// change its status: the connection is cut so that the client sees a
// truncated body, never a complete-looking one.
func (b *bodyWriter) fail(err error) {
	if b.dst == nil {
		b.h.fail(b.w, b.r, err)
		return
	}
	b.h.log.Warn("httpapi: streamed response cut", "method", b.r.Method, "path", b.r.URL.Path, "err", err)
	panic(http.ErrAbortHandler)
}

// encoder writes JSON values compacted, without HTML escaping, as
// sendValue does.
type encoder struct {
	scratch bytes.Buffer
	enc     *json.Encoder
}

func newEncoder() *encoder {
	e := &encoder{}
	e.enc = json.NewEncoder(&e.scratch)
	e.enc.SetEscapeHTML(false)
	return e
}

// value appends v to b, without the newline json.Encoder adds.
func (e *encoder) value(b *bodyWriter, v any) error {
	e.scratch.Reset()
	if err := e.enc.Encode(v); err != nil {
		return err
	}
	_, err := b.Write(bytes.TrimSuffix(e.scratch.Bytes(), []byte("\n")))
	return err
}

// chunker sizes the successive reads of a streamed answer so that one
// read holds about a response buffer of event data. It starts with one
// version or entry, as their sizes are unknown, grows fourfold while a
// read holds less than a quarter of the buffer and halves after one above
// it: a small answer takes a few reads, a large one never holds much more
// than the buffer (a single version or entry may be as large as a
// request body).
type chunker struct {
	n, limit int64
}

func newChunker(limit int) chunker { return chunker{n: 1, limit: int64(limit)} }

func (c *chunker) next(remaining int64) int64 { return max(1, min(c.n, remaining)) }

func (c *chunker) observe(dataBytes int) {
	d := int64(dataBytes)
	switch {
	case d > c.limit:
		c.n = max(1, c.n/2)
	case d < c.limit/4:
		c.n = min(4*c.n, maxLoadLimit)
	}
}

func eventBytes(events []eventstore.Event) int {
	n := 0
	for i := range events {
		n += len(events[i].Data) + len(events[i].EncryptedData) + 256
	}
	return n
}

// streamLoad answers a load of the versions in (since, since+limit],
// reading them from the store a part at a time.
func (h *handler) streamLoad(w http.ResponseWriter, r *http.Request, typ, id string, since, limit int64) {
	b := h.newBodyWriter(w, r)
	enc := newEncoder()
	c := newChunker(h.maxResponse)
	at, done, more := since, int64(0), false
	first := true
	for first || more && done < limit {
		agg, m, err := h.st.LoadRange(r.Context(), typ, id, at, c.next(limit-done))
		if err != nil {
			b.fail(err)
			return
		}
		more = m
		if first {
			first = false
			_, _ = b.Write([]byte(`{"aggregateId":`))
			_ = enc.value(b, agg.ID)
			_, _ = b.Write([]byte(`,"aggregateType":`))
			_ = enc.value(b, agg.Type)
			_, _ = b.Write(append(strconv.AppendInt([]byte(`,"aggregateVersion":`), agg.Version, 10), `,"events":[`...))
		}
		if len(agg.Events) == 0 {
			break
		}
		for i, e := range eventsJSON(agg.Events) {
			if done > 0 || i > 0 {
				_, _ = b.Write([]byte{','})
			}
			if err := enc.value(b, e); err != nil {
				b.fail(err)
				return
			}
		}
		last := agg.Events[len(agg.Events)-1].Version
		done += last - at
		at = last
		c.observe(eventBytes(agg.Events))
		if b.err != nil {
			return // the client went away
		}
	}
	_, _ = b.Write([]byte(`],"hasMore":` + strconv.FormatBool(more) + "}\n"))
	b.finish()
}

// streamFeed answers a feed read of up to opts.Limit entries after since,
// reading them from the store a part at a time. Only the first read waits.
func (h *handler) streamFeed(w http.ResponseWriter, r *http.Request, typ string, since int64, opts eventstore.FeedOptions) {
	b := h.newBodyWriter(w, r)
	enc := newEncoder()
	limit := int64(opts.Limit)
	c := newChunker(h.maxResponse)
	var done, events int64
	var res eventstore.FeedResult
	for first := true; ; first = false {
		if !first {
			opts.Wait = 0
		}
		ask := c.next(limit - done)
		opts.Limit = int(ask)
		var err error
		res, err = h.st.ReadFeed(r.Context(), typ, since, &opts)
		if err != nil {
			b.fail(err)
			return
		}
		if first {
			_, _ = b.Write([]byte(`{"entries":[`))
		}
		n := 0
		for _, e := range res.Entries {
			if done > 0 {
				_, _ = b.Write([]byte{','})
			}
			entry := feedEntryJSON{
				SequenceNumber: e.Cursor, AggregateID: e.AggregateID, AggregateType: e.AggregateType,
				FeedName: e.AggregateType, Timestamp: e.RecordedAt.UnixMilli(), Events: eventsJSON(e.Events),
			}
			if err := enc.value(b, entry); err != nil {
				b.fail(err)
				return
			}
			done++
			events += int64(len(e.Events))
			n += eventBytes(e.Events)
		}
		since = res.Next
		c.observe(n)
		if b.err != nil {
			return
		}
		// Go on while this read was cut only by the part's size.
		if !res.HasMore || int64(len(res.Entries)) < ask || done >= limit || events >= maxFeedEvents {
			break
		}
	}
	_, _ = b.Write([]byte(`],"hasMore":` + strconv.FormatBool(res.HasMore) +
		`,"currentSequenceNumber":` + strconv.FormatInt(res.Head, 10) + "}\n"))
	b.finish()
}
