package archive

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"slices"
	"strings"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/internal/limits"
)

// ErrDifferent is the error of Verify when the stores differ.
var ErrDifferent = errors.New("the stores hold different events")

// verifyPage is the aggregates, and the versions of one aggregate, Verify
// reads at a time.
const verifyPage = limits.MaxListLimit

// Verify checks that a and b hold the same events: the same aggregate
// types with the same counts (Store.Feeds), and for every aggregate, in
// id order, the same version and the same checksum over its events' ids,
// types, data, encrypted data, metadata, versions and sequence numbers, in
// sequence order. Positions and cursors are not compared (an import
// renumbers them), nor recorded times (Verify compares stores, not their
// history of saves; Import keeps them). The first difference is an error naming
// it that wraps ErrDifferent; a read that fails, its error. It holds a
// page of aggregates and one page of events at a time.
func Verify(ctx context.Context, a, b *eventstore.Store) error {
	fa, err := sortedFeeds(ctx, a)
	if err != nil {
		return err
	}
	fb, err := sortedFeeds(ctx, b)
	if err != nil {
		return err
	}
	for i := 0; i < max(len(fa), len(fb)); i++ {
		switch {
		case i >= len(fa) || (i < len(fb) && fb[i].AggregateType < fa[i].AggregateType):
			return fmt.Errorf("archive: verify: aggregate type %s is only in the second store: %w", fb[i].AggregateType, ErrDifferent)
		case i >= len(fb) || fa[i].AggregateType < fb[i].AggregateType:
			return fmt.Errorf("archive: verify: aggregate type %s is only in the first store: %w", fa[i].AggregateType, ErrDifferent)
		case fa[i] != fb[i]:
			x, y := fa[i], fb[i]
			return fmt.Errorf("archive: verify: aggregate type %s: %d aggregates, %d batches, %d events against %d, %d, %d: %w",
				x.AggregateType, x.AggregateCount, x.BatchCount, x.EventCount, y.AggregateCount, y.BatchCount, y.EventCount, ErrDifferent)
		}
	}
	for _, f := range fa {
		if err := verifyType(ctx, a, b, f.AggregateType); err != nil {
			return err
		}
	}
	return nil
}

func sortedFeeds(ctx context.Context, st *eventstore.Store) ([]eventstore.FeedInfo, error) {
	fs, err := st.Feeds(ctx)
	if err != nil {
		return nil, fmt.Errorf("archive: verify: %w", err)
	}
	slices.SortFunc(fs, func(x, y eventstore.FeedInfo) int { return strings.Compare(x.AggregateType, y.AggregateType) })
	return fs, nil
}

// verifyType compares the aggregates of one type, page by page.
func verifyType(ctx context.Context, a, b *eventstore.Store, typ string) error {
	for skip := 0; ; {
		pa, err := a.Aggregates(ctx, typ, &eventstore.AggregateListOptions{Skip: skip, Limit: verifyPage})
		if err != nil {
			return fmt.Errorf("archive: verify: %w", err)
		}
		pb, err := b.Aggregates(ctx, typ, &eventstore.AggregateListOptions{Skip: skip, Limit: verifyPage})
		if err != nil {
			return fmt.Errorf("archive: verify: %w", err)
		}
		for i, x := range pa.Aggregates {
			if i >= len(pb.Aggregates) {
				return fmt.Errorf("archive: verify: aggregate %s/%s is only in the first store: %w", typ, x.ID, ErrDifferent)
			}
			y := pb.Aggregates[i]
			switch {
			case x.ID < y.ID:
				return fmt.Errorf("archive: verify: aggregate %s/%s is only in the first store: %w", typ, x.ID, ErrDifferent)
			case y.ID < x.ID:
				return fmt.Errorf("archive: verify: aggregate %s/%s is only in the second store: %w", typ, y.ID, ErrDifferent)
			case x.Version != y.Version:
				return fmt.Errorf("archive: verify: aggregate %s/%s is at version %d against %d: %w", typ, x.ID, x.Version, y.Version, ErrDifferent)
			}
			ca, err := checksum(ctx, a, typ, x.ID)
			if err != nil {
				return err
			}
			cb, err := checksum(ctx, b, typ, x.ID)
			if err != nil {
				return err
			}
			if ca != cb {
				return fmt.Errorf("archive: verify: aggregate %s/%s: its events differ (checksum %x against %x): %w", typ, x.ID, ca[:8], cb[:8], ErrDifferent)
			}
		}
		if len(pb.Aggregates) > len(pa.Aggregates) {
			return fmt.Errorf("archive: verify: aggregate %s/%s is only in the second store: %w", typ, pb.Aggregates[len(pa.Aggregates)].ID, ErrDifferent)
		}
		if !pa.HasMore {
			return nil
		}
		skip += len(pa.Aggregates)
	}
}

// checksum is the SHA-256 of an aggregate's events, read a page of
// versions at a time.
func checksum(ctx context.Context, st *eventstore.Store, typ, id string) ([sha256.Size]byte, error) {
	h := sha256.New()
	for after := int64(0); ; {
		agg, more, err := st.LoadRange(ctx, typ, id, after, verifyPage)
		if err != nil {
			return [sha256.Size]byte{}, fmt.Errorf("archive: verify: %w", err)
		}
		for i := range agg.Events {
			e := &agg.Events[i]
			writeInt(h, e.Version)
			writeInt(h, e.Sequence)
			writeString(h, e.ID)
			writeString(h, e.Type)
			writeString(h, string(e.Data))
			writeString(h, e.EncryptedData)
			writeMetadata(h, e.Metadata)
			after = e.Version
		}
		if !more || len(agg.Events) == 0 {
			break
		}
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum, nil
}

// writeMetadata writes m: its correlation and causation ids, then its
// values in key order.
func writeMetadata(h hash.Hash, m eventstore.Metadata) {
	writeString(h, m.CorrelationID)
	writeString(h, m.CausationID)
	keys := make([]string, 0, len(m.Values))
	for k := range m.Values {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	writeInt(h, int64(len(keys)))
	for _, k := range keys {
		writeString(h, k)
		writeString(h, m.Values[k])
	}
}

// writeString and writeInt write length-prefixed fields, so that no two
// different sequences of fields hash the same bytes.
func writeString(h hash.Hash, s string) {
	writeInt(h, int64(len(s)))
	h.Write([]byte(s))
}

func writeInt(h hash.Hash, v int64) {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(v))
	h.Write(b[:])
}
