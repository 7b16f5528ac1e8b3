// Package benchfold holds the projection in Go that the rebuild
// benchmarks compare with the function language's
// (storagetest.RebuildDefinition): written with package typed, as a user
// would write it. It is a package of its own so that the benchmarks of the
// root package and of every backend share it, and storagetest need not
// import typed.
package benchfold

import (
	"testing"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/storagetest"
	"github.com/eventkit-go/eventstore/typed"
)

// Placed is the data of the benchmarks' events: {"total": 12.5, "sku": "A-1"}.
type Placed struct {
	Total float64 `json:"total"`
	SKU   string  `json:"sku"`
}

// Totals is the state of the fold: sku set, total added, count incremented.
type Totals struct {
	SKU   string  `json:"sku"`
	Total float64 `json:"total"`
	Count int     `json:"count"`
}

// Typed returns the fold of storagetest.RebuildDefinition as a projection
// in Go built with package typed, over events of eventType of feed.
func Typed(name, feed, eventType string, aggregated bool) (eventstore.CodeProjection, error) {
	reg := typed.NewRegistry(nil)
	if err := typed.Register[Placed](reg, eventType); err != nil {
		return eventstore.CodeProjection{}, err
	}
	p, err := typed.NewProjection(reg, name, feed, &typed.ProjectionOptions{Aggregated: aggregated},
		typed.On(func(s *Totals, e typed.EventOf[Placed]) error {
			s.SKU = e.Value.SKU
			s.Total += e.Value.Total
			s.Count++
			return nil
		}))
	if err != nil {
		return eventstore.CodeProjection{}, err
	}
	return p.CodeProjection(), nil
}

// RebuildInGo runs storagetest.BenchmarkRebuildInGo on s, whose feed
// "order" holds events Placed: "typed" with Typed, "hook" with
// storagetest.RebuildCode on the root package's hook alone. The root
// package's and every backend's benchmarks share it.
func RebuildInGo(b *testing.B, s storage.Storage, events int, aggregated bool) {
	b.Run("typed", func(b *testing.B) {
		storagetest.BenchmarkRebuildInGo(b, s, "order", "Placed", events, aggregated, func(name string) eventstore.CodeProjection {
			cp, err := Typed(name, "order", "Placed", aggregated)
			if err != nil {
				b.Fatal(err)
			}
			return cp
		})
	})
	b.Run("hook", func(b *testing.B) {
		storagetest.BenchmarkRebuildInGo(b, s, "order", "Placed", events, aggregated, func(name string) eventstore.CodeProjection {
			return storagetest.RebuildCode(name, "order", "Placed", aggregated)
		})
	})
}
