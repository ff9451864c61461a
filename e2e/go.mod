module github.com/switchyard-ai/switchyard/e2e

go 1.26.8

require (
	github.com/switchyard-ai/switchyard/shared v0.0.0
	github.com/switchyard-ai/switchyard/migrations v0.0.0
)

replace (
	github.com/switchyard-ai/switchyard/shared => ../shared
	github.com/switchyard-ai/switchyard/migrations => ../migrations
)
