package sqlite

import (
	"context"
	"errors"

	"github.com/eventkit-go/eventstore"
)

// errTodo marks a Storage method of the new contract not implemented yet.
var errTodo = errors.ErrUnsupported

// DeleteDefinition implements eventstore.Storage.
func (s *Storage) DeleteDefinition(ctx context.Context, name string) error {
	return errTodo
}

// ResetProjection implements eventstore.Storage.
func (s *Storage) ResetProjection(ctx context.Context, name string) error {
	return errTodo
}

// RenameProjection implements eventstore.Storage.
func (s *Storage) RenameProjection(ctx context.Context, from, to string) error {
	return errTodo
}

// LoadProjections implements eventstore.Storage.
func (s *Storage) LoadProjections(ctx context.Context, name string, ids []string) ([]eventstore.ProjectionState, error) {
	return nil, errTodo
}

// ListProjections implements eventstore.Storage.
func (s *Storage) ListProjections(ctx context.Context, q eventstore.ProjectionQuery) (eventstore.ProjectionList, error) {
	return eventstore.ProjectionList{}, errTodo
}
