package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/eventkit-go/eventstore/storage"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Tenants share the tables of their schema (docs/tenants-postgres.md).
// Every table is a view of the rows of one tenant: the rows live in a
// table named with the suffix _rows, whose first column, tenant, leads
// every key and index, and the view of the same name as the table before
// schema version 8 selects the rows whose tenant is the setting
// eventstore.tenant and checks that every row written through it has that
// tenant (WITH CHECK OPTION), the column's default. Every statement of this
// package names the views, so none can read or write another tenant's
// rows, and the statements' texts are the same for every tenant: each is
// prepared once per connection and its generic plan serves them all.
//
// The setting is transaction-local: the first statement of every
// transaction and every pipeline sets it (setTenantSQL), and it is gone
// when the transaction ends. A statement run without it fails, because the
// views read it without missing_ok, rather than reading another tenant's
// rows.

// DefaultTenant is the tenant of a Storage opened without Options.Tenant:
// the schema's own data.
const DefaultTenant = "00000000-0000-0000-0000-000000000000"

// tenantSQL is the tenant of the transaction, which every view compares
// with (schema version 8).
const tenantSQL = `current_setting('eventstore.tenant')::uuid`

// setTenantSQL sets the tenant of the transaction it runs in.
const setTenantSQL = `SELECT set_config('eventstore.tenant', $1, true)`

// setTenantLazySQL is setTenantSQL for a transaction that commits without
// waiting for its commit to be durable (synchronous_commit off): one that
// stores only what can be computed again from what is durable, the states
// of projections with their checkpoint. Should the server crash before the
// commit reaches the disk, both are lost together, and the projector
// applies the same events again from the checkpoint before; what it saves
// is a flush of the log per commit, which the appends would otherwise
// queue behind.
const setTenantLazySQL = `SELECT set_config('eventstore.tenant', $1, true), set_config('synchronous_commit', 'off', true)`

// tenantOf returns the canonical text of opts.Tenant, DefaultTenant when
// it is empty, or an error wrapping storage.ErrInvalid when it is not a
// UUID.
func tenantOf(opts *Options) (string, error) {
	if opts == nil || opts.Tenant == "" {
		return DefaultTenant, nil
	}
	id, err := uuid.Parse(opts.Tenant)
	if err != nil {
		return "", fmt.Errorf("postgres: open: tenant %q is not a UUID: %w", opts.Tenant, storage.ErrInvalid)
	}
	return id.String(), nil
}

// sender is what sends a pipeline: a pool, a pooled connection or a
// transaction.
type sender interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// batchRows are the rows of the last statement of a pipeline; closing them,
// or reading them to the end, closes the pipeline (which releases a pool's
// connection), as pgx.Rows of a query do.
type batchRows struct {
	pgx.Rows
	br  pgx.BatchResults
	err error
}

func (r *batchRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.Close()
	return false
}

func (r *batchRows) Close() {
	r.Rows.Close()
	if r.br != nil {
		if err := r.br.Close(); err != nil && r.err == nil {
			r.err = err
		}
		r.br = nil
	}
}

func (r *batchRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.err
}

// errRow is a pgx.Row whose Scan returns err.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// rowsRow is a pgx.Row that scans the first of rows and closes them.
type rowsRow struct{ rows pgx.Rows }

func (r rowsRow) Scan(dest ...any) error {
	defer r.rows.Close()
	if !r.rows.Next() {
		r.rows.Close()
		if err := r.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	r.rows.Close()
	return r.rows.Err()
}

// queryOn runs sql on db in the store's tenant: one pipeline of
// setTenantSQL and sql, one round trip.
func (s *store) queryOn(ctx context.Context, db sender, sql string, args ...any) (pgx.Rows, error) {
	if s.replica != nil {
		return s.replica.queryOn(ctx, db, sql, args...)
	}
	b := &pgx.Batch{}
	b.Queue(setTenantSQL, s.tenant)
	b.Queue(sql, args...)
	br := db.SendBatch(ctx, b)
	if _, err := br.Exec(); err != nil {
		br.Close()
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		br.Close()
		return nil, err
	}
	return &batchRows{Rows: rows, br: br}, nil
}

// query runs sql in the store's tenant on a connection of the pool.
func (s *store) query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return s.queryOn(ctx, s.pool, sql, args...)
}

