package postgres

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync"

	"github.com/eventkit-go/eventstore/internal/tracing"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// NewTracer returns a pgx tracer that makes a span of every statement and
// batch run on a pool's connections, a child of the span of the store's
// call that ran it: named by the statement's name in this package (such
// as "postgresql feedType"), never with its arguments. OpenURL installs
// one on the pool it makes (with Options.TracerProvider); for a pool of
// your own set it as the pool's ConnConfig.Tracer before making the pool.
// A nil tp follows OpenTelemetry's global provider.
func NewTracer(tp trace.TracerProvider) pgx.QueryTracer {
	return &queryTracer{t: tracing.New(tp)}
}

// queryTracer is the tracer of NewTracer. It implements pgx.QueryTracer
// and pgx.BatchTracer.
type queryTracer struct {
	t     *tracing.Tracer
	names sync.Map // SQL text -> statement name, registered by open
}

// register names the statements of a store opened on the tracer's pool.
func (q *queryTracer) register(sql *statements) {
	v := reflect.ValueOf(sql).Elem()
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.String && f.String() != "" {
			q.names.LoadOrStore(f.String(), v.Type().Field(i).Name)
		}
	}
}

// registerTracer registers sql with pool's tracer, when it is one of
// ours, and returns the tracer of the store's calls: the pool's, or one
// that follows the global provider.
func registerTracer(cfg *pgx.ConnConfig, sql *statements) *tracing.Tracer {
	if q, ok := cfg.Tracer.(*queryTracer); ok {
		q.register(sql)
		return q.t
	}
	return tracing.New(nil)
}

// span starts the span of the storage call op (see tracing.StorageCall):
// an append waits in the group commit's queue and runs in the group's
// transaction, whose statements are not the caller's children.
func (s *store) span(ctx *context.Context, op string) func() {
	return tracing.StorageCall(s.tracer, ctx, "postgresql", op)
}

// name returns the name of the statement sql, or its first keyword (as
// "SELECT") for a statement this package does not name.
func (q *queryTracer) name(sql string) string {
	if n, ok := q.names.Load(sql); ok {
		return n.(string)
	}
	s := strings.TrimSpace(sql)
	if i := strings.IndexAny(s, " \n\t("); i > 0 {
		s = s[:i]
	}
	if len(s) > 16 {
		s = s[:16]
	}
	return strings.ToUpper(s)
}

type spanKey struct{}

// start starts a statement's span.
func (q *queryTracer) start(ctx context.Context, name string) context.Context {
	if !q.t.Enabled() || !trace.SpanFromContext(ctx).IsRecording() {
		// Statements are traced only within a traced call: a pool's
		// background work (listeners, leases) makes no root spans.
		return ctx
	}
	ctx, span := q.t.Start(ctx, "postgresql "+name, trace.SpanKindClient)
	span.SetAttributes(attribute.String("db.system.name", "postgresql"), attribute.String("db.query.summary", name))
	return context.WithValue(ctx, spanKey{}, span)
}

// end ends the span start put in ctx.
func end(ctx context.Context, err error) {
	span, ok := ctx.Value(spanKey{}).(tracing.Span)
	if !ok {
		return
	}
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr):
		span.SetAttributes(attribute.String("db.response.status_code", pgErr.Code))
		span.Fail(pgErr.Code, true)
	case err != nil:
		span.Fail("connection", true)
	}
	span.End()
}

// TraceQueryStart implements pgx.QueryTracer.
func (q *queryTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	return q.start(ctx, q.name(data.SQL))
}

// TraceQueryEnd implements pgx.QueryTracer.
func (q *queryTracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryEndData) {
	end(ctx, data.Err)
}

// TraceBatchStart implements pgx.BatchTracer: a batch (a pipeline of
// statements in one round trip) is one span.
func (q *queryTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchStartData) context.Context {
	names := make([]string, 0, min(data.Batch.Len(), maxBatchNames))
	for _, qq := range data.Batch.QueuedQueries {
		if len(names) == maxBatchNames {
			break
		}
		names = append(names, q.name(qq.SQL))
	}
	ctx = q.start(ctx, "batch")
	if span, ok := ctx.Value(spanKey{}).(tracing.Span); ok {
		span.SetAttributes(attribute.StringSlice("eventstore.db.statements", names),
			attribute.Int("db.operation.batch.size", data.Batch.Len()))
	}
	return ctx
}

// maxBatchNames bounds the statement names a batch's span lists.
const maxBatchNames = 16

// TraceBatchQuery implements pgx.BatchTracer.
func (q *queryTracer) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

// TraceBatchEnd implements pgx.BatchTracer.
func (q *queryTracer) TraceBatchEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchEndData) {
	end(ctx, data.Err)
}
