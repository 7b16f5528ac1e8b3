package main

import (
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/archive"
	"github.com/eventkit-go/eventstore/internal/names"
	"github.com/eventkit-go/eventstore/reactions"
)

// The data subcommands (export, import, copy, verify) move a project's
// data in and out as an archive (package archive, docs/data.md). They are
// subcommands of the server, not tools of their own, because they must
// open a store exactly as the server does: the same -storage and
// -postgres-schema, the project's storage derived from its name as with
// -keys, its tenants' files or schemas, its definitions.

// dataSubcommands are the data subcommands, in the order -h lists them.
func dataSubcommands() []subcommand {
	return []subcommand{
		{"export", "write a project (definitions, events, tenants), a tenant or a project without its tenants as an archive", runExport},
		{"import", "read an archive into a store, keeping versions, event ids and recorded times; run again, it stores nothing twice", runImport},
		{"copy", "copy a project from one store to another (SQLite to PostgreSQL, any pair) without a file, then verify", runCopy},
		{"verify", "check that two stores hold the same events (counts per type, a checksum of every aggregate), tenants and definitions", runVerify},
	}
}

// storeFlags are the flags that name a store, as the server's do.
type storeFlags struct {
	storage, schema, project string
	// existing refuses a SQLite file that does not exist (a store read
	// from), instead of creating an empty one.
	existing bool
}

func (f *storeFlags) add(fs *flag.FlagSet, prefix, what string) {
	fs.StringVar(&f.storage, prefix+"storage", "sqlite:eventstore.db", what+`: "sqlite:PATH", "memory" or a "postgres://..." URL, as the server's -storage`)
	fs.StringVar(&f.schema, prefix+"postgres-schema", "", "PostgreSQL schema of "+what+", as the server's -postgres-schema")
	fs.StringVar(&f.project, prefix+"project", "", "the project of a -keys file, whose storage is derived from "+what+" as the server does (default: the one project)")
}

// newDataFlags returns the flag set of subcommand name, whose usage
// starts with synopsis and about.
func newDataFlags(name, synopsis, about string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("server "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage of server %s:\n  server %s %s\n\n%s\n\nFlags:\n", name, name, synopsis, about)
		fs.PrintDefaults()
	}
	return fs
}

// parseDataFlags parses args, refusing positional arguments.
func parseDataFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%s: unexpected arguments %q", fs.Name(), fs.Args())
	}
	return nil
}

// openProject opens the project f names, as the server opens it, with
// its projection and reaction definitions and its tenants. Its
// projectors and reactions do not run: a server on the same store builds
// the projections. close releases it all.
func openProject(ctx context.Context, f storeFlags, log *slog.Logger) (p archive.Project, close func(), err error) {
	if f.project != "" {
		if err := names.Check(f.project); err != nil || strings.ContainsAny(f.project, "+") {
			return archive.Project{}, nil, fmt.Errorf("-project %q: not a project name", f.project)
		}
	}
	schema, err := postgresSchema(f.storage, f.schema)
	if err != nil {
		return archive.Project{}, nil, err
	}
	spec, schema, err := projectStorage(f.storage, schema, f.project)
	if err != nil {
		return archive.Project{}, nil, err
	}
	if path, ok := strings.CutPrefix(spec, "sqlite:"); ok && f.existing {
		if _, err := os.Stat(path); err != nil {
			return archive.Project{}, nil, fmt.Errorf("-storage %s: no store there: %w", spec, err)
		}
	}
	s, err := openStorage(ctx, spec, schema, false, nil, "")
	if err != nil {
		return archive.Project{}, nil, fmt.Errorf("open storage %s: %w", storageKind(spec), err)
	}
	st, err := eventstore.New(s, &eventstore.Options{Logger: log})
	if err != nil {
		_ = s.Close()
		return archive.Project{}, nil, err
	}
	p = archive.Project{Store: st, Projector: eventstore.NewProjector(st, nil)}
	if p.Reactions, err = reactions.New(st, s, &reactions.Options{Logger: log}); err != nil {
		_ = st.Close()
		return archive.Project{}, nil, err
	}
	tenants, release, err := openTenants(ctx, spec, schema, p.Projector, p.Reactions, &config{}, log, nil, func(string) {})
	if err != nil {
		_ = st.Close()
		return archive.Project{}, nil, fmt.Errorf("open the tenants: %w", err)
	}
	p.Tenants = tenants
	return p, func() {
		_ = tenants.Close()
		release()
		_ = st.Close()
	}, nil
}

