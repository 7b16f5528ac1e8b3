package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/archive"
	"github.com/eventkit-go/eventstore/reactions"
)

// fillDataProject gives the project at storage a projection and a
// reaction definition, events with metadata, a deleted aggregate and a
// tenant with events; it returns the tenant's id.
func fillDataProject(t *testing.T, storage string) string {
	t.Helper()
	ctx := context.Background()
	p, closeProject, err := openProject(ctx, storeFlags{storage: storage}, dataLogger(os.Stderr))
	if err != nil {
		t.Fatal(err)
	}
	defer closeProject()
	var d eventstore.Definition
	err = json.Unmarshal([]byte(`{"projectionName":"orders","feedName":"order","aggregated":true,"handlers":[{"eventType":"Placed","functions":[{"function":"inc","targetSelector":"$.projection.n"}]}]}`), &d)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Projector.Put(ctx, d); err != nil {
		t.Fatal(err)
	}
	if err := p.Reactions.Create(ctx, reactions.Definition{Name: "r", FeedName: "order", ReactOnEventType: "Placed",
		Action: reactions.Action{Type: reactions.ActionHTTPPost, TargetURI: "https://example.com/hook"}}); err != nil {
		t.Fatal(err)
	}
	save := func(st *eventstore.Store, id string) {
		_, err := st.Save(ctx, "order", id, []eventstore.NewEvent{{ID: eventstore.NewEventID(), Type: "Placed",
			Data: json.RawMessage(`{"n":1}`), Metadata: eventstore.Metadata{CorrelationID: "c-" + id}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"o-1", "o-2", "o-3", "gone"} {
		save(p.Store, id)
	}
	if err := p.Store.DeleteAggregate(ctx, "order", "gone"); err != nil {
		t.Fatal(err)
	}
	tenant := "0000000a-0000-4000-8000-000000000000"
	if _, err := p.Tenants.Add(ctx, tenant, "acme"); err != nil {
		t.Fatal(err)
	}
	st, _, release, err := p.Tenants.Open(ctx, tenant)
	if err != nil {
		t.Fatal(err)
	}
	save(st, "t-1")
	release()
	return tenant
}

// runData runs the server's command line with args and returns stdout,
// stderr and the error.
func runData(t *testing.T, stdin string, args ...string) (string, string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	var err error
	if args[0] == "import" {
		err = runImportFrom(context.Background(), args[1:], strings.NewReader(stdin), &stdout, &stderr)
	} else {
		err = run(context.Background(), args, func(string) string { return "" }, &stdout, &stderr)
	}
	return stdout.String(), stderr.String(), err
}

func TestDataExportImportVerify(t *testing.T) {
	dir := t.TempDir()
	src, dst := "sqlite:"+filepath.Join(dir, "src.db"), "sqlite:"+filepath.Join(dir, "dst.db")
	tenant := fillDataProject(t, src)
	file := filepath.Join(dir, "store.archive.gz")

	_, stderr, err := runData(t, "", "export", "-storage", src, "-o", file, "-gzip")
	if err != nil {
		t.Fatalf("export: %v\n%s", err, stderr)
	}
	if !strings.Contains(stderr, "export: 4 events in ") || !strings.Contains(stderr, "events/s") || !strings.Contains(stderr, "resume with -from "+tenant+":") {
		t.Errorf("export must report its events, rate and cursor on stderr, got:\n%s", stderr)
	}
	_, stderr, err = runData(t, "", "import", "-storage", dst, "-i", file)
	if err != nil {
		t.Fatalf("import: %v\n%s", err, stderr)
	}
	if !strings.Contains(stderr, "4 batches stored, 0 stored already") {
		t.Errorf("import must report what it stored, got:\n%s", stderr)
	}
	_, stderr, err = runData(t, "", "import", "-storage", dst, "-i", file)
	if err != nil || !strings.Contains(stderr, "0 batches stored, 4 stored already") {
		t.Errorf("an import run again must store nothing twice: %v\n%s", err, stderr)
	}
	stdout, stderr, err := runData(t, "", "verify", "-storage", src, "-other", dst)
	if err != nil {
		t.Fatalf("verify: %v\n%s", err, stderr)
	}
	if !strings.Contains(stdout, "order: 3 aggregates, 3 batches, 3 events") || !strings.Contains(stdout, "hold the same") {
		t.Errorf("verify must print the counts per type and the outcome, got:\n%s", stdout)
	}

	// The target has the definitions, the tenant and the recorded times.
	p, closeProject, err := openProject(context.Background(), storeFlags{storage: dst}, dataLogger(os.Stderr))
	if err != nil {
		t.Fatal(err)
	}
	ps, _, closeSrc := mustOpenProject(t, src)
	defer closeSrc()
	a, _ := ps.Store.Load(context.Background(), "order", "o-2")
	b, err := p.Store.Load(context.Background(), "order", "o-2")
	if err != nil || !a.Events[0].RecordedAt.Equal(b.Events[0].RecordedAt) || b.Events[0].Metadata.CorrelationID != "c-o-2" {
		t.Errorf("the imported event must keep its recorded time and metadata: %v, %+v against %+v", err, b.Events, a.Events)
	}
	if _, err := p.Reactions.Definition(context.Background(), "r"); err != nil {
		t.Errorf("the reaction definition must be imported: %v", err)
	}
	closeProject()

	// A tenant alone, then a store that differs.
	stdout, _, err = runData(t, "", "export", "-storage", src, "-tenant", tenant, "-progress", "0")
	if err != nil || strings.Count(stdout, "\n") != 3 || !strings.Contains(stdout, `"kind":"tenant"`) {
		t.Errorf("-tenant exports the header, the tenant and its batch: %v\n%s", err, stdout)
	}
	other := "sqlite:" + filepath.Join(dir, "other.db")
	fillDataProject(t, other)
	_, _, err = runData(t, "", "verify", "-storage", src, "-other", other)
	if err == nil || !strings.Contains(err.Error(), "aggregate order/o-1: its events differ") {
		t.Errorf("verify of different stores must fail naming the difference, got %v", err)
	}
}

func mustOpenProject(t *testing.T, storage string) (archive.Project, string, func()) {
	t.Helper()
	p, closeProject, err := openProject(context.Background(), storeFlags{storage: storage}, dataLogger(os.Stderr))
	if err != nil {
		t.Fatal(err)
	}
	return p, storage, closeProject
}

func TestDataBadInput(t *testing.T) {
	dir := t.TempDir()
	dst := "sqlite:" + filepath.Join(dir, "dst.db")
	id := eventstore.NewEventID()
	in := `{"format":"eventstore-archive","version":1}
{"aggregateType":"order","aggregateId":"o-1","version":1,"recordedAt":"2026-01-01T00:00:00Z","events":[{"id":"` + id + `","type":"Placed"}]}
{"aggregateType":"order","aggregateId":"o-1","version":2,"recordedAt":"2026-01-01T00:00:00Z","events":[{"id":"` + eventstore.NewEventID() + `","type":"Paid"}]}
{"aggregateType":"order","aggregateId":"o-2","version":1,"recordedAt":"2026-01-01T00:00:00Z","ev`
	for _, c := range []struct {
		args  []string
		stdin string
		want  string
	}{
		{[]string{"import", "-storage", dst}, in, "import: archive: line 4: the line is truncated"},
		{[]string{"import", "-storage", dst}, `{"format":"eventstore-archive","version":2}` + "\n", "archive version 2, this reader reads version 1"},
		{[]string{"import", "-storage", dst, "extra"}, "", "unexpected arguments"},
		{[]string{"export", "-storage", "sqlite:" + filepath.Join(dir, "missing.db")}, "", "no store there"},
		{[]string{"export", "-storage", dst, "-from", "x"}, "", `-from: cursor "x"`},
		{[]string{"export", "-storage", dst, "-tenant", "a", "-no-tenants"}, "", "use one of them"},
		{[]string{"copy", "-storage", dst}, "", "-to is required"},
		{[]string{"verify", "-storage", dst}, "", "-other is required"},
		{[]string{"export", "-storage", "bogus"}, "", `unknown -storage "bogus"`},
		{[]string{"nope"}, "", `unexpected arguments`},
	} {
		_, _, err := runData(t, c.stdin, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: want a one-line error containing %q, got %v", c.args, c.want, err)
		}
	}
	// The two batches before the truncated line are imported.
	p, _, closeProject := mustOpenProject(t, dst)
	defer closeProject()
	agg, err := p.Store.Load(context.Background(), "order", "o-1")
	if err != nil || agg.Version != 2 {
		t.Errorf("what was imported before the bad line stays: %v, version %d", err, agg.Version)
	}
}

func TestDataHelp(t *testing.T) {
	out, code := runMainProcess(t, "-h")
	for _, c := range dataSubcommands() {
		if !strings.Contains(out, "server "+c.name+" [flags]") {
			t.Errorf("server -h must list the subcommand %s; output:\n%s", c.name, out)
		}
		sub, code := runMainProcess(t, c.name, "-h")
		if code != 0 || !strings.Contains(sub, "Usage of server "+c.name) || !strings.Contains(sub, "-storage") {
			t.Errorf("server %s -h must print its usage and exit 0: exit %d\n%s", c.name, code, sub)
		}
		if _, code := runMainProcess(t, c.name, "-no-such-flag"); code == 0 {
			t.Errorf("server %s with a bad flag must exit non-zero", c.name)
		}
	}
	if code != 0 {
		t.Errorf("server -h exits %d", code)
	}
}

func TestDataCopySQLiteToPostgres(t *testing.T) {
	_, url, schema := postgresAdmin(t, "es_data_copy_")
	dir := t.TempDir()
	src := "sqlite:" + filepath.Join(dir, "src.db")
	fillDataProject(t, src)
	stdout, stderr, err := runData(t, "", "copy", "-storage", src, "-to", url, "-to-postgres-schema", schema)
	if err != nil {
		t.Fatalf("copy: %v\n%s", err, stderr)
	}
	if !strings.Contains(stdout, "copy: verified") || !strings.Contains(stderr, "copy: 4 events") {
		t.Errorf("copy must report and verify, got:\n%s\n%s", stdout, stderr)
	}
	stdout, stderr, err = runData(t, "", "verify", "-storage", url, "-postgres-schema", schema, "-other", src)
	if err != nil || !strings.Contains(stdout, "hold the same") {
		t.Errorf("verify after copy: %v\n%s\n%s", err, stdout, stderr)
	}
}