// queryRowOn is queryOn for a statement of one row.
func (s *store) queryRowOn(ctx context.Context, db sender, sql string, args ...any) pgx.Row {
	rows, err := s.queryOn(ctx, db, sql, args...)
	if err != nil {
		return errRow{err}
	}
	return rowsRow{rows}
}

// queryRow is query for a statement of one row.
func (s *store) queryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return s.queryRowOn(ctx, s.pool, sql, args...)
}

// exec runs sql in the store's tenant and returns its command tag.
func (s *store) exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	b := &pgx.Batch{}
	b.Queue(setTenantSQL, s.tenant)
	b.Queue(sql, args...)
	br := s.pool.SendBatch(ctx, b)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return pgconn.CommandTag{}, err
	}
	tag, err := br.Exec()
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	return tag, br.Close()
}

// beginFunc runs fn in a transaction in the store's tenant, as
// pgx.BeginTxFunc does.
func (s *store) beginFunc(ctx context.Context, opts pgx.TxOptions, fn func(pgx.Tx) error) error {
	return pgx.BeginTxFunc(ctx, s.pool, opts, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, setTenantSQL, s.tenant); err != nil {
			return err
		}
		return fn(tx)
	})
}

// tenantTables are the tables of a schema, each with its tenant column
// (schema version 8), the columns other than tenant (and the identity of
// projection_errors) that a copy between schemas lists, and the order it
// copies the rows in.
var tenantTables = []struct{ name, cols, order string }{
	{"events", `position, aggregate_type, aggregate_id, event_id, event_type, data, version, sequence, recorded_at,
	feed_sequence, encrypted_data, tx, metadata`, "position"},
	{"definitions", `name, spec, created_at, checkpoint, instances`, "name"},
	{"projection_states", `name, instance_id, data, position, updated_at, created_at, ref_rank, ref_num, ref_text,
	ref_number, search`, "name, instance_id"},
	// New ids, in the order of the old ones (the order of the errors).
	{"projection_errors", `name, position, event_id, event_type, instance_id, message`, "id"},
	{"deleted_marks", `feed, mark`, "feed"},
	{"reaction_definitions", `name, spec, created_at, checkpoint`, "name"},
	// Before reactions: a deletion locks a reaction's row of the queue
	// first, as every statement that changes both does.
	{"reaction_queue", `id, definition, aggregate_id, state, due_at`, "id"},
	{"reactions", `id, definition, aggregate_type, aggregate_id, event_id, event_type, state, created_at, trigger_at,
	due_at, finished_at, attempts, claim, last_error, payload`, "id"},
	{"snapshots", `aggregate_type, aggregate_id, version, state_version, data, recorded_at`, "aggregate_type, aggregate_id"},
}

// DeleteTenant deletes every event, feed mark, projection definition,
// state and error, and reaction of tenant in schema, in one transaction,
// after the appends of the tenant in flight have ended; the other tenants
// are not held back. Positions are never given again, so a tenant opened
// again afterwards starts empty. Close the tenant's Storages in every
// process first: one still open goes on writing. A schema that holds no
// tables yet has nothing to delete. tenant must be a UUID other than
// DefaultTenant (ErrInvalid).
func DeleteTenant(ctx context.Context, pool *pgxpool.Pool, schema, tenant string) error {
	if schema == "" {
		schema = DefaultSchema
	}
	id, err := uuid.Parse(tenant)
	if err != nil || id == uuid.Nil {
		return fmt.Errorf("postgres: delete tenant: %q is not a tenant's UUID: %w", tenant, storage.ErrInvalid)
	}
	quoted := pgx.Identifier{schema}.Sanitize()
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, quoted+".events_rows").Scan(&exists); err != nil || !exists {
			return err
		}
		// As a deletion does (see delete): no append of the tenant is in
		// flight or starts until this commits.
		for _, purpose := range []string{"append", "drain"} {
			if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, tenantLockKey(purpose, schema, id.String())); err != nil {
				return err
			}
		}
		for _, t := range tenantTables {
			if _, err := tx.Exec(ctx, `DELETE FROM `+quoted+`.`+t.name+`_rows WHERE tenant = $1`, id); err != nil {
				return err
			}
		}
		return nil
	})
	return tenantFail("delete tenant", err)
}

