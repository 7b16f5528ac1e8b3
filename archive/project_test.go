package archive_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/archive"
	"github.com/eventkit-go/eventstore/reactions"
	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/memory"
	"github.com/eventkit-go/eventstore/storage/postgres"
	"github.com/eventkit-go/eventstore/storage/sqlite"
	"github.com/eventkit-go/eventstore/tenancy"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// projectKind opens a fresh project of its backend: Store, Projector,
// reactions Engine and tenants, closed at the end.
type projectKind struct {
	name string
	open func(t *testing.T) archive.Project
}

var projectKinds = map[string]projectKind{
	"memory": {"memory", func(t *testing.T) archive.Project {
		return newProject(t, memory.New(), memory.New(), func(context.Context, string) (storage.Storage, error) { return memory.New(), nil })
	}},
	"sqlite": {"sqlite", func(t *testing.T) archive.Project {
		dir := t.TempDir()
		open := func(name string) storage.Storage {
			s, err := sqlite.Open(filepath.Join(dir, name), nil)
			require.NoError(t, err)
			return s
		}
		return newProject(t, open("es.db"), open("es+tenants.db"), func(_ context.Context, id string) (storage.Storage, error) {
			return sqlite.Open(filepath.Join(dir, "es+t-"+id+".db"), nil)
		})
	}},
	"postgres": {"postgres", func(t *testing.T) archive.Project {
		url := postgresURL()
		ctx := context.Background()
		schema := fmt.Sprintf("es_archive_proj_%d_%d", os.Getpid(), schemas.Add(1))
		pool, err := pgxpool.New(ctx, url)
		require.NoError(t, err)
		t.Cleanup(func() {
			if conn, err := pgx.Connect(context.Background(), url); err == nil {
				_, _ = conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
				_, _ = conn.Exec(context.Background(), `DROP SCHEMA IF EXISTS "`+schema+`+tenants" CASCADE`)
				_ = conn.Close(context.Background())
			}
		})
		t.Cleanup(pool.Close)
		s, err := postgres.Open(ctx, pool, &postgres.Options{Schema: schema})
		require.NoError(t, err)
		reg, err := postgres.Open(ctx, pool, &postgres.Options{Schema: schema + "+tenants"})
		require.NoError(t, err)
		return newProject(t, s, reg, func(ctx context.Context, id string) (storage.Storage, error) {
			return postgres.Open(ctx, pool, &postgres.Options{Schema: schema, Tenant: id})
		})
	}},
}

func postgresURL() string {
	if url := os.Getenv("EVENTSTORE_POSTGRES_URL"); url != "" {
		return url
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

var noop = map[string]reactions.Func{"noop": func(context.Context, reactions.Delivery) error { return nil }}

func newProject(t *testing.T, s, registry storage.Storage, open func(context.Context, string) (storage.Storage, error)) archive.Project {
	t.Helper()
	ctx := context.Background()
	st := mustStore(t, s)
	p := archive.Project{Store: st, Projector: eventstore.NewProjector(st, nil)}
	var err error
	p.Reactions, err = reactions.New(st, s, &reactions.Options{Funcs: noop})
	require.NoError(t, err)
	p.Tenants, err = tenancy.New(ctx, tenancy.Options{Registry: registry, Open: open, Definitions: p.Projector, Reactions: p.Reactions})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Tenants.Close() })
	return p
}

const (
	countOrders = `{"projectionName":"orders","feedName":"order","aggregated":true,"handlers":[` +
		`{"eventType":"Placed","functions":[{"function":"inc","targetSelector":"$.projection.placed"}]},` +
		`{"eventType":"Paid","functions":[{"function":"inc","targetSelector":"$.projection.paid"}]}]}`
	perOrder = `{"projectionName":"order","feedName":"order","aggregated":false,"handlers":[` +
		`{"eventType":"Priced","functions":[{"function":"set","targetSelector":"$.projection.amount","eventSelector":"$.event.amount"}]}]}`
)

// fillProject gives p every feature: projection and reaction
// definitions, events with metadata and a deleted aggregate (fill), two
// tenants with events and a deleted one.
func fillProject(t *testing.T, p archive.Project) (tenants []string) {
	t.Helper()
	ctx := context.Background()
	for _, body := range []string{countOrders, perOrder} {
		var d eventstore.Definition
		err := json.Unmarshal([]byte(body), &d)
		require.NoError(t, err)
		d.SigningSecret = "s3cret"
		_, err = p.Projector.Put(ctx, d)
		require.NoError(t, err)
	}
	require.NoError(t, p.Reactions.Create(ctx, reactions.Definition{Name: "remind", FeedName: "order", ReactOnEventType: "Placed",
		CancelOnEventTypes: []string{"Paid"}, Offset: "P3D", Action: reactions.Action{Type: reactions.ActionFunc, Function: "noop"}}))
	fill(t, p.Store)
	for i, ref := range []string{"acme", "", "gone"} {
		id := fmt.Sprintf("0000000%d-0000-4000-8000-000000000000", i+1)
		_, err := p.Tenants.Add(ctx, id, ref)
		require.NoError(t, err)
		st, _, release, err := p.Tenants.Open(ctx, id)
		require.NoError(t, err)
		saveOne(t, st, "order", fmt.Sprint("t-o-", i), eventstore.NewEventID(), `{"tenant":true}`)
		release()
		if ref == "gone" {
			require.NoError(t, p.Tenants.Delete(ctx, id))
			continue
		}
		tenants = append(tenants, id)
	}
	return tenants
}

