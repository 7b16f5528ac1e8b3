package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	"github.com/eventkit-go/eventstore/httpapi"
)

// maxKeyFileBytes bounds the key file read at start and on reload.
const maxKeyFileBytes = 1 << 20

// projectNameRE is the set of project names: they name files and
// PostgreSQL schemas, so only letters, digits, '_' and '-'.
var projectNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// projectKey is one line of a key file: a project and its key pair.
type projectKey struct {
	name string
	key  httpapi.KeyPair
	line int
}

// readKeyFile reads and parses the key file at path; see parseKeyFile.
func readKeyFile(path string, check func(name string) error) ([]projectKey, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("-keys: %w", err)
	}
	defer f.Close()
	keys, err := parseKeyFile(io.LimitReader(f, maxKeyFileBytes+1), check)
	if err != nil {
		return nil, fmt.Errorf("-keys %s:%w", path, err)
	}
	return keys, nil
}

// parseKeyFile parses a key file: one project a line, "NAME ACCESS_KEY
// SECRET_KEY" separated by spaces or tabs; '#' starts a comment to the end
// of the line; blank lines are ignored. It refuses a line with another
// number of fields, a bad project name, a name that another line names
// (ignoring case, as file names may), an access key that another line
// uses, a key holding a control character, a name that check refuses, and
// a file that names no project. The error begins with the line number and
// a colon, and never holds a key.
func parseKeyFile(r io.Reader, check func(name string) error) ([]projectKey, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxKeyFileBytes+1)
	var keys []projectKey
	names := map[string]int{}  // lower-case name → line
	access := map[string]int{} // access key → line
	read := 0
	n := 0
	for sc.Scan() {
		n++
		read += len(sc.Bytes()) + 1
		if read > maxKeyFileBytes+1 {
			return nil, fmt.Errorf("%d: the key file is larger than %d bytes", n, maxKeyFileBytes)
		}
		line, _, _ := strings.Cut(sc.Text(), "#")
		line = strings.TrimSuffix(line, "\r")
		fields := strings.FieldsFunc(line, func(r rune) bool { return r == ' ' || r == '\t' })
		switch len(fields) {
		case 0:
			continue
		case 3:
		case 2:
			return nil, fmt.Errorf("%d: 2 fields, no secret key: write NAME ACCESS_KEY SECRET_KEY", n)
		default:
			return nil, fmt.Errorf("%d: want 3 fields separated by blanks (NAME ACCESS_KEY SECRET_KEY), got %d", n, len(fields))
		}
		name := fields[0]
		if !projectNameRE.MatchString(name) {
			return nil, fmt.Errorf("%d: bad project name %q: use 1 to 64 letters, digits, '_' or '-'", n, clipName(name))
		}
		for i, what := range []string{"", "access key", "secret key"} {
			if i > 0 && strings.IndexFunc(fields[i], badKeyRune) >= 0 {
				return nil, fmt.Errorf("%d: the %s of project %s holds a control character", n, what, name)
			}
		}
		if at, ok := names[strings.ToLower(name)]; ok {
			return nil, fmt.Errorf("%d: project %s is already named on line %d (names are compared ignoring case)", n, name, at)
		}
		if at, ok := access[fields[1]]; ok {
			return nil, fmt.Errorf("%d: the access key of project %s is already used on line %d", n, name, at)
		}
		if check != nil {
			if err := check(name); err != nil {
				return nil, fmt.Errorf("%d: project %s: %w", n, name, err)
			}
		}
		names[strings.ToLower(name)], access[fields[1]] = n, n
		keys = append(keys, projectKey{name: name, key: httpapi.KeyPair{AccessKey: fields[1], SecretAccessKey: fields[2]}, line: n})
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("%d: the key file is larger than %d bytes", n+1, maxKeyFileBytes)
		}
		return nil, fmt.Errorf("%d: %w", n+1, err)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%d: the key file names no project", n)
	}
	return keys, nil
}

// clipName shortens a refused name for a message.
func clipName(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
