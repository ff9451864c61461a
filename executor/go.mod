module github.com/switchyard-ai/switchyard/executor

go 1.26.8

require (
	github.com/labstack/echo/v4 v4.16.0 // indirect
	github.com/labstack/gommon v0.5.0 // indirect
	github.com/mattn/go-colorable v0.1.15 // indirect
	github.com/mattn/go-isatty v0.0.24 // indirect
	github.com/prometheus/client_golang v1.25.0 // indirect
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.3 // indirect
	github.com/sashabaranov/go-openai v1.43.0 // indirect
	github.com/valyala/bytebufferpool v1.0.0 // indirect
	github.com/valyala/fasttemplate v1.2.2 // indirect
	golang.org/x/crypto v0.58.0 // indirect
	golang.org/x/net v0.61.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/text v0.43.0 // indirect
)

require (
	github.com/switchyard-ai/switchyard/migrations v0.0.0
	github.com/switchyard-ai/switchyard/shared v0.0.0
)

replace (
	github.com/switchyard-ai/switchyard/migrations => ../migrations
	github.com/switchyard-ai/switchyard/shared => ../shared
)