func TestProjectRoundTrip(t *testing.T) {
	// Every pair of backends, each into itself too.
	var pairs [][2]string
	for _, from := range []string{"memory", "sqlite", "postgres"} {
		for _, to := range []string{"memory", "sqlite", "postgres"} {
			pairs = append(pairs, [2]string{from, to})
		}
	}
	for _, pair := range pairs {
		t.Run(pair[0]+"_to_"+pair[1], func(t *testing.T) {
			ctx := context.Background()
			src, dst := projectKinds[pair[0]].open(t), projectKinds[pair[1]].open(t)
			tenants := fillProject(t, src)
			var buf bytes.Buffer
			next, err := archive.ExportProject(ctx, src, archive.NewWriter(&buf), archive.Cursor{})
			require.NoError(t, err)
			require.Equal(t, tenants[1], next.Tenant, "the cursor ends in the last tenant")
			require.NotContains(t, buf.String(), "c-gone", "a deleted aggregate is not exported")
			require.NotContains(t, buf.String(), "00000003-", "a deleted tenant is not exported")

			stats, err := archive.ImportProject(ctx, dst, archive.NewReader(bytes.NewReader(buf.Bytes())))
			require.NoError(t, err)
			require.Equal(t, int64(0), stats.Duplicates)
			require.Equal(t, int64(25+2), stats.Events, "the project's events and one per tenant")
			require.NoError(t, archive.VerifyProject(ctx, src, dst))
			require.NoError(t, archive.VerifyProject(ctx, dst, src))

			// Definitions, with their secrets; the projections rebuild
			// from the imported events to the source's.
			d, err := dst.Projector.Definition(ctx, "orders")
			require.NoError(t, err)
			require.Equal(t, "s3cret", d.SigningSecret)
			for _, p := range []archive.Project{src, dst} {
				require.NoError(t, p.Projector.CatchUp(ctx))
			}
			a, err := src.Projector.Aggregated(ctx, "orders")
			require.NoError(t, err)
			b, err := dst.Projector.Aggregated(ctx, "orders")
			require.NoError(t, err)
			require.JSONEq(t, string(a.Data), string(b.Data))
			require.JSONEq(t, `{"placed":"5","paid":"5"}`, string(b.Data))
			one, err := dst.Projector.Single(ctx, "order", "o-2")
			require.NoError(t, err)
			require.JSONEq(t, `{"amount":"12.50"}`, string(one.Data))

			// The imported events schedule no reaction: theirs ran at the
			// source.
			rd, err := dst.Reactions.Definition(ctx, "remind")
			require.NoError(t, err)
			require.Equal(t, "P3D", rd.Offset)
			page, err := dst.Reactions.Reactions(ctx, reactions.ListOptions{})
			require.NoError(t, err)
			require.Empty(t, page.Reactions)

			// Run again: nothing is stored twice. An export resumed from
			// the second tenant holds only it.
			stats, err = archive.ImportProject(ctx, dst, archive.NewReader(bytes.NewReader(buf.Bytes())))
			require.NoError(t, err)
			require.Equal(t, archive.Stats{Duplicates: stats.Duplicates}, stats)
			var part bytes.Buffer
			_, err = archive.ExportProject(ctx, src, archive.NewWriter(&part), archive.Cursor{Tenant: tenants[1]})
			require.NoError(t, err)
			require.Equal(t, 3, bytes.Count(part.Bytes(), []byte("\n")), "the header, the tenant, its batch")
			require.NoError(t, archive.VerifyProject(ctx, src, dst))

			// A tenant's event differs: found, naming the tenant.
			st, _, release, err := dst.Tenants.Open(ctx, tenants[0])
			require.NoError(t, err)
			saveOne(t, st, "order", "extra", eventstore.NewEventID(), `{}`)
			release()
			err = archive.VerifyProject(ctx, src, dst)
			require.ErrorIs(t, err, archive.ErrDifferent)
			require.ErrorContains(t, err, "tenant "+tenants[0])
		})
	}
}

func TestImportRefusesWhatTheTargetCannotTake(t *testing.T) {
	ctx := context.Background()
	src := projectKinds["memory"].open(t)
	fillProject(t, src)
	var buf bytes.Buffer
	_, err := archive.ExportProject(ctx, src, archive.NewWriter(&buf), archive.Cursor{})
	require.NoError(t, err)
	_, err = archive.Import(ctx, memoryBackend.open(t), archive.NewReader(bytes.NewReader(buf.Bytes())))
	require.ErrorIs(t, err, eventstore.ErrInvalid)
	require.ErrorContains(t, err, "line 2: a projection record, and the target takes no projection definitions")

	in := `{"format":"eventstore-archive","version":1}
{"kind":"snapshot","snapshot":{}}
`
	_, err = archive.ImportProject(ctx, projectKinds["memory"].open(t), archive.NewReader(bytes.NewReader([]byte(in))))
	require.ErrorIs(t, err, eventstore.ErrInvalid)
	require.ErrorContains(t, err, "line 2: not a record: json: unknown field \"snapshot\"")
	in = `{"format":"eventstore-archive","version":1}
{"kind":"snapshot"}
`
	_, err = archive.ImportProject(ctx, projectKinds["memory"].open(t), archive.NewReader(bytes.NewReader([]byte(in))))
	require.ErrorIs(t, err, eventstore.ErrInvalid)
	require.ErrorContains(t, err, `line 2: unknown record kind "snapshot"`)
}

func TestCursorString(t *testing.T) {
	for _, c := range []archive.Cursor{{}, {After: 42}, {Tenant: "00000001-0000-4000-8000-000000000000", After: 7}} {
		got, err := archive.ParseCursor(c.String())
		require.NoError(t, err)
		require.Equal(t, c, got)
	}
	for _, bad := range []string{"", "x", "-1", ":3", "t:x"} {
		_, err := archive.ParseCursor(bad)
		require.ErrorIs(t, err, eventstore.ErrInvalid, bad)
	}
}
