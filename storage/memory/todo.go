package memory

import (
	"context"
	"errors"

	"github.com/eventkit-go/eventstore"
)

// errTodo marks a Storage method of the new contract not implemented yet.
var errTodo = errors.ErrUnsupported

// AppendAll implements eventstore.Storage.
func (s *Storage) AppendAll(ctx context.Context, reqs []eventstore.AppendRequest) ([]eventstore.AppendResult, error) {
	return nil, errTodo
}

// FeedHead implements eventstore.Storage.
func (s *Storage) FeedHead(ctx context.Context, aggregateType string) (int64, error) {
	return 0, errTodo
}

// Feeds implements eventstore.Storage.
func (s *Storage) Feeds(ctx context.Context) ([]eventstore.FeedInfo, error) {
	return nil, errTodo
}

// DeleteAggregate implements eventstore.Storage.
func (s *Storage) DeleteAggregate(ctx context.Context, aggregateType, aggregateID string) error {
	return errTodo
}

// DeleteAggregateType implements eventstore.Storage.
func (s *Storage) DeleteAggregateType(ctx context.Context, aggregateType string) error {
	return errTodo
}

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
