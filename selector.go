package eventstore

import (
	"fmt"
	"strings"
	"unicode"
)

// Selector roots of the documented forms.
const (
	projectionRoot = "$.projection"
	eventRoot      = "$.event"
)

// Limits of a selector.
const (
	maxSelectorKeys = 32
	maxSelectorLen  = 512
)

// selector is a compiled path such as $.projection.address.city: the keys
// after the root, and the paths gjson and sjson use to address them.
type selector struct {
	root  string
	keys  []string
	gpath string // for gjson reads
	spath string // for sjson writes: numeric keys forced to object keys
}

// parseSelector compiles s, which must be root followed by one or more
// ".key" parts. A key is one or more Unicode letters, digits, '_' or '-'.
func parseSelector(s, root string) (selector, error) {
	if len(s) > maxSelectorLen {
		return selector{}, fmt.Errorf("is longer than %d bytes", maxSelectorLen)
	}
	rest, ok := strings.CutPrefix(s, root)
	if !ok || !strings.HasPrefix(rest, ".") {
		return selector{}, fmt.Errorf("must have the form %s.<field>[.<field>...], got %q", root, clip(s))
	}
	keys := strings.Split(rest[1:], ".")
	if len(keys) > maxSelectorKeys {
		return selector{}, fmt.Errorf("has more than %d fields", maxSelectorKeys)
	}
	sel := selector{root: root, keys: keys}
	var g, w strings.Builder
	for i, k := range keys {
		if k == "" {
			return selector{}, fmt.Errorf("has an empty field name in %q", clip(s))
		}
		numeric := true
		for _, r := range k {
			if !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '_' && r != '-' {
				return selector{}, fmt.Errorf("field %q may hold only letters, digits, '_' and '-'", clip(k))
			}
			if r < '0' || r > '9' {
				numeric = false
			}
		}
		if i > 0 {
			g.WriteByte('.')
			w.WriteByte('.')
		}
		g.WriteString(k)
		if numeric {
			w.WriteByte(':') // sjson: an object key, not an array index
		}
		w.WriteString(k)
	}
	sel.gpath, sel.spath = g.String(), w.String()
	return sel, nil
}

// String renders the selector in its documented form.
func (s selector) String() string {
	return s.root + "." + strings.Join(s.keys, ".")
}
