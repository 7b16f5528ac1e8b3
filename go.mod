module github.com/eventkit-go/eventstore

go 1.26.8

require (
	github.com/google/uuid v1.6.0
	github.com/tidwall/gjson v1.20.1
)

require (
	github.com/tidwall/match v1.1.1 // indirect
	github.com/tidwall/pretty v1.2.0 // indirect
)
