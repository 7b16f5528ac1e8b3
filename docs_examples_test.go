package eventstore_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// TestDocsExamples: the table of examples in docs/library.md lists every
// example function (func Example...) of the module's _test.go files under
// its package, and nothing else, so that the list cannot go stale.
func TestDocsExamples(t *testing.T) {
	inCode := moduleExamples(t)
	inDoc := docExamples(t, "docs/library.md")
	if len(inCode) < 30 {
		t.Fatalf("only %d examples found in the module: the walk lost them", len(inCode))
	}
	var missing, stale []string
	for k := range inCode {
		if !inDoc[k] {
			missing = append(missing, k)
		}
	}
	for k := range inDoc {
		if !inCode[k] {
			stale = append(stale, k)
		}
	}
	sort.Strings(missing)
	sort.Strings(stale)
	for _, k := range missing {
		t.Errorf("docs/library.md's list of examples does not mention %s", k)
	}
	for _, k := range stale {
		t.Errorf("docs/library.md lists %s, which no _test.go file of the module defines", k)
	}
}

// moduleExamples returns "package-dir.ExampleName" for every example
// function of the module's test files ("eventstore" for the root
// package), leaving out nested modules, testdata and the directories the
// go tool ignores.
func moduleExamples(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != "." && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") ||
				name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			if path != "." {
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir // its own module (bench)
				}
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(filepath.Dir(path))
		if pkg == "." {
			pkg = "eventstore"
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "Example") ||
				fn.Type.Params.NumFields() != 0 || fn.Type.Results.NumFields() != 0 {
				continue
			}
			out[pkg+"."+fn.Name.Name] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

var backticked = regexp.MustCompile("`([^`]+)`")

// docExamples reads the table whose header is "| Package | Examples |" in
// the page: each row names one package (its directory, or eventstore) in
// its first cell and its examples in its second.
func docExamples(t *testing.T, page string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(b), "\n| Package | Examples |\n|---|---|\n")
	if !ok {
		t.Fatalf("%s has no table of examples (| Package | Examples |)", page)
	}
	out := map[string]bool{}
	for _, row := range strings.Split(table, "\n") {
		if !strings.HasPrefix(row, "|") {
			break
		}
		cells := strings.Split(strings.Trim(row, "|"), "|")
		if len(cells) != 2 {
			t.Fatalf("%s: a row of the table of examples without two cells: %q", page, row)
		}
		pkg := backticked.FindStringSubmatch(cells[0])
		if pkg == nil {
			t.Fatalf("%s: a row of the table of examples names no package: %q", page, row)
		}
		for _, m := range backticked.FindAllStringSubmatch(cells[1], -1) {
			if strings.HasPrefix(m[1], "Example") {
				out[pkg[1]+"."+m[1]] = true
			}
		}
	}
	return out
}