// countEvents returns the events of the data spaces p's export covers.
func countEvents(ctx context.Context, p archive.Project, tenant string, own, tenants bool) (int64, error) {
	count := func(st *eventstore.Store) (int64, error) {
		fs, err := st.Feeds(ctx)
		var n int64
		for _, f := range fs {
			n += f.EventCount
		}
		return n, err
	}
	var total int64
	if own {
		n, err := count(p.Store)
		if err != nil {
			return 0, err
		}
		total += n
	}
	if !tenants {
		return total, nil
	}
	list, err := p.Tenants.List(ctx)
	if err != nil {
		return 0, err
	}
	for _, t := range list {
		if t.Deleted || tenant != "" && t.ID != tenant {
			continue
		}
		st, _, release, err := p.Tenants.Open(ctx, t.ID)
		if err != nil {
			return 0, err
		}
		n, err := count(st)
		release()
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}

func runExport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newDataFlags("export", "[-storage S] [-project NAME] [-tenant ID | -no-tenants] [-o FILE] [-gzip] [-from CURSOR]",
		"Writes the project as an archive (docs/data.md): its projection and reaction definitions, its events, then each\n"+
			"tenant's events; or one tenant (-tenant), or the project without its tenants (-no-tenants). It may run while a\n"+
			"server serves the store. The cursor to resume from is printed at the end, also after an error.", stderr)
	f := storeFlags{existing: true}
	f.add(fs, "", "the store")
	out := fs.String("o", "-", `the archive's file; "-" is stdout`)
	gz := fs.Bool("gzip", false, "compress the archive with gzip")
	tenant := fs.String("tenant", "", "export this tenant only (its id)")
	noTenants := fs.Bool("no-tenants", false, "export the project's own data space only, without its tenants")
	from := fs.String("from", "", "resume an export from the cursor an earlier one printed (N, or TENANT:N)")
	every := fs.Duration("progress", 5*time.Second, "how often to report progress on stderr (0: only at the end)")
	if err := parseDataFlags(fs, args); err != nil {
		return err
	}
	cur, err := archive.Cursor{}, error(nil)
	if *from != "" {
		if cur, err = archive.ParseCursor(*from); err != nil {
			return fmt.Errorf("-from: %w", err)
		}
	}
	if *tenant != "" && *noTenants {
		return errors.New("-tenant and -no-tenants: use one of them")
	}
	log := dataLogger(stderr)
	p, closeProject, err := openProject(ctx, f, log)
	if err != nil {
		return err
	}
	defer closeProject()

	var w io.Writer = stdout
	if *out != "-" {
		file, err := os.Create(*out)
		if err != nil {
			return err
		}
		defer file.Close()
		w = file
	}
	bw := bufio.NewWriterSize(w, 256<<10)
	w = bw
	var zw *gzip.Writer
	if *gz {
		zw, _ = gzip.NewWriterLevel(bw, gzip.BestSpeed)
		w = zw
	}
	aw := archive.NewWriter(w)
	prog := startProgress("export", stderr, *every, aw.Events)
	go func() {
		if n, err := countEvents(ctx, p, *tenant, *tenant == "", !*noTenants); err == nil && cur == (archive.Cursor{}) {
			prog.total.Store(n)
		}
	}()

	var next archive.Cursor
	switch {
	case *tenant != "":
		if cur.Tenant != "" && cur.Tenant != *tenant {
			return fmt.Errorf("-from %s is a cursor of another tenant than -tenant %s", *from, *tenant)
		}
		next, err = archive.ExportTenant(ctx, p.Tenants, *tenant, aw, cur.After)
	case *noTenants:
		if cur.Tenant != "" {
			return fmt.Errorf("-from %s is a tenant's cursor, and -no-tenants exports none", *from)
		}
		own := p
		own.Tenants = nil
		next, err = archive.ExportProject(ctx, own, aw, cur)
	default:
		next, err = archive.ExportProject(ctx, p, aw, cur)
	}
	if err == nil && zw != nil {
		err = zw.Close()
	}
	if err == nil {
		err = bw.Flush()
	}
	prog.end(fmt.Sprintf("; resume with -from %s", next))
	if err != nil {
		return fmt.Errorf("export (resume with -from %s): %w", next, err)
	}
	return nil
}

func runImport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runImportFrom(ctx, args, os.Stdin, stdout, stderr)
}

