package postgres

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/eventkit-go/eventstore/storage"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// Loads and feed reads return up to thousands of events per query, and
// pgx's Scan, which converts each column through its type registry,
// allocates per column: a profile of a 1,000-event load showed scanEvents
// at 35 % of the client's CPU, most of it in Scan and the allocator.
// rowDecoder reads the columns' wire values itself instead. Strings that
// repeat (aggregate types, aggregate ids, event types) are shared, event
// ids are cut from one string per page and event data from shared blocks.

// Wire types of the columns of selectCols, in order, after the leading
// columns a query may put before them.
var eventColumnTypes = [...]uint32{
	pgtype.Int8OID,        // position
	pgtype.TextOID,        // aggregate_type
	pgtype.TextOID,        // aggregate_id
	pgtype.TextOID,        // event_id
	pgtype.TextOID,        // event_type
	pgtype.ByteaOID,       // data
	pgtype.Int8OID,        // version
	pgtype.Int8OID,        // sequence
	pgtype.TimestamptzOID, // recorded_at
	pgtype.Int8OID,        // feed_sequence
	pgtype.TextOID,        // encrypted_data
	pgtype.TextOID,        // metadata
}

// pgEpochMicros is PostgreSQL's timestamp epoch, 2000-01-01 UTC, in Unix
// microseconds: binary timestamptz values count microseconds from it.
const pgEpochMicros = 946684800 * 1_000_000

// dataBlock is the size of the blocks event data is copied into.
const dataBlock = 64 << 10

// rowDecoder decodes rows of lead int8 columns followed by the event
// columns.
type rowDecoder struct {
	lead   int
	events []storage.Event
	lead0  []int64 // the first lead column of every row

	ids    []byte // the event ids of the page, concatenated
	idEnds []int  // where each event's id ends in ids
	block  []byte // the free part of the current data block
	types  map[string]string
	lastID string // the last aggregate id, shared by a batch's events
	budget budget // ends the read early, with a byte budget
}

// budget ends a read at a byte budget (storage.LoadQuery.MaxBytes,
// FeedQuery.MaxBytes). The rows after the cut are still received from the
// server (pgx reads them to the end of the result) but not kept.
type budget struct {
	max       int64 // 0: no budget
	byVersion bool  // end only between versions (loads)
	size      int64 // of the events taken
	last      int64 // the version of the last event taken
	cut       bool  // an event was refused
	// rows, when positive, is the most rows the query returns (its
	// LIMIT): the decoder sizes its events for them (storage.AppendEvent).
	rows int
}

// take reports whether e is to be kept, and counts it. It refuses e, and
// sets cut, once the events taken reach max, unless byVersion and e
// continues the last event's version.
func (b *budget) take(e *storage.Event) bool {
	if b.max > 0 && b.size >= b.max && (!b.byVersion || e.Version != b.last) {
		b.cut = true
		return false
	}
	b.size += storage.EventBytes(e)
	b.last = e.Version
	return true
}

// checkFormats reports whether rows carry the columns as decode expects.
func (d *rowDecoder) checkFormats(rows pgx.Rows) bool {
	fds := rows.FieldDescriptions()
	if len(fds) != d.lead+len(eventColumnTypes) {
		return false
	}
	for i, fd := range fds {
		want := uint32(pgtype.Int8OID)
		if i >= d.lead {
			want = eventColumnTypes[i-d.lead]
		}
		if fd.DataTypeOID != want {
			return false
		}
		// Text is the same bytes in both formats; the others must be
		// binary.
		if want != pgtype.TextOID && fd.Format != pgx.BinaryFormatCode {
			return false
		}
	}
	return true
}

// decode reads every row of rows, whose formats checkFormats accepted,
// and closes them.
func (d *rowDecoder) decode(rows pgx.Rows) error {
	defer rows.Close()
	for !d.budget.cut && rows.Next() {
		vals := rows.RawValues()
		if err := d.row(vals); err != nil {
			return err
		}
	}
	rows.Close() // reads the rows after a cut
	if err := rows.Err(); err != nil {
		return err
	}
	d.finishIDs()
	return nil
}

func (d *rowDecoder) row(vals [][]byte) error {
	for i := range d.lead {
		v, err := int8Value(vals[i])
		if err != nil {
			return err
		}
		if i == 0 {
			d.lead0 = append(d.lead0, v)
		}
	}
	vals = vals[d.lead:]
	var e storage.Event
	var err error
	if e.Position, err = int8Value(vals[0]); err != nil {
		return err
	}
	if e.Position == 0 && d.lead > 0 {
		return nil // no event: the row only carries the lead columns
	}
	e.AggregateType = d.intern(vals[1])
	if string(vals[2]) != d.lastID {
		d.lastID = string(vals[2])
	}
	e.AggregateID = d.lastID
	d.ids = append(d.ids, vals[3]...)
	d.idEnds = append(d.idEnds, len(d.ids))
	e.Type = d.intern(vals[4])
	if vals[5] != nil {
		e.Data = d.copyData(vals[5])
	}
	if e.Version, err = int8Value(vals[6]); err != nil {
		return err
	}
	if e.Sequence, err = int8Value(vals[7]); err != nil {
		return err
	}
	micros, err := int8Value(vals[8])
	if err != nil {
		return err
	}
	e.RecordedAt = time.UnixMicro(pgEpochMicros + micros).UTC()
	if e.FeedSequence, err = int8Value(vals[9]); err != nil {
		return err
	}
	if len(vals[10]) > 0 {
		e.EncryptedData = string(vals[10])
	}
	if len(vals[11]) > 0 {
		if e.Metadata, err = storage.ParseMetadata(vals[11]); err != nil {
			return err
		}
	}
	if !d.budget.take(&e) {
		d.ids, d.idEnds = d.ids[:len(d.ids)-len(vals[3])], d.idEnds[:len(d.idEnds)-1]
		return nil
	}
	d.events = storage.AppendEvent(d.events, e, d.budget.rows)
	return nil
}

// finishIDs sets the events' ids, cut from one string.
func (d *rowDecoder) finishIDs() {
	all := string(d.ids)
	start := 0
	for i := range d.events {
		end := d.idEnds[i]
		d.events[i].ID = all[start:end]
		start = end
	}
	d.ids, d.idEnds = nil, nil
}

// intern returns b as a string, shared with the earlier equal ones.
func (d *rowDecoder) intern(b []byte) string {
	if s, ok := d.types[string(b)]; ok {
		return s
	}
	if d.types == nil {
		d.types = make(map[string]string)
	}
	s := string(b)
	if len(d.types) < 256 {
		d.types[s] = s
	}
	return s
}

// copyData copies b into the current data block. The copy's capacity ends
// with it, so appending to one event's data cannot overwrite another's.
func (d *rowDecoder) copyData(b []byte) []byte {
	if len(b) == 0 {
		return []byte{}
	}
	if len(b) > len(d.block) {
		if len(b) >= dataBlock/4 {
			return append([]byte(nil), b...)
		}
		d.block = make([]byte, dataBlock)
	}
	n := copy(d.block, b)
	out := d.block[:n:n]
	d.block = d.block[n:]
	return out
}

func int8Value(b []byte) (int64, error) {
	if len(b) != 8 {
		return 0, fmt.Errorf("postgres: an int8 or timestamptz column of %d bytes", len(b))
	}
	return int64(binary.BigEndian.Uint64(b)), nil
}
