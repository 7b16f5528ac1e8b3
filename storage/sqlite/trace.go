package sqlite

import (
	"context"

	"github.com/eventkit-go/eventstore/internal/tracing"
)

// span starts the span of the storage call op (see tracing.StorageCall).
func (s *store) span(ctx *context.Context, op string) func() {
	return tracing.StorageCall(s.tracer, ctx, "sqlite", op)
}
