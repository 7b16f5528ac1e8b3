package upgrade

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// DocumentedKinds returns the kinds that the table after the line heading
// in the Markdown file path gives the migrations, by version: the rows
// "| version | kind | why |" up to the first line that is not one. Tests
// check that docs/upgrades.md matches the code with it.
func DocumentedKinds(path, heading string) (map[int]Kind, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	lines := strings.Split(string(b), "\n")
	start := -1
	for i, l := range lines {
		if strings.HasPrefix(l, heading) {
			start = i
			break
		}
	}
	if start < 0 {
		return nil, fmt.Errorf("%s: no line starting %q", path, heading)
	}
	kinds := map[int]Kind{}
	for _, l := range lines[start+1:] {
		if l == "" && len(kinds) == 0 {
			continue
		}
		cells := strings.Split(l, "|")
		if !strings.HasPrefix(l, "|") || len(cells) < 4 {
			break
		}
		v, err := strconv.Atoi(strings.TrimSpace(cells[1]))
		if err != nil {
			continue // the header and its rule
		}
		switch strings.TrimSpace(cells[2]) {
		case "expand":
			kinds[v] = Expand
		case "contract":
			kinds[v] = Contract
		default:
			return nil, fmt.Errorf("%s: version %d has kind %q", path, v, strings.TrimSpace(cells[2]))
		}
	}
	return kinds, nil
}