// tenantFail wraps err, of op on a tenant, with its sentinel (see
// classify); nil stays nil.
func tenantFail(op string, err error) error {
	if err == nil {
		return nil
	}
	if sentinel := classify(err); sentinel != nil && !errors.Is(err, sentinel) {
		return fmt.Errorf("postgres: %s: %v: %w", op, err, sentinel)
	}
	return fmt.Errorf("postgres: %s: %w", op, err)
}

// ImportTenant moves the data of the schema from, a store of its own as
// Open keeps one, into the tenant opts.Tenant of opts.Schema, then drops
// from: events (with their positions and FeedSequences), feed marks,
// projection definitions, states and errors, reactions. It is how stores
// kept in a schema per tenant (before schema version 8) join their
// project's tables; both schemas are migrated first. It runs in one
// transaction, so a failure leaves both as they were, and it refuses
// (ErrConflict) when the tenant already holds data. A from that does not
// exist is nothing to import. The tenant's Storages must not be open.
func ImportTenant(ctx context.Context, pool *pgxpool.Pool, from string, opts *Options) error {
	tenant, err := tenantOf(opts)
	if err != nil {
		return err
	}
	if tenant == DefaultTenant {
		return fmt.Errorf("postgres: import tenant: no Options.Tenant: %w", storage.ErrInvalid)
	}
	into := opts.schema()
	if from == into {
		return fmt.Errorf("postgres: import tenant: schema %s into itself: %w", from, storage.ErrInvalid)
	}
	src, dst := pgx.Identifier{from}.Sanitize(), pgx.Identifier{into}.Sanitize()
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		// Processes opening the tenant at once import it once: the
		// others wait here, then find the schema gone.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, tenantLockKey("import", into, tenant)); err != nil {
			return err
		}
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, from).Scan(&exists); err != nil || !exists {
			return err
		}
		for _, schema := range []string{from, into} {
			if _, _, err := migrate(ctx, tx, schema, migrateOptions{}); err != nil {
				return err
			}
		}
		for _, purpose := range []string{"append", "drain"} {
			if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, tenantLockKey(purpose, into, tenant)); err != nil {
				return err
			}
		}
		var held bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+dst+`.events_rows WHERE tenant = $1)
	OR EXISTS (SELECT 1 FROM `+dst+`.definitions_rows WHERE tenant = $1)`, tenant).Scan(&held); err != nil {
			return err
		}
		if held {
			return fmt.Errorf("tenant %s of schema %s holds data already: %w", tenant, into, storage.ErrConflict)
		}
		for _, t := range tenantTables {
			if _, err := tx.Exec(ctx, `INSERT INTO `+dst+`.`+t.name+`_rows (tenant, `+t.cols+`)
SELECT $1, `+t.cols+` FROM `+src+`.`+t.name+`_rows WHERE tenant = $2 ORDER BY `+t.order, tenant, DefaultTenant); err != nil {
				return fmt.Errorf("copy %s: %w", t.name, err)
			}
		}
		// Positions continue above every position the tenant had.
		if _, err := tx.Exec(ctx, qualify(dst, `SELECT setval({{positions}}, greatest(
	(SELECT last_value FROM `+dst+`.positions), (SELECT last_value FROM `+src+`.positions)))`)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `DROP SCHEMA `+src+` CASCADE`)
		return err
	})
	return tenantFail("import tenant", err)
}
