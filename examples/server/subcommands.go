package main

import (
	"context"
	"flag"
	"fmt"
	"io"
)

// A subcommand is run as "server NAME [flags]" instead of serving.
type subcommand struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// subcommands are the server's subcommands, in the order -h lists them.
func subcommands() []subcommand {
	return append([]subcommand{
		{"backup", "copy a SQLite store (and its tenants' files) while the server serves writes; see server backup -h", runBackup},
	}, dataSubcommands()...) // data.go
}

// findSubcommand returns the subcommand args name, or nil when args start
// with a flag (serving).
func findSubcommand(args []string) *subcommand {
	if len(args) == 0 {
		return nil
	}
	for _, sc := range subcommands() {
		if sc.name == args[0] {
			return &sc
		}
	}
	return nil
}

// usageWithSubcommands returns a usage function for fs that lists the
// flags, then the subcommands.
func usageWithSubcommands(fs *flag.FlagSet) func() {
	return func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage of %s:\n  %s [flags]          serve\n", fs.Name(), fs.Name())
		for _, sc := range subcommands() {
			fmt.Fprintf(w, "  %s %s [flags]   %s\n", fs.Name(), sc.name, sc.summary)
		}
		fmt.Fprintln(w, "Flags:")
		fs.PrintDefaults()
	}
}
