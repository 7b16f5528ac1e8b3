package lang

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/eventkit-go/eventstore/internal/safetext"
	"github.com/tidwall/gjson"
)

// Selector roots.
const (
	projectionRoot = "$.projection"
	eventRoot      = "$.event"
	metadataRoot   = "$.metadata"
)

// Limits of a selector.
const (
	maxSelectorSteps = 32
	maxSelectorLen   = 512
	maxArrayIndex    = 1 << 20
)

// stepKind is the kind of one selector step.
type stepKind uint8

const (
	stepKey    stepKind = iota // .name or ['name']
	stepIndex                  // [3]
	stepFilter                 // [?]: the elements an accompanying filter selects
	stepKeys                   // ['a','b']: an object of just those keys (last step, reads only)
)

// step is one part of a compiled selector.
type step struct {
	kind  stepKind
	key   string
	index int
	keys  []string
}

// Selector is a compiled path such as $.projection.items[0].name.
type Selector struct {
	root  string
	steps []step
	text  string
	// gpath is the gjson path of the steps before any filter, with every
	// character gjson treats specially escaped (event reads only).
	gpath string
	// filterAt is the index of the [?] step, or -1.
	filterAt int
}

// parseSelector compiles s, whose root must be one of roots. The forms are
// root, root.key, root['key'], root[3], root[?] and root['a','b'] (last
// step only), chained. A dot key is one or more Unicode letters, digits,
// '_' or '-'; a quoted key is any text without quotes, backslashes or
// control characters.
func parseSelector(s string, roots ...string) (Selector, error) {
	if len(s) > maxSelectorLen {
		return Selector{}, fmt.Errorf("is longer than %d bytes", maxSelectorLen)
	}
	if !utf8.ValidString(s) {
		return Selector{}, fmt.Errorf("must be valid UTF-8")
	}
	sel := Selector{text: s, filterAt: -1}
	rest := ""
	for _, r := range roots {
		if after, ok := strings.CutPrefix(s, r); ok && (after == "" || after[0] == '.' || after[0] == '[') {
			sel.root, rest = r, after
			break
		}
	}
	if sel.root == "" {
		return Selector{}, fmt.Errorf("must start with %s, got %q", strings.Join(roots, " or "), clip(s))
	}
	for rest != "" {
		if len(sel.steps) == maxSelectorSteps {
			return Selector{}, fmt.Errorf("has more than %d steps", maxSelectorSteps)
		}
		if len(sel.steps) > 0 && sel.steps[len(sel.steps)-1].kind == stepKeys {
			return Selector{}, fmt.Errorf("['a','b'] must be the last step of %q", clip(s))
		}
		var st step
		var err error
		switch rest[0] {
		case '.':
			st, rest, err = parseDotKey(rest[1:])
		case '[':
			st, rest, err = parseBracket(rest[1:])
		default:
			err = fmt.Errorf("unexpected %q in %q", rest[:1], clip(s))
		}
		if err != nil {
			return Selector{}, err
		}
		if st.kind == stepFilter {
			if sel.filterAt >= 0 {
				return Selector{}, fmt.Errorf("may hold at most one [?]")
			}
			sel.filterAt = len(sel.steps)
		}
		sel.steps = append(sel.steps, st)
	}
	sel.gpath = gjsonPath(sel.steps, sel.filterAt)
	return sel, nil
}

func parseDotKey(s string) (step, string, error) {
	end := 0
	for end < len(s) {
		r, size := utf8.DecodeRuneInString(s[end:])
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '_' && r != '-' {
			break
		}
		end += size
	}
	if end == 0 {
		if s == "" || s[0] == '.' || s[0] == '[' {
			return step{}, "", fmt.Errorf("has an empty field name")
		}
		return step{}, "", fmt.Errorf("field names after '.' may hold only letters, digits, '_' and '-' (use ['...'] for others), got %q", clip(s))
	}
	return step{kind: stepKey, key: s[:end]}, s[end:], nil
}

