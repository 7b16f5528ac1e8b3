// Package limits holds the bounds and defaults of the event store's input
// and options, shared by package eventstore and the packages that decode
// its input (httpapi, tenancy, reactions). The user-facing documentation of
// each is beside the field it bounds.
package limits

import (
	"time"

	"github.com/eventkit-go/eventstore/storage"
)

// Limits and defaults. Input beyond a Max fails with a *ValidationError
// naming the field, unless its comment says otherwise; a Default applies
// when the option it names is zero.
const (
	MaxEventsPerSave  = 10_000                   // events of one Store.Save
	MaxDataDepth      = 64                       // nesting of NewEvent.Data; {"a":{"b":[1]}} is 3 deep
	MaxEncryptedData  = storage.MaxEncryptedData // bytes of NewEvent.EncryptedData
	MaxSnapshotBytes  = storage.MaxSnapshotBytes // bytes of Snapshot.Data
	MaxMetadataKeys   = storage.MaxMetadataKeys  // keys of NewEvent.Metadata.Values
	MaxMetadataBytes  = storage.MaxMetadataBytes // encoded bytes of NewEvent.Metadata (storage.AppendMetadata)
	MaxMetadataKeyLen = 64                       // bytes of one key of NewEvent.Metadata.Values
	MaxSaveAllBatches = 1000                     // batches of one Store.SaveAll
	MaxSaveAllEvents  = 10_000                   // events of one Store.SaveAll, all batches
	MaxFieldErrors    = 100                      // ValidationError.Fields; the rest are counted in Omitted
	MaxImportSkew     = 5 * time.Minute          // how far after the Store's clock ImportedBatch.RecordedAt may be

	DefaultFeedLimit  = 100  // FeedOptions.Limit
	MaxFeedLimit      = 1000 // FeedOptions.Limit
	MaxFeedTypes      = 100  // FeedOptions.Types
	MaxPartitionCount = 1000 // FeedOptions.PartitionCount

	MaxHandlers         = 1000     // Definition.Handlers, also when decoding
	MaxFunctions        = 100      // Handler.Functions, also when decoding
	MaxDescriptionBytes = 1000     // Definition.Description
	MaxIndexedFields    = 20       // Definition.IndexedFields
	MaxSearchBytes      = 200      // ListOptions.Search
	MaxSearchWords      = 10       // distinct words of ListOptions.Search
	MaxSearchTextBytes  = 16 << 10 // indexed text of one instance; words past it are not indexed
	DefaultListLimit    = 100      // ListOptions.Limit, AggregateListOptions.Limit
	MaxListLimit        = 1000     // ListOptions.Limit, AggregateListOptions.Limit

	DefaultMaxReadBytes     = 1 << 20 // Options.MaxReadBytes
	DefaultBatchSize        = 1000    // ProjectorOptions.BatchSize
	DefaultMaxInstanceBytes = 1 << 20 // ProjectorOptions.MaxInstanceBytes
	DefaultMaxDefinitions   = 1000    // ProjectorOptions.MaxDefinitions
)

// The earliest and latest FeedOptions.From and To.
var (
	MinFeedTime = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)
	MaxFeedTime = time.Date(9999, 12, 31, 23, 59, 59, 999_999_999, time.UTC)
)
