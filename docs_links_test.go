package eventstore_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// TestDocsLinks: every relative link of README.md and docs/*.md names a
// file or directory that exists and, for a Markdown file, an anchor one of
// its headings makes (as GitHub makes them), so that moving a section
// cannot leave a link behind.
func TestDocsLinks(t *testing.T) {
	pages, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, "README.md")
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		anchors[path] = headingAnchors(string(b))
		return anchors[path]
	}
	checked := 0
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range markdownLinks(string(b)) {
			if strings.Contains(l.target, "://") || strings.HasPrefix(l.target, "mailto:") {
				continue
			}
			checked++
			file, anchor, _ := strings.Cut(l.target, "#")
			path := page
			if file != "" {
				path = filepath.Join(filepath.Dir(page), filepath.FromSlash(file))
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s:%d: the link %q names %s, which does not exist", page, l.line, l.target, path)
					continue
				}
			}
			if anchor != "" && strings.HasSuffix(path, ".md") && !anchorsOf(path)[anchor] {
				t.Errorf("%s:%d: the link %q names the anchor #%s, which no heading of %s makes", page, l.line, l.target, anchor, path)
			}
		}
	}
	if checked < 50 {
		t.Errorf("only %d relative links found: the parser lost them", checked)
	}
}

type mdLink struct {
	target string
	line   int
}

var linkRE = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// markdownLinks returns the link targets of md outside code blocks and
// code spans.
func markdownLinks(md string) []mdLink {
	var out []mdLink
	fenced := false
	for i, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		// Drop code spans.
		var b strings.Builder
		in := false
		for _, r := range line {
			if r == '`' {
				in = !in
				continue
			}
			if !in {
				b.WriteRune(r)
			}
		}
		for _, m := range linkRE.FindAllStringSubmatch(b.String(), -1) {
			out = append(out, mdLink{m[1], i + 1})
		}
	}
	return out
}

// headingAnchors returns the anchors GitHub gives md's headings: lower
// case, punctuation but - and _ dropped, spaces made -, a repeated one
// suffixed -1, -2, ...
func headingAnchors(md string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		text := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			seen[a]++
			a = fmt.Sprintf("%s-%d", a, n)
		} else {
			seen[a] = 1
		}
		out[a] = true
	}
	return out
}
