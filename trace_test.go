package eventstore_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/memory"
	"github.com/eventkit-go/eventstore/storage/postgres"
	"github.com/eventkit-go/eventstore/storage/sqlite"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// tracedBackend opens a backend whose storage spans go to tp.
type tracedBackend struct {
	name string
	open func(t *testing.T, tp trace.TracerProvider) storage.Storage
}

var tracedBackends = []tracedBackend{
	{"memory", func(*testing.T, trace.TracerProvider) storage.Storage { return memory.New() }},
	{"sqlite", func(t *testing.T, tp trace.TracerProvider) storage.Storage {
		s, err := sqlite.Open(filepath.Join(t.TempDir(), "trace.db"), &sqlite.Options{TracerProvider: tp})
		require.NoError(t, err)
		return s
	}},
	{"postgres", func(t *testing.T, tp trace.TracerProvider) storage.Storage {
		url := os.Getenv("EVENTSTORE_POSTGRES_URL")
		if url == "" {
			url = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
		}
		schema := fmt.Sprintf("es_trace_%d", time.Now().UnixNano())
		s, err := postgres.OpenURL(t.Context(), url, &postgres.Options{Schema: schema, TracerProvider: tp})
		if err != nil {
			if os.Getenv("EVENTSTORE_POSTGRES_REQUIRED") == "1" {
				t.Fatalf("PostgreSQL at %s: %v", url, err)
			}
			t.Skipf("PostgreSQL at %s: %v", url, err)
		}
		t.Cleanup(func() {
			conn, err := pgx.Connect(context.Background(), url)
			if err == nil {
				_, _ = conn.Exec(context.Background(), "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
				_ = conn.Close(context.Background())
			}
		})
		return s
	}},
}

// recorder returns a tracer provider that keeps every ended span.
func recorder(t *testing.T) (*sdktrace.TracerProvider, *tracetest.SpanRecorder) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, rec
}

func spansNamed(rec *tracetest.SpanRecorder, prefix string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if strings.HasPrefix(s.Name(), prefix) {
			out = append(out, s)
		}
	}
	return out
}

func attr(s sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.Emit()
		}
	}
	return ""
}

// noSecrets fails when an attribute of a recorded span holds one of the
// values (event data, ids).
func noSecrets(t *testing.T, rec *tracetest.SpanRecorder, values ...string) {
	t.Helper()
	for _, s := range rec.Ended() {
		check := func(where, text string) {
			for _, v := range values {
				assert.NotContains(t, text, v, "span %s %s", s.Name(), where)
			}
		}
		check("name", s.Name())
		for _, kv := range s.Attributes() {
			check(string(kv.Key), kv.Value.Emit())
		}
		for _, ev := range s.Events() {
			for _, kv := range ev.Attributes {
				check(ev.Name+"."+string(kv.Key), kv.Value.Emit())
			}
		}
	}
}

