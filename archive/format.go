package archive

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/internal/jsonenc"
	"github.com/eventkit-go/eventstore/storage"
)

// Format and Version are the header's "format" and "version": the
// format this package writes and the only version it reads.
const (
	Format  = "eventstore-archive"
	Version = 1
)

// MaxLineBytes bounds one line of an archive, "\n" included: a Writer
// refuses a batch that would be longer, a Reader a line that is.
const MaxLineBytes = 64 << 20

// Batch is one line of an archive: the Events one save appended to the
// aggregate (AggregateType, AggregateID), the Version it produced and
// when it was recorded.
type Batch struct {
	AggregateType, AggregateID string
	Version                    int64
	RecordedAt                 time.Time
	Events                     []Event
}

// Event is one event of a Batch, as it was saved.
type Event struct {
	ID            string
	Type          string
	Data          json.RawMessage // nil or a JSON object
	EncryptedData string
	Metadata      eventstore.Metadata
}

// Kinds of the record lines of an archive, beside batch lines: a
// projection definition, a reaction definition, a tenant.
const (
	KindProjection = "projection"
	KindReaction   = "reaction"
	KindTenant     = "tenant"
)

// Record is one line of an archive that is not a batch: Kind says which
// of its fields is set.
type Record struct {
	Kind string
	// Projection is a projection definition (KindProjection) in its JSON
	// form (the body of PUT /projections/definitions/{name}), with its
	// SigningSecret, which that form leaves out.
	Projection    json.RawMessage
	SigningSecret string
	// Reaction is a reaction definition (KindReaction) in its JSON form
	// (reactions.Definition).
	Reaction json.RawMessage
	// Tenant is a tenant (KindTenant): the batches after it, up to the
	// next tenant, are its events.
	Tenant Tenant
}

// Tenant is a tenant of a project (package tenancy).
type Tenant struct {
	ID        string `json:"id"`
	Reference string `json:"reference,omitempty"`
}

// recordLine is a Record as JSON; "kind" comes first, which is how a
// Reader tells a record from a batch.
type recordLine struct {
	Kind          string          `json:"kind"`
	Projection    json.RawMessage `json:"projection,omitempty"`
	SigningSecret string          `json:"signingSecret,omitempty"`
	Reaction      json.RawMessage `json:"reaction,omitempty"`
	Tenant        *Tenant         `json:"tenant,omitempty"`
}

// recordPrefix starts every record line.
var recordPrefix = []byte(`{"kind":`)

// header is the first line of an archive.
type header struct {
	Format  string `json:"format"`
	Version int    `json:"version"`
}

// batchLine and eventLine are a Batch and an Event as JSON.
type batchLine struct {
	AggregateType string      `json:"aggregateType"`
	AggregateID   string      `json:"aggregateId"`
	Version       int64       `json:"version"`
	RecordedAt    time.Time   `json:"recordedAt"`
	Events        []eventLine `json:"events"`
}

type eventLine struct {
	ID            string            `json:"id"`
	Type          string            `json:"type"`
	Data          json.RawMessage   `json:"data,omitempty"`
	EncryptedData string            `json:"encryptedData,omitempty"`
	Metadata      map[string]string `json:"metadata,omitempty"`
}

// The reserved keys of the metadata object.
const (
	keyCorrelation = "correlationId"
	keyCausation   = "causationId"
)

func metadataOf(o map[string]string) eventstore.Metadata {
	var m eventstore.Metadata
	for k, v := range o {
		switch k {
		case keyCorrelation:
			m.CorrelationID = v
		case keyCausation:
			m.CausationID = v
		default:
			if m.Values == nil {
				m.Values = make(map[string]string, len(o))
			}
			m.Values[k] = v
		}
	}
	return m
}

// Writer writes an archive: the header, then one line per WriteBatch.
// It buffers: call Flush at the end (and whenever what was written must
// be on w). A Writer is not safe for concurrent use.
type Writer struct {
	w      *bufio.Writer
	header bool
	err    error
	line   []byte
	events atomic.Int64 // of the batches written
}

// Events returns the number of events of the batches written so far. It
// may be called from another goroutine, to report progress.
func (w *Writer) Events() int64 { return w.events.Load() }

// NewWriter returns a Writer of an archive to w. It writes nothing until
// WriteBatch or Flush.
func NewWriter(w io.Writer) *Writer {
	return &Writer{w: bufio.NewWriterSize(w, 64<<10)}
}

func (w *Writer) writeHeader() error {
	if w.header || w.err != nil {
		return w.err
	}
	w.header = true
	b, _ := json.Marshal(header{Format: Format, Version: Version})
	_, w.err = w.w.Write(append(b, '\n'))
	return w.err
}

