package eventstore_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestReadmeExample: the code of docs/library.md's "Store and Projector"
// section is the body of Example_readme (between its README begin and end
// markers, one tab less), so the code users copy compiles and runs with
// the tests.
func TestReadmeExample(t *testing.T) {
	src, err := os.ReadFile("example_readme_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok1 := strings.Cut(string(src), "\t// README begin\n")
	code, _, ok2 := strings.Cut(rest, "\t// README end\n")
	if !ok1 || !ok2 {
		t.Fatal("example_readme_test.go lacks the README markers")
	}
	var want strings.Builder
	for _, line := range strings.SplitAfter(code, "\n") {
		want.WriteString(strings.TrimPrefix(line, "\t"))
	}
	readme, err := os.ReadFile("docs/library.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(readme), "<!-- Example_readme in example_readme_test.go; TestReadmeExample keeps them equal -->\n```go\n")
	if !ok {
		t.Fatal("docs/library.md lacks the Example_readme block")
	}
	got, _, _ := strings.Cut(after, "```\n")
	if got != want.String() {
		t.Errorf("the library example of docs/library.md differs from Example_readme:\ndocs/library.md:\n%s\nExample_readme:\n%s", got, want.String())
	}
}

// TestReadmeLength: README.md stays the newcomer's page (issue 34: at most
// 300 lines); detail belongs in docs/.
func TestReadmeLength(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n > 300 {
		t.Errorf("README.md has %d lines, more than 300: move detail into docs/", n)
	}
}

// TestRootDocLength: the root package's API reads in one sitting (issue
// 34: `go doc -all .` under 788 lines, the length before its tidy); a new
// exported name or a longer doc comment has to earn its lines.
func TestRootDocLength(t *testing.T) {
	out, err := exec.Command("go", "doc", "-all", ".").Output()
	if err != nil {
		t.Fatalf("go doc -all .: %v", err)
	}
	if n := strings.Count(string(out), "\n"); n >= 788 {
		t.Errorf("go doc -all . prints %d lines, 788 or more: say it in fewer, or move plumbing out of the root package", n)
	}
}
