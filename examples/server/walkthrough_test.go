package main

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// walkStep is one command block of the README's HTTP walk-through and the
// output the README shows for it.
type walkStep struct {
	script, want string
}

// readWalkthrough returns the set-up block and the steps of the README's
// "HTTP walk-through" section: every ```sh block followed by a plain ```
// block holding its output.
func readWalkthrough(t *testing.T) (setup string, steps []walkStep) {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	start := strings.Index(s, "\n## HTTP walk-through\n")
	if start < 0 {
		t.Fatal("README.md has no HTTP walk-through section")
	}
	s = s[start+1:]
	if end := strings.Index(s, "\n## "); end >= 0 {
		s = s[:end]
	}
	type block struct{ lang, text string }
	var blocks []block
	for {
		i := strings.Index(s, "```")
		if i < 0 {
			break
		}
		s = s[i+3:]
		nl := strings.IndexByte(s, '\n')
		lang := s[:nl]
		s = s[nl+1:]
		j := strings.Index(s, "```")
		if j < 0 {
			t.Fatal("an unterminated code block in the walk-through")
		}
		blocks = append(blocks, block{lang, s[:j]})
		s = s[j+3:]
	}
	for i := 0; i < len(blocks); i++ {
		b := blocks[i]
		switch {
		case b.lang != "sh":
			t.Fatalf("an output block without its command: %q", b.text)
		case strings.Contains(b.text, "go run ./examples/server"):
			// The server: the test starts its own.
		case strings.Contains(b.text, "ES=http"):
			setup = b.text
		case i+1 < len(blocks) && blocks[i+1].lang == "":
			steps = append(steps, walkStep{b.text, blocks[i+1].text})
			i++
		default:
			t.Fatalf("a command block without its output: %q", b.text)
		}
	}
	if setup == "" || len(steps) < 5 {
		t.Fatalf("walk-through not found: set-up %q, %d steps", setup, len(steps))
	}
	return setup, steps
}

// varying matches what differs from run to run: times, dates, ETags and
// generated request ids.
var varying = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`"(recordedAt|createdAt|updatedAt|timestamp)":\d+`), `"$1":<time>`},
	{regexp.MustCompile(`(?m)^(Date|Last-Modified): .*$`), `$1: <date>`},
	{regexp.MustCompile(`(?m)^Etag: .*$`), `Etag: <etag>`},
	{regexp.MustCompile(`(?m)^X-Request-Id: [0-9a-f]{32}$`), `X-Request-Id: <id>`},
	{regexp.MustCompile(`"requestId":"[0-9a-f]{32}"`), `"requestId":"<id>"`},
	{regexp.MustCompile(`\(request id [0-9a-f]{32}\)`), `(request id <id>)`},
}

func normalize(s string) string {
	s = strings.ReplaceAll(s, "\r", "")
	for _, v := range varying {
		s = v.re.ReplaceAllString(s, v.with)
	}
	return strings.TrimRight(s, "\n")
}

// TestReadmeWalkthrough runs the README's HTTP walk-through with bash and
// curl against a server it starts (on the memory backend, with the
// walk-through's keys) and compares every output with the README's,
// ignoring times, dates, ETags and generated request ids.
func TestReadmeWalkthrough(t *testing.T) {
	for _, tool := range []string{"bash", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is needed to run the README's walk-through: %v", tool, err)
			}
			t.Skipf("%s is needed to run the README's walk-through: %v", tool, err)
		}
	}
	setup, steps := readWalkthrough(t)
	base, _, _ := start(t, []string{"-addr", "127.0.0.1:0", "-storage", "memory", "-log-requests=false"},
		map[string]string{"EVENTSTORE_ACCESS_KEY": "demo-access", "EVENTSTORE_SECRET_ACCESS_KEY": "demo-secret"})
	prefix := setup + "\nES=" + base + "\n"
	for i, st := range steps {
		cmd := exec.Command("bash", "-c", prefix+st.script)
		cmd.Env = append(os.Environ(), "LC_ALL=C")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("step %d failed: %v\n%s\n%s", i+1, err, st.script, out)
		}
		got, want := normalize(string(out)), normalize(st.want)
		if got != want {
			t.Errorf("step %d: the output differs from the README's\ncommand:\n%s\nREADME:\n%s\ngot:\n%s", i+1, st.script, want, got)
		}
	}
}