// WriteBatch writes b as one line. A batch without events or aggregate,
// with a version below 1, data that is not a JSON object or a line longer
// than MaxLineBytes is refused with an error wrapping eventstore.ErrInvalid,
// and nothing is written. An error of the underlying writer is returned
// by this and every later call.
func (w *Writer) WriteBatch(b Batch) error {
	return w.writeBatch(&b, false)
}

// writeBatch is WriteBatch; with stored, b was read from a Store, which
// checked its events' data on save: data that is compact already is
// written without being validated again (see appendBatch).
func (w *Writer) writeBatch(b *Batch, stored bool) error {
	if err := w.writeHeader(); err != nil {
		return err
	}
	if err := checkBatch(b); err != nil {
		return fmt.Errorf("archive: write batch: %w", err)
	}
	line, err := appendBatch(w.line[:0], b, stored)
	if err != nil {
		return fmt.Errorf("archive: write batch %s/%s: %v: %w", b.AggregateType, b.AggregateID, err, eventstore.ErrInvalid)
	}
	w.line = line
	if len(line) > MaxLineBytes {
		return fmt.Errorf("archive: write batch %s/%s: %d bytes, more than %d: %w", b.AggregateType, b.AggregateID, len(line), MaxLineBytes, eventstore.ErrInvalid)
	}
	if _, w.err = w.w.Write(line); w.err != nil {
		return w.err
	}
	w.events.Add(int64(len(b.Events)))
	return nil
}

