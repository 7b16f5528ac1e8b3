package sqlite

import (
	"testing"

	"github.com/eventkit-go/eventstore/internal/upgrade"
)

// TestMigrationKindsDocumented checks that docs/upgrades.md gives every
// migration the kind it has here.
func TestMigrationKindsDocumented(t *testing.T) {
	doc, err := upgrade.DocumentedKinds("../../docs/upgrades.md", "SQLite (`storage/sqlite/schema.go`)")
	if err != nil {
		t.Fatal(err)
	}
	if len(doc) != len(migrations) {
		t.Errorf("docs/upgrades.md lists %d SQLite migrations, the code has %d", len(doc), len(migrations))
	}
	for i, m := range migrations {
		if m.kind != upgrade.Expand && m.kind != upgrade.Contract {
			t.Errorf("migration %d has no kind", i+1)
		}
		if doc[i+1] != m.kind {
			t.Errorf("migration %d is %v here, %v in docs/upgrades.md", i+1, m.kind, doc[i+1])
		}
	}
}
