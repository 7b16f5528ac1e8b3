package jsonscan

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"
)

var seeds = []string{
	``, ` `, `0`, `-0`, `-`, `01`, `1.`, `1.5`, `1e`, `1e+`, `1E-7`, `-12.5e+3`, `.5`, `+1`,
	`"`, `""`, `"a\"b"`, `"\u00e9"`, `"\u00g9"`, `"\x"`, "\"\t\"", "\"\x7f\"", "\"\xff\xfe\"",
	`true`, `tru`, `false`, `null`, `nul`, `nullx`, `[`, `]`, `[]`, `[1,]`, `[,1]`, `[1 2]`,
	`{}`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{"a":1 "b":2}`, `{1:2}`, `{"a":[{"b":{}}]}`,
	` {"a" : [ 1 , 2 ] } `, `{}{}`, `[]]`, `{]`, `[}`, `[{"a":[1,{"b":null}],"c":"d"}]`,
	"\x00", `"\ud800"`, `[[[[[[[[]]]]]]]]`, `[[[[[[[[]]]]]]]`, `{"a":{"b":{"c":{}}}}`,
}

// depthOf returns how deeply valid JSON nests, counted with the tokens of
// encoding/json (no recursion).
func depthOf(t *testing.T, b []byte) int {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	depth, most := 0, 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return most
		}
		if err != nil {
			t.Fatalf("%q: Token: %v", b, err)
		}
		switch tok {
		case json.Delim('['), json.Delim('{'):
			depth++
			most = max(most, depth)
		case json.Delim(']'), json.Delim('}'):
			depth--
		}
	}
}

func TestCheckAgreesWithEncodingJSON(t *testing.T) {
	for _, s := range seeds {
		b := []byte(s)
		err := Check(b, 10000)
		if valid := json.Valid(b); valid != (err == nil) {
			t.Errorf("Check(%q) = %v, encoding/json.Valid says %v", s, err, valid)
		} else if !valid && !errors.Is(err, ErrSyntax) {
			t.Errorf("Check(%q) = %v, want ErrSyntax", s, err)
		}
	}
}

func TestCheckDepth(t *testing.T) {
	for _, c := range []struct {
		in    string
		depth int
	}{
		{`1`, 0}, {`"x"`, 0}, {`[]`, 1}, {`{}`, 1}, {`{"a":[1]}`, 2}, {`[[],[[]],[]]`, 3},
		{`{"a":{"b":1},"c":[[{}]]}`, 4},
	} {
		if got := depthOf(t, []byte(c.in)); got != c.depth {
			t.Fatalf("test table: %s nests %d levels, not %d", c.in, got, c.depth)
		}
		if err := Check([]byte(c.in), c.depth); err != nil {
			t.Errorf("Check(%s, %d) = %v, want nil", c.in, c.depth, err)
		}
		if c.depth == 0 {
			continue
		}
		err := Check([]byte(c.in), c.depth-1)
		var e *Error
		if !errors.Is(err, ErrDepth) || !errors.As(err, &e) || e.Depth != c.depth-1 {
			t.Errorf("Check(%s, %d) = %v, want ErrDepth", c.in, c.depth-1, err)
		}
	}
	if err := Check([]byte(`[]`), -1); !errors.Is(err, ErrDepth) {
		t.Errorf("a negative limit must count as 0: Check([], -1) = %v", err)
	}
}

// TestCheckDeepLimits exercises limits whose stack of container kinds is
// allocated: objects and arrays alternate across word boundaries.
func TestCheckDeepLimits(t *testing.T) {
	for _, n := range []int{63, 64, 65, 255, 256, 257, 1000, 10000} {
		var open, close strings.Builder
		for i := range n {
			if i%3 == 0 {
				open.WriteString(`{"k":`)
			} else {
				open.WriteString(`[0,`)
			}
		}
		for i := n - 1; i >= 0; i-- {
			if i%3 == 0 {
				close.WriteString(`}`)
			} else {
				close.WriteString(`]`)
			}
		}
		doc := []byte(open.String() + "1" + close.String())
		if err := Check(doc, n); err != nil {
			t.Errorf("depth %d with limit %d: %v", n, n, err)
		}
		if err := Check(doc, n-1); !errors.Is(err, ErrDepth) {
			t.Errorf("depth %d with limit %d: %v, want ErrDepth", n, n-1, err)
		}
		// A mismatched closer deep inside is a syntax error.
		bad := bytes.Clone(doc)
		j := bytes.LastIndexAny(bad, "}")
		bad[j] = ']'
		if err := Check(bad, n); !errors.Is(err, ErrSyntax) {
			t.Errorf("depth %d, a '}' replaced by ']': %v, want ErrSyntax", n, err)
		}
	}
}

// TestCheckHostileIsCheap checks that 4 MiB of '[' is refused at the first
// bracket beyond the limit, without allocating or growing the stack.
func TestCheckHostileIsCheap(t *testing.T) {
	doc := bytes.Repeat([]byte("["), 4<<20)
	var e *Error
	allocs := testing.AllocsPerRun(10, func() {
		err := Check(doc, 64)
		if !errors.As(err, &e) || e.Err != ErrDepth || e.Offset != 64 {
			t.Fatalf("Check of 4 MiB of '[' = %v, want ErrDepth at byte 64", err)
		}
	})
	if allocs > 1 { // the *Error
		t.Errorf("Check of 4 MiB of '[' allocates %v times, want at most 1", allocs)
	}
	// Without a depth limit to stop it, the scan still needs no recursion:
	// one bit per level.
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	err := Check(append(doc, bytes.Repeat([]byte("]"), len(doc))...), len(doc))
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatalf("4 Mi nested arrays with the limit at their depth: %v", err)
	}
	if grown := after.StackInuse - min(after.StackInuse, before.StackInuse); grown > 1<<20 {
		t.Errorf("the stack grew by %d bytes scanning 4 Mi nested arrays", grown)
	}
}

func TestErrorText(t *testing.T) {
	if got := Check([]byte(`[1,]`), 8).Error(); got != "not valid JSON (at byte 3)" {
		t.Errorf("syntax error text %q", got)
	}
	if got := Check([]byte(`[[1]]`), 1).Error(); got != "JSON nests deeper than 1 levels (at byte 1)" {
		t.Errorf("depth error text %q", got)
	}
}

// FuzzCheck checks Check against encoding/json.Valid (whose own depth
// limit is 10,000) and, for valid input, that the depth limit falls exactly
// at the input's depth.
func FuzzCheck(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		err := Check(b, 10000)
		valid := json.Valid(b)
		if valid != (err == nil) {
			t.Fatalf("Check(%q) = %v, encoding/json.Valid says %v", b, err, valid)
		}
		if !valid {
			return
		}
		d := depthOf(t, b)
		if err := Check(b, d); err != nil {
			t.Fatalf("Check(%q, its depth %d) = %v", b, d, err)
		}
		if d > 0 {
			if err := Check(b, d-1); !errors.Is(err, ErrDepth) {
				t.Fatalf("Check(%q, %d) = %v, want ErrDepth", b, d-1, err)
			}
		}
	})
}

func BenchmarkCheck(b *testing.B) {
	doc := []byte(`{"total": 12.5, "sku": "A-1", "lines": [{"n": 1, "text": "pen \u00e9"}, {"n": 2, "ok": true, "x": null}]}`)
	b.SetBytes(int64(len(doc)))
	for b.Loop() {
		if err := Check(doc, 64); err != nil {
			b.Fatal(err)
		}
	}
}