// appendBatch appends b as a line, "\n" included, to dst: what
// encoding/json makes of its batchLine with SetEscapeHTML(false), without
// reflection. Event data goes through json.Compact, which also validates
// it, unless stored (data read from a Store, which is valid JSON: see
// jsonenc.AppendRaw) and compact already: then it is appended as it is.
func appendBatch(dst []byte, b *Batch, stored bool) ([]byte, error) {
	dst = append(dst, `{"aggregateType":`...)
	dst = jsonenc.AppendString(dst, b.AggregateType)
	dst = append(dst, `,"aggregateId":`...)
	dst = jsonenc.AppendString(dst, b.AggregateID)
	dst = append(dst, `,"version":`...)
	dst = strconv.AppendInt(dst, b.Version, 10)
	at := b.RecordedAt.UTC()
	if y := at.Year(); y < 0 || y > 9999 {
		return dst, fmt.Errorf("recordedAt year %d outside of [0,9999]", y)
	}
	dst = append(dst, `,"recordedAt":"`...)
	dst = at.AppendFormat(dst, time.RFC3339Nano)
	dst = append(dst, `","events":[`...)
	for i := range b.Events {
		e := &b.Events[i]
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"id":`...)
		dst = jsonenc.AppendString(dst, e.ID)
		dst = append(dst, `,"type":`...)
		dst = jsonenc.AppendString(dst, e.Type)
		if len(e.Data) > 0 {
			dst = append(dst, `,"data":`...)
			if stored {
				var err error
				if dst, err = jsonenc.AppendRaw(dst, e.Data); err != nil {
					return dst, fmt.Errorf("event %d: data: %v", i, err)
				}
			} else {
				buf := bytes.NewBuffer(dst)
				if err := json.Compact(buf, e.Data); err != nil {
					return dst, fmt.Errorf("event %d: data: %v", i, err)
				}
				dst = buf.Bytes()
			}
		}
		if e.EncryptedData != "" {
			dst = append(dst, `,"encryptedData":`...)
			dst = jsonenc.AppendString(dst, e.EncryptedData)
		}
		if !e.Metadata.IsZero() {
			dst = storage.AppendMetadata(append(dst, `,"metadata":`...), e.Metadata)
		}
		dst = append(dst, '}')
	}
	return append(dst, "]}\n"...), nil
}

// writeLine writes v as one line; what names it in errors.
func (w *Writer) writeLine(v any, what string) error {
	buf := bytes.NewBuffer(w.line[:0])
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil { // Encode ends the line with "\n"
		return fmt.Errorf("archive: write %s: %v: %w", what, err, eventstore.ErrInvalid)
	}
	w.line = buf.Bytes()
	if len(w.line) > MaxLineBytes {
		return fmt.Errorf("archive: write %s: %d bytes, more than %d: %w", what, len(w.line), MaxLineBytes, eventstore.ErrInvalid)
	}
	_, w.err = w.w.Write(w.line)
	return w.err
}

// WriteRecord writes r as one line. A record of an unknown Kind, without
// the field of its kind, or whose definition is not a JSON object, is
// refused with an error wrapping eventstore.ErrInvalid.
func (w *Writer) WriteRecord(r Record) error {
	if err := w.writeHeader(); err != nil {
		return err
	}
	if err := checkRecord(&r); err != nil {
		return fmt.Errorf("archive: write record: %w", err)
	}
	l := recordLine{Kind: r.Kind, Projection: r.Projection, SigningSecret: r.SigningSecret, Reaction: r.Reaction}
	if r.Kind == KindTenant {
		l.Tenant = &r.Tenant
	}
	return w.writeLine(&l, r.Kind+" record")
}

// Flush writes the header if nothing was written yet (an archive of no
// batches is the header alone) and what is buffered to the underlying
// writer.
func (w *Writer) Flush() error {
	if err := w.writeHeader(); err != nil {
		return err
	}
	if err := w.w.Flush(); err != nil {
		w.err = err
	}
	return w.err
}

// checkRecord says what is wrong with r, wrapping eventstore.ErrInvalid.
func checkRecord(r *Record) error {
	object := func(b json.RawMessage) bool {
		t := bytes.TrimSpace(b)
		return len(t) > 0 && t[0] == '{'
	}
	switch r.Kind {
	case KindProjection:
		if !object(r.Projection) {
			return fmt.Errorf("a projection record needs the definition as a JSON object: %w", eventstore.ErrInvalid)
		}
	case KindReaction:
		if !object(r.Reaction) {
			return fmt.Errorf("a reaction record needs the definition as a JSON object: %w", eventstore.ErrInvalid)
		}
	case KindTenant:
		if r.Tenant.ID == "" {
			return fmt.Errorf("a tenant record needs the tenant's id: %w", eventstore.ErrInvalid)
		}
	default:
		return fmt.Errorf("unknown record kind %q: this version reads the kinds %s, %s and %s beside batches "+
			"(an archive of a later version?): %w", r.Kind, KindProjection, KindReaction, KindTenant, eventstore.ErrInvalid)
	}
	return nil
}

// checkBatch says what is wrong with b, wrapping eventstore.ErrInvalid.
func checkBatch(b *Batch) error {
	switch {
	case b.AggregateType == "" || b.AggregateID == "":
		return fmt.Errorf("aggregateType and aggregateId must not be empty: %w", eventstore.ErrInvalid)
	case b.Version < 1:
		return fmt.Errorf("%s/%s: version must be at least 1, got %d: %w", b.AggregateType, b.AggregateID, b.Version, eventstore.ErrInvalid)
	case b.RecordedAt.IsZero():
		return fmt.Errorf("%s/%s: recordedAt is required: %w", b.AggregateType, b.AggregateID, eventstore.ErrInvalid)
	case len(b.Events) == 0:
		return fmt.Errorf("%s/%s: a batch has at least one event: %w", b.AggregateType, b.AggregateID, eventstore.ErrInvalid)
	}
	for i, e := range b.Events {
		switch {
		case e.ID == "" || e.Type == "":
			return fmt.Errorf("%s/%s: event %d: id and type must not be empty: %w", b.AggregateType, b.AggregateID, i, eventstore.ErrInvalid)
		case e.Data != nil && (len(bytes.TrimSpace(e.Data)) == 0 || bytes.TrimSpace(e.Data)[0] != '{'):
			return fmt.Errorf("%s/%s: event %d: data must be a JSON object: %w", b.AggregateType, b.AggregateID, i, eventstore.ErrInvalid)
		}
	}
	return nil
}

// Reader reads an archive batch by batch, holding one line at a time.
// A Reader is not safe for concurrent use.
type Reader struct {
	s      *bufio.Scanner
	line   int
	header bool
	err    error
	events atomic.Int64 // of the batches read
}

// Events returns the number of events of the batches read so far. It may
// be called from another goroutine, to report progress.
func (r *Reader) Events() int64 { return r.events.Load() }

// NewReader returns a Reader of the archive r.
func NewReader(r io.Reader) *Reader {
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 0, 64<<10), MaxLineBytes)
	s.Split(scanLines)
	return &Reader{s: s}
}

// errTruncated is the split error of a last line without its "\n".
var errTruncated = errors.New("the line is truncated (no end of line)")

// scanLines is bufio.ScanLines that refuses a last line without "\n"
// and keeps "\r" (a line is JSON, which allows it as space).
func scanLines(data []byte, atEOF bool) (int, []byte, error) {
	if i := bytes.IndexByte(data, '\n'); i >= 0 {
		return i + 1, data[:i], nil
	}
	if atEOF && len(data) > 0 {
		return 0, nil, errTruncated
	}
	return 0, nil, nil
}

// Line returns the number of the line the last Next read (1 is the
// header), or failed on.
func (r *Reader) Line() int { return r.line }

// Next returns the next batch, or io.EOF after the last one. A bad
// archive fails with an error naming the line that wraps
// eventstore.ErrInvalid: a wrong format or version, a line longer than
// MaxLineBytes or truncated, a line that is not a valid batch, and a
// record (see Read), which Next does not skip. An error is returned by
// every later call.
func (r *Reader) Next() (Batch, error) {
	b, rec, err := r.Read()
	if err == nil && b == nil {
		err = r.invalid("a %s record: this archive holds more than batches (read it with Read or ImportProject)", rec.Kind)
		r.err = err
	}
	if err != nil {
		return Batch{}, err
	}
	return *b, nil
}

// Read returns the next line: a batch, or else a record (a definition or
// a tenant), or io.EOF after the last line. Errors are those of Next; a
// record of an unknown kind is one (an archive of a later version), not
// skipped, so that nothing of an archive is left out unnoticed.
func (r *Reader) Read() (*Batch, Record, error) {
	if r.err != nil {
		return nil, Record{}, r.err
	}
	b, rec, err := r.read()
	if err != nil {
		r.err = err
	}
	return b, rec, err
}

func (r *Reader) read() (*Batch, Record, error) {
	if !r.header {
		line, err := r.scan()
		if err == io.EOF {
			r.line = 1
			return nil, Record{}, r.invalid("no header: the archive is empty")
		}
		if err != nil {
			return nil, Record{}, err
		}
		var h header
		if err := json.Unmarshal(line, &h); err != nil || h.Format != Format {
			return nil, Record{}, r.invalid("not an archive: the header must be {\"format\":%q,\"version\":%d}", Format, Version)
		}
		if h.Version != Version {
			return nil, Record{}, r.invalid("archive version %d, this reader reads version %d", h.Version, Version)
		}
		r.header = true
	}
	line, err := r.scan()
	if err != nil {
		return nil, Record{}, err
	}
	if bytes.HasPrefix(line, recordPrefix) {
		rec, err := r.record(line)
		return nil, rec, err
	}
	var l batchLine
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil {
		return nil, Record{}, r.invalid("not a batch: %v", err)
	}
	if dec.More() {
		return nil, Record{}, r.invalid("not a batch: more than one JSON value")
	}
	b := Batch{AggregateType: l.AggregateType, AggregateID: l.AggregateID, Version: l.Version,
		RecordedAt: l.RecordedAt, Events: make([]Event, len(l.Events))}
	for i, e := range l.Events {
		if string(e.Data) == "null" {
			e.Data = nil
		}
		b.Events[i] = Event{ID: e.ID, Type: e.Type, Data: e.Data, EncryptedData: e.EncryptedData,
			Metadata: metadataOf(e.Metadata)}
	}
	if err := checkBatch(&b); err != nil {
		return nil, Record{}, fmt.Errorf("archive: line %d: %w", r.line, err)
	}
	r.events.Add(int64(len(b.Events)))
	return &b, Record{}, nil
}

// record decodes a record line.
func (r *Reader) record(line []byte) (Record, error) {
	var l recordLine
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil {
		return Record{}, r.invalid("not a record: %v", err)
	}
	if dec.More() {
		return Record{}, r.invalid("not a record: more than one JSON value")
	}
	rec := Record{Kind: l.Kind, Projection: l.Projection, SigningSecret: l.SigningSecret, Reaction: l.Reaction}
	if l.Tenant != nil {
		rec.Tenant = *l.Tenant
	}
	if err := checkRecord(&rec); err != nil {
		return Record{}, fmt.Errorf("archive: line %d: %w", r.line, err)
	}
	return rec, nil
}

// scan reads the next line, io.EOF at the end.
func (r *Reader) scan() ([]byte, error) {
	if r.s.Scan() {
		r.line++
		return r.s.Bytes(), nil
	}
	err := r.s.Err()
	switch {
	case err == nil:
		return nil, io.EOF
	case errors.Is(err, errTruncated):
		r.line++
		return nil, r.invalid("%v", err)
	case errors.Is(err, bufio.ErrTooLong):
		r.line++
		return nil, r.invalid("the line is longer than %d bytes", MaxLineBytes)
	}
	return nil, fmt.Errorf("archive: read line %d: %w", r.line+1, err)
}

func (r *Reader) invalid(format string, args ...any) error {
	return fmt.Errorf("archive: line %d: %s: %w", r.line, fmt.Sprintf(format, args...), eventstore.ErrInvalid)
}