// TestTraceSaveLoadFeed checks the spans of a save, a load and a feed
// read on every backend: children of the caller's span, with the
// storage's statements as their children, never an id or the data; and
// the save's trace context stored in its events' metadata.
func TestTraceSaveLoadFeed(t *testing.T) {
	for _, b := range tracedBackends {
		t.Run(b.name, func(t *testing.T) {
			tp, rec := recorder(t)
			st, err := eventstore.New(b.open(t, tp), &eventstore.Options{TracerProvider: tp})
			require.NoError(t, err)
			defer st.Close()
			ctx, parent := tp.Tracer("test").Start(t.Context(), "request")
			const marker = "MARKER-7f3a"
			id := eventstore.NewEventID()
			_, err = st.Save(ctx, "order", "agg-secret-1", []eventstore.NewEvent{{ID: id, Type: "Placed",
				Data: []byte(`{"note":"` + marker + `"}`), Metadata: eventstore.Metadata{CorrelationID: "corr-secret"}}}, nil)
			require.NoError(t, err)
			agg, err := st.Load(ctx, "order", "agg-secret-1")
			require.NoError(t, err)
			_, err = st.ReadFeed(ctx, "order", 0, nil)
			require.NoError(t, err)
			parent.End()

			saves := spansNamed(rec, "eventstore.Save")
			require.Len(t, saves, 1)
			save := saves[0]
			assert.Equal(t, parent.SpanContext().SpanID(), save.Parent().SpanID(), "the save continues the caller's trace")
			assert.Equal(t, "order", attr(save, "eventstore.aggregate.type"))
			assert.Equal(t, "1", attr(save, "eventstore.event.count"))
			assert.Equal(t, "1", attr(save, "eventstore.aggregate.version"))
			assert.Equal(t, "false", attr(save, "eventstore.save.duplicate"))
			require.Len(t, spansNamed(rec, "eventstore.Load"), 1)
			require.Len(t, spansNamed(rec, "eventstore.ReadFeed"), 1)

			if b.name != "memory" {
				prefix := map[string]string{"sqlite": "sqlite ", "postgres": "postgresql "}[b.name]
				var under int
				for _, s := range spansNamed(rec, prefix) {
					if s.Parent().SpanID() == save.SpanContext().SpanID() {
						under++
					}
				}
				assert.Positive(t, under, "the save's storage work is traced as its children")
			}

			// Stored with the events, the save's context: later work links to it.
			require.Len(t, agg.Events, 1)
			tp0 := agg.Events[0].Metadata.Values["traceparent"]
			assert.Contains(t, tp0, save.SpanContext().TraceID().String())
			assert.Contains(t, tp0, save.SpanContext().SpanID().String())
			assert.Equal(t, "corr-secret", agg.Events[0].Metadata.CorrelationID, "the caller's metadata is kept")
			noSecrets(t, rec, marker, id, "agg-secret-1", "corr-secret")
		})
	}
}

// TestTraceProjectionLinksSave checks that a projector's page is a span
// linked to the save whose events it applied.
func TestTraceProjectionLinksSave(t *testing.T) {
	tp, rec := recorder(t)
	st, err := eventstore.New(memory.New(), &eventstore.Options{TracerProvider: tp})
	require.NoError(t, err)
	defer st.Close()
	p := eventstore.NewProjector(st, nil)
	ctx := t.Context()
	require.NoError(t, p.Create(ctx, eventstore.Definition{Name: "counts", Feed: "order", Aggregated: true,
		Handlers: []eventstore.Handler{{EventType: "Placed", Functions: []eventstore.Function{{Name: "inc", TargetSelector: "$.projection.n"}}}}}))
	_, err = st.Save(ctx, "order", "o-1", []eventstore.NewEvent{{ID: eventstore.NewEventID(), Type: "Placed"}}, nil)
	require.NoError(t, err)
	_, err = p.Aggregated(ctx, "counts")
	require.NoError(t, err)

	saves := spansNamed(rec, "eventstore.Save")
	require.Len(t, saves, 1)
	pages := spansNamed(rec, "eventstore.projection.Apply")
	require.NotEmpty(t, pages)
	var linked bool
	for _, pg := range pages {
		for _, l := range pg.Links() {
			linked = linked || l.SpanContext.SpanID() == saves[0].SpanContext().SpanID()
		}
		assert.Equal(t, "counts", attr(pg, "eventstore.projection.name"))
	}
	assert.True(t, linked, "a page links to the save of its events")
	catchUps := spansNamed(rec, "eventstore.projection.CatchUp")
	require.NotEmpty(t, catchUps)
}

// TestTraceOffByDefault checks that a Store without a provider, while
// OpenTelemetry's global provider is the default one, stores no trace
// context even when the caller's context carries one.
func TestTraceOffByDefault(t *testing.T) {
	tp, _ := recorder(t)
	st, err := eventstore.New(memory.New(), nil)
	require.NoError(t, err)
	defer st.Close()
	ctx, span := tp.Tracer("test").Start(t.Context(), "request")
	defer span.End()
	_, err = st.Save(ctx, "order", "o-1", []eventstore.NewEvent{{ID: eventstore.NewEventID(), Type: "Placed"}}, nil)
	require.NoError(t, err)
	agg, err := st.Load(ctx, "order", "o-1")
	require.NoError(t, err)
	assert.True(t, agg.Events[0].Metadata.IsZero(), "nothing traced, nothing stored: %+v", agg.Events[0].Metadata)
}
