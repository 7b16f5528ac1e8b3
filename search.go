package eventstore

import (
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/eventkit-go/eventstore/internal/lang"
	"github.com/eventkit-go/eventstore/internal/limits"
)

// compileIndexedFields compiles a definition's indexedFields
// (lang.IndexedFields), which single projections alone may have.
func compileIndexedFields(v *validation, fields []string, aggregated bool) []lang.Selector {
	if len(fields) == 0 {
		return nil
	}
	if aggregated {
		v.add("indexedFields", "applies to single projections only")
		return nil
	}
	return lang.IndexedFields(v, fields)
}

// searchWords validates the text of a search and returns its distinct
// words, normalized as indexed text is.
func searchWords(v *validation, text string) []string {
	if text == "" {
		return nil
	}
	if len(text) > limits.MaxSearchBytes {
		v.add("search", "must be at most %d bytes long", limits.MaxSearchBytes)
		return nil
	}
	if !utf8.ValidString(text) {
		v.add("search", "must be valid UTF-8")
		return nil
	}
	b, _ := lang.AppendWords(nil, text, 4*limits.MaxSearchBytes)
	if len(b) == 0 {
		v.add("search", "must contain a word (a letter or a digit)")
		return nil
	}
	var words []string
	for w := range strings.SplitSeq(string(b), " ") {
		if !slices.Contains(words, w) {
			words = append(words, w)
		}
	}
	if len(words) > limits.MaxSearchWords {
		v.add("search", "at most %d words are allowed", limits.MaxSearchWords)
		return nil
	}
	return words
}
