package httpapi

import (
	"compress/gzip"
	"errors"
	"io"
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

// Sizes of the pooled body buffers: a new one starts at minBodyBuffer
// bytes; one grown past twice the response limit is dropped, not pooled.
const minBodyBuffer = 4 << 10

// streamChunk is how many bytes a streamed response gathers before it
// writes them on.
const streamChunk = 32 << 10

// bodyWriter writes a 200 JSON response. The endpoints append to buf and
// call flush after each version or entry. It holds the body in memory up
// to its limit and then answers it whole, with Content-Length, as send
// does; past the limit it sends the headers and streams the rest (chunked,
// gzip-compressed as it goes when the client accepts it), so a response
// never holds much more than the limit, whatever its size. buf comes from
// the handler's pool and goes back to it when the response is finished.
type bodyWriter struct {
	h     *handler
	w     http.ResponseWriter
	r     *http.Request
	limit int
	buf   []byte
	dst   io.Writer // set once streaming
	zw    *gzip.Writer
	err   error // the first write error: the client went away
}

func (h *handler) newBodyWriter(w http.ResponseWriter, r *http.Request) *bodyWriter {
	return &bodyWriter{h: h, w: w, r: r, limit: h.maxResponse, buf: h.getBuffer()}
}

// getBuffer returns an empty buffer from the pool, or a new one.
func (h *handler) getBuffer() []byte {
	if p, ok := h.bufs.Get().(*[]byte); ok {
		return (*p)[:0]
	}
	return make([]byte, 0, minBodyBuffer)
}

// putBuffer returns b to the pool unless it grew too large to keep.
func (h *handler) putBuffer(b []byte) {
	if cap(b) > 2*h.maxResponse+minBodyBuffer {
		return
	}
	b = b[:0]
	h.bufs.Put(&b)
}

// write appends p and flushes.
func (b *bodyWriter) write(p string) {
	b.buf = append(b.buf, p...)
	b.flush(false)
}

// flush starts streaming once buf exceeds the limit; while streaming, it
// writes buf on when it holds streamChunk bytes, or always. After a
// write error it drops everything.
func (b *bodyWriter) flush(always bool) {
	if b.dst == nil {
		if len(b.buf) <= b.limit {
			return
		}
		b.start()
	}
	if b.err != nil || b.r.Method == http.MethodHead {
		b.buf = b.buf[:0]
		return
	}
	if len(b.buf) < streamChunk && !always {
		return
	}
	if _, err := b.dst.Write(b.buf); err != nil {
		b.err = err
	}
	b.buf = b.buf[:0]
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
// the limit, else the end of the stream. It returns buf to the pool.
func (b *bodyWriter) finish() {
	if b.dst == nil {
		body := b.buf
		b.h.send(b.w, b.r, body, acceptsGzip(b.r) && len(body) >= gzipMinBytes)
	} else {
		b.flush(true)
		if b.zw != nil {
			if err := b.zw.Close(); err == nil {
				b.h.gzips.Put(b.zw)
			}
			b.zw = nil
		}
	}
	b.h.putBuffer(b.buf)
	b.buf = nil
}

// fail answers err when nothing is sent yet. A streamed response cannot
// change its status: the connection is cut so that the client sees a
// truncated body, never a complete-looking one.
func (b *bodyWriter) fail(err error) {
	if b.dst == nil {
		b.h.putBuffer(b.buf)
		b.buf = nil
		b.h.fail(b.w, b.r, err)
		return
	}
	b.h.log.Warn("httpapi: streamed response cut", "method", b.r.Method, "path", b.r.URL.Path, "err", err)
	panic(http.ErrAbortHandler)
}

// chunker sizes the successive reads of a streamed answer so that one
// read holds about a response buffer of event data. It starts with first
// versions or entries, as their sizes are unknown, grows fourfold while a
// read holds less than a quarter of the buffer and halves after one above
// it: a small answer takes a few reads, a large one never holds much more
// than the buffer (a single version or entry may be as large as a
// request body).
type chunker struct {
	n, limit int64
}

// First reads: 64 versions or entries. The Store caps each storage read
// at Options.MaxReadBytes (1 MiB by default) plus one save, so a first
// read of many small versions costs one read, and one of large versions
// still holds about the cap; the chunker then adapts to what it saw.
// (Before the cap a load started with one version, and a 5-version load
// took two reads.)
const (
	firstLoadChunk = 64
	firstFeedChunk = 64
)

func newChunker(limit int, first int64) chunker { return chunker{n: first, limit: int64(limit)} }

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
	c := newChunker(h.maxResponse, firstLoadChunk)
	at, done, more := since, int64(0), false
	first := true
	for first || more && done < limit {
		agg, m, err := h.store(r).LoadRange(r.Context(), typ, id, at, c.next(limit-done))
		if err != nil {
			b.fail(err)
			return
		}
		more = m
		if first {
			first = false
			b.buf = append(b.buf, `{"aggregateId":`...)
			b.buf = appendJSONString(b.buf, agg.ID)
			b.buf = append(b.buf, `,"aggregateType":`...)
			b.buf = appendJSONString(b.buf, agg.Type)
			b.buf = append(b.buf, `,"aggregateVersion":`...)
			b.buf = strconv.AppendInt(b.buf, agg.Version, 10)
			b.buf = append(b.buf, `,"events":[`...)
		}
		if len(agg.Events) == 0 {
			break
		}
		for i := range agg.Events {
			if done > 0 || i > 0 {
				b.buf = append(b.buf, ',')
			}
			if b.buf, err = appendEventJSON(b.buf, &agg.Events[i]); err != nil {
				b.fail(err)
				return
			}
			b.flush(false)
		}
		last := agg.Events[len(agg.Events)-1].Version
		done += last - at
		at = last
		c.observe(eventBytes(agg.Events))
		if b.err != nil {
			return // the client went away
		}
	}
	b.write(`],"hasMore":` + strconv.FormatBool(more) + "}\n")
	b.finish()
}

// streamFeed answers a feed read of up to opts.Limit entries after since,
// reading them from the store a part at a time. Only the first read waits.
func (h *handler) streamFeed(w http.ResponseWriter, r *http.Request, typ string, since int64, opts eventstore.FeedOptions) {
	b := h.newBodyWriter(w, r)
	limit := int64(opts.Limit)
	c := newChunker(h.maxResponse, firstFeedChunk)
	var done, events int64
	var res eventstore.FeedResult
	for first := true; ; first = false {
		if !first {
			opts.Wait = 0
		}
		ask := c.next(limit - done)
		opts.Limit = int(ask)
		var err error
		res, err = h.store(r).ReadFeed(r.Context(), typ, since, &opts)
		if err != nil {
			var ahead *eventstore.CursorAheadError
			if errors.As(err, &ahead) {
				w.Header().Set(HeaderSequenceNumber, strconv.FormatInt(ahead.Head, 10))
			}
			b.fail(err)
			return
		}
		if first {
			b.buf = append(b.buf, `{"entries":[`...)
		}
		n := 0
		for i := range res.Entries {
			e := &res.Entries[i]
			if done > 0 {
				b.buf = append(b.buf, ',')
			}
			if b.buf, err = appendFeedEntryJSON(b.buf, e); err != nil {
				b.fail(err)
				return
			}
			b.flush(false)
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
	b.buf = append(b.buf, `],"hasMore":`...)
	b.buf = strconv.AppendBool(b.buf, res.HasMore)
	b.buf = append(b.buf, `,"currentSequenceNumber":`...)
	b.buf = strconv.AppendInt(b.buf, res.Head, 10)
	b.write("}\n")
	b.finish()
}
