package eventstore

// Limits on what one call may carry. They bound the memory and time a
// single request can cost, and guarantee that whatever is stored can be
// served back (encoders refuse very deep JSON).
const (
	// MaxDataDepth is how deeply event data may nest: the data object
	// itself is level 1, so {"a":{"b":[1]}} is 3 levels deep. Save refuses
	// deeper data with a *ValidationError naming the event.
	MaxDataDepth = 64

	// MaxEventsPerSave is how many events one Save may hold; Save refuses
	// more with a *ValidationError for the field "events".
	MaxEventsPerSave = 10_000
)