func runImportFrom(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newDataFlags("import", "[-storage S] [-project NAME] [-i FILE]",
		"Reads an archive (docs/data.md; gzip or not) into the store, keeping aggregate versions, event ids, metadata and\n"+
			"recorded times, and its definitions and tenants. Interrupted and run again on the same archive, it stores\n"+
			"nothing twice. Bad input stops it with the line number; what was imported before that line stays. A server\n"+
			"running on the store builds the projections from the imported events.", stderr)
	var f storeFlags
	f.add(fs, "", "the store to import into")
	in := fs.String("i", "-", `the archive's file; "-" is stdin`)
	every := fs.Duration("progress", 5*time.Second, "how often to report progress on stderr (0: only at the end)")
	if err := parseDataFlags(fs, args); err != nil {
		return err
	}
	r, read, size, closeIn, err := openArchive(*in, stdin)
	if err != nil {
		return err
	}
	defer closeIn()
	p, closeProject, err := openProject(ctx, f, dataLogger(stderr))
	if err != nil {
		return err
	}
	defer closeProject()
	ar := archive.NewReader(r)
	prog := startProgress("import", stderr, *every, ar.Events)
	if size > 0 {
		prog.share = func() float64 { return float64(read.n.Load()) / float64(size) }
	}
	stats, err := archive.ImportProject(ctx, p, ar)
	prog.end(fmt.Sprintf("; %d batches stored, %d stored already", stats.Batches, stats.Duplicates))
	if err != nil {
		return fmt.Errorf("import: %w", err)
	}
	return nil
}

func runCopy(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newDataFlags("copy", "-storage S -to T [-project NAME]",
		"Copies the project (its definitions, events and tenants) from the store -storage to the store -to, streaming\n"+
			"(no file between them), as export piped into import, then verifies that both hold the same. Run again after\n"+
			"an interruption, it stores nothing twice.", stderr)
	from, to := storeFlags{existing: true}, storeFlags{}
	from.add(fs, "", "the store to copy from")
	fs.StringVar(&to.storage, "to", "", "the store to copy to, as -storage")
	fs.StringVar(&to.schema, "to-postgres-schema", "", "PostgreSQL schema of -to")
	every := fs.Duration("progress", 5*time.Second, "how often to report progress on stderr (0: only at the end)")
	if err := parseDataFlags(fs, args); err != nil {
		return err
	}
	to.project = from.project
	if to.storage == "" {
		return errors.New("copy: -to is required: the store to copy to")
	}
	if to.storage == from.storage && to.schema == from.schema {
		return errors.New("copy: -storage and -to name the same store")
	}
	log := dataLogger(stderr)
	src, closeSrc, err := openProject(ctx, from, log)
	if err != nil {
		return err
	}
	defer closeSrc()
	dst, closeDst, err := openProject(ctx, to, log)
	if err != nil {
		return err
	}
	defer closeDst()

	pr, pw := io.Pipe()
	ar := archive.NewReader(pr)
	prog := startProgress("copy", stderr, *every, ar.Events)
	go func() {
		if n, err := countEvents(ctx, src, "", true, true); err == nil {
			prog.total.Store(n)
		}
	}()
	exported := make(chan error, 1)
	go func() {
		_, err := archive.ExportProject(ctx, src, archive.NewWriter(pw), archive.Cursor{})
		pw.CloseWithError(err) // nil: the reader sees io.EOF
		exported <- err
	}()
	stats, err := archive.ImportProject(ctx, dst, ar)
	pr.CloseWithError(errors.New("the import stopped")) // unblocks the export
	if eerr := <-exported; eerr != nil && err == nil {
		err = eerr
	}
	prog.end(fmt.Sprintf("; %d batches stored, %d stored already", stats.Batches, stats.Duplicates))
	if err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	if err := archive.VerifyProject(ctx, src, dst); err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	fmt.Fprintln(stdout, "copy: verified: both stores hold the same events, tenants and definitions")
	return nil
}

func runVerify(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newDataFlags("verify", "-storage S -other T [-project NAME]",
		"Checks that the stores -storage and -other hold the same: per aggregate type the counts of aggregates, batches\n"+
			"and events, every aggregate's version and a checksum of its events (ids, types, data, metadata), the\n"+
			"tenants with theirs, and the definitions. Prints the counts; exits 1 at the first difference, naming it.", stderr)
	a, b := storeFlags{existing: true}, storeFlags{existing: true}
	a.add(fs, "", "the first store")
	fs.StringVar(&b.storage, "other", "", "the second store, as -storage")
	fs.StringVar(&b.schema, "other-postgres-schema", "", "PostgreSQL schema of -other")
	if err := parseDataFlags(fs, args); err != nil {
		return err
	}
	b.project = a.project
	if b.storage == "" {
		return errors.New("verify: -other is required: the store to compare with")
	}
	log := dataLogger(stderr)
	pa, closeA, err := openProject(ctx, a, log)
	if err != nil {
		return err
	}
	defer closeA()
	pb, closeB, err := openProject(ctx, b, log)
	if err != nil {
		return err
	}
	defer closeB()
	feeds, err := pa.Store.Feeds(ctx)
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	for _, f := range feeds {
		fmt.Fprintf(stdout, "%s: %d aggregates, %d batches, %d events\n", f.AggregateType, f.AggregateCount, f.BatchCount, f.EventCount)
	}
	if err := archive.VerifyProject(ctx, pa, pb); err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	fmt.Fprintln(stdout, "verify: the stores hold the same events, tenants and definitions")
	return nil
}
