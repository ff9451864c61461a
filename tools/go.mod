module github.com/switchyard-ai/switchyard/tools

go 1.26.8

require go.uber.org/goleak v1.3.0