func parseBracket(s string) (step, string, error) {
	switch {
	case strings.HasPrefix(s, "?]"):
		return step{kind: stepFilter}, s[2:], nil
	case s != "" && s[0] >= '0' && s[0] <= '9':
		end := 0
		for end < len(s) && s[end] >= '0' && s[end] <= '9' {
			end++
		}
		if end >= len(s) || s[end] != ']' {
			return step{}, "", fmt.Errorf("an index must be digits followed by ']'")
		}
		n, err := strconv.Atoi(s[:end])
		if err != nil || n > maxArrayIndex {
			return step{}, "", fmt.Errorf("an index must be at most %d", maxArrayIndex)
		}
		return step{kind: stepIndex, index: n}, s[end+1:], nil
	case s != "" && (s[0] == '\'' || s[0] == '"'):
		var keys []string
		for {
			q := s[0]
			end := strings.IndexByte(s[1:], q)
			if end < 0 {
				return step{}, "", fmt.Errorf("has an unterminated quoted key")
			}
			key := s[1 : 1+end]
			if key == "" {
				return step{}, "", fmt.Errorf("has an empty quoted key")
			}
			for _, r := range key {
				if r < 0x20 || r == 0x7f || r == '\\' {
					return step{}, "", fmt.Errorf("a quoted key may not hold %q", r)
				}
			}
			keys = append(keys, key)
			s = strings.TrimLeft(s[end+2:], " ")
			if strings.HasPrefix(s, "]") {
				s = s[1:]
				break
			}
			if !strings.HasPrefix(s, ",") {
				return step{}, "", fmt.Errorf("quoted keys must be separated by ',' and closed by ']'")
			}
			s = strings.TrimLeft(s[1:], " ")
			if s == "" || (s[0] != '\'' && s[0] != '"') {
				return step{}, "", fmt.Errorf("expected a quoted key after ','")
			}
			if len(keys) >= maxSelectorSteps {
				return step{}, "", fmt.Errorf("lists more than %d keys", maxSelectorSteps)
			}
		}
		if len(keys) == 1 {
			return step{kind: stepKey, key: keys[0]}, s, nil
		}
		return step{kind: stepKeys, keys: keys}, s, nil
	}
	return step{}, "", fmt.Errorf("'[' must be followed by an index, a quoted key or '?]'")
}

// gjsonPath renders steps[:upto] (all when upto < 0) as a gjson path,
// escaping every character other than letters, digits, '_' and '-'.
func gjsonPath(steps []step, upto int) string {
	if upto < 0 {
		upto = len(steps)
	}
	var b strings.Builder
	for i, st := range steps[:upto] {
		if st.kind == stepKeys {
			break
		}
		if i > 0 {
			b.WriteByte('.')
		}
		if st.kind == stepIndex {
			b.WriteString(strconv.Itoa(st.index))
			continue
		}
		for _, r := range st.key {
			if r < utf8.RuneSelf && !(r == '_' || r == '-' || unicode.IsLetter(r) || unicode.IsDigit(r)) {
				b.WriteByte('\\')
			}
			b.WriteRune(r)
		}
	}
	return b.String()
}

// isRoot reports whether the selector is its root alone.
func (s Selector) isRoot() bool { return len(s.steps) == 0 }

// String renders the selector as it was written.
func (s Selector) String() string { return s.text }

// clip shortens s for quoting in a message: at most 64 bytes of it, cut on
// a rune boundary and followed by "…" when cut, as valid UTF-8.
func clip(s string) string {
	return safetext.Clip(s, 64+len(safetext.Ellipsis))
}

// ReadID returns the id an event's data holds at s, an IDField: a string,
// or a number's literal text.
func (s *Selector) ReadID(data []byte) (string, error) {
	var r gjson.Result
	if data != nil {
		r = gjson.GetBytes(data, s.gpath)
	}
	switch r.Type {
	case gjson.String:
		return r.Str, nil
	case gjson.Number:
		return r.Raw, nil
	}
	if !r.Exists() {
		return "", fmt.Errorf("idField %s is missing from the event", s)
	}
	return "", fmt.Errorf("idField %s must be a string or a number, not %s", s, clip(r.Raw))
}
